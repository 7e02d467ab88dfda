"""Batched pseudo-log-likelihood scoring for masked LMs (BERT, RoBERTa, XLM-R, ...).

PPLL (Salazar et al. 2020, "Masked Language Model Scoring", Eq. 1-2)::

    PLL(S) = sum_{t in positions} log P(w_t | S with w_t replaced by [MASK])

Masking one token at a time needs one forward pass per scored token. The engine turns every
(sentence, position) pair of *all* sentences of a call into one masked copy ("job"), sorts the jobs
by sentence length (longest first) and packs them into batches under a padded-token budget, so a
benchmark with thousands of sentences runs in full batches instead of one tiny forward per token.

MPLL (CrowS-Pairs, Nangia et al. 2020, 3) is the same sum restricted to the positions of the tokens
shared by two sentences: pass those ``positions``; :meth:`MaskedScorer.pair_scores` finds them
with ``difflib`` on token ids as the authors' ``metric.py`` does (:mod:`biaslab.scoring.shared_tokens`).

Memory: a ``[B, T, V]`` logits tensor for every masked copy is mostly waste (only one position per
row is scored). A forward pre-hook on the output-embedding projection (``get_output_embeddings()``,
the ``hidden -> vocab`` Linear of BERT/RoBERTa/XLM-R/DistilBERT heads) keeps only the masked row's
hidden state, so the head computes ``[B, 1, V]`` logits. Models without an output-embedding module
fall back to full logits. Rows per batch are capped so ``[B, V]`` stays under ``LOGIT_BUDGET`` floats.

Prompt debiasing (:meth:`MaskedScorer.with_prefix`): the instruction is encoded before the sentence
and conditions every prediction, but its tokens are never scored.

Shapes: ``input_ids [B, T]`` (right-padded), ``mask_pos [B]``, ``logits [B, 1, V]`` (hooked) or
``[B, T, V]`` (fallback), ``logprobs [B, V]``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch

from biaslab.scoring.device import input_device
from biaslab.scoring.progress import progress
from biaslab.scoring.protocol import (
    PPLL,
    PairScore,
    SentenceScore,
    TokenScore,
    UnsupportedCapability,
    ItemError,
    check_pair_methods,
)
from biaslab.scoring.masked_rows import LOGIT_BUDGET, cap_rows_by_positions, only_masked_positions, score_masked_rows


@dataclass
class MaskedScorer:
    """The :class:`~biaslab.scoring.protocol.Scorer` of a Hugging Face masked LM (``AutoModelForMaskedLM``).

    Sentences are scored by pseudo-log-likelihood; a masked LM has no next-token distribution, so it
    has none of the capabilities (no ``loglikelihood`` of a continuation, no generation).
    """

    model: torch.nn.Module
    tokenizer: object
    batch_size: int | str = "auto"
    max_batch_tokens: int | str = 1024  # padded tokens per pass (auto: causal_budget.auto_batch_tokens)
    max_length: int | None = None
    prompt_prefix: str = ""
    prefix_separator: str = " "  # between the prefix and the sentence
    kind: str = field(default="masked", init=False)
    capabilities: frozenset = field(default=frozenset(), init=False)
    description: str = field(default="masked LM, pseudo-log-likelihood", init=False)

    def __post_init__(self) -> None:
        self.model.eval()
        if self.tokenizer.mask_token_id is None:
            raise ValueError("masked scoring needs a tokenizer with a mask token ([MASK] / <mask>)")
        if self.max_length is None:
            limit = getattr(self.tokenizer, "model_max_length", None)
            positions = getattr(self.model.config, "max_position_embeddings", 512)
            self.max_length = int(limit) if limit and limit < 1_000_000 else int(positions)
        if self.max_batch_tokens == "auto":
            from biaslab.scoring.causal_budget import auto_batch_tokens

            self.max_batch_tokens = auto_batch_tokens(self.model)

    def supports(self, capability: str) -> bool:
        return capability in self.capabilities

    # ------------------------------------------------------------------ unsupported (capabilities)
    def _unsupported(self, what: str):
        raise UnsupportedCapability(f"a masked LM cannot {what}; ask scorer.supports(...) first")

    def loglikelihood(self, requests, desc: str | None = None):
        self._unsupported("score a continuation after a prompt (no next-token distribution)")

    def generate(self, prompts, max_new_tokens: int = 5, desc: str | None = None):
        self._unsupported("generate text")

    def geometric_mean_probabilities(self, sentences, pairs=(), pad_with_eos: bool = True, desc: str | None = None):
        self._unsupported("give left-to-right sentence probabilities with EOS pair padding")

    # ------------------------------------------------------------------ protocol operations
    def sentence_scores(self, sentences: Sequence[str], desc: str | None = None) -> list[SentenceScore]:
        """PPLL of each sentence and the number of tokens it sums over (0 tokens score 0.0)."""
        ids = self.encode(sentences)
        positions = [self.scorable_positions(i) for i in ids]
        values = self.pseudo_loglikelihood(ids, positions, desc=desc)
        return [SentenceScore(v, len(p)) for v, p in zip(values, positions)]

    def pair_scores(self, first: Sequence[str], second: Sequence[str], method: str | Sequence[str] = PPLL,
                    desc: str | None = None) -> list[PairScore]:
        """PPLL, or MPLL (the tokens the two sentences share, CrowS-Pairs), per pair; one packed engine call.

        MPLL positions: :func:`~biaslab.scoring.shared_tokens.shared_token_positions` on the token ids; the
        authors then skip the first and last template entries (``[CLS]``/``[SEP]``), we drop every
        special-token position, which is the same for any pair whose specials align.
        """
        from biaslab.scoring.shared_tokens import shared_token_positions

        if len(first) != len(second):
            raise ValueError(f"{len(first)} first sentences but {len(second)} second sentences")
        n = len(first)
        methods = check_pair_methods(method, n)
        ids = self.encode([*first, *second])
        positions: list[list[int]] = [[] for _ in range(2 * n)]
        for i, m in enumerate(methods):
            ids_a, ids_b = ids[i], ids[n + i]
            if m == PPLL:
                positions[i], positions[n + i] = self.scorable_positions(ids_a), self.scorable_positions(ids_b)
            else:
                pos_a, pos_b = shared_token_positions(ids_a, ids_b)
                keep_a, keep_b = set(self.scorable_positions(ids_a)), set(self.scorable_positions(ids_b))
                shared = [(a, b) for a, b in zip(pos_a, pos_b) if a in keep_a and b in keep_b]
                positions[i], positions[n + i] = [a for a, _ in shared], [b for _, b in shared]
        values = self.pseudo_loglikelihood(ids, positions, desc=desc)
        return [PairScore(methods[i], SentenceScore(values[i], len(positions[i])),
                          SentenceScore(values[n + i], len(positions[n + i]))) for i in range(n)]

    def token_scores(self, sentences: Sequence[str], desc: str | None = None) -> list[list[TokenScore]]:
        """Each scorable token's pseudo-log-probability (masked alone), with its text."""
        ids = self.encode(sentences)
        positions = [self.scorable_positions(i) for i in ids]
        per_token = self.token_pseudo_logprobs(ids, positions, desc=desc)
        return [[TokenScore(self.tokenizer.decode([sent[p]]), lp) for p, lp in zip(pos, lps)]
                for sent, pos, lps in zip(ids, positions, per_token)]

    def cloze_scores(self, contexts: Sequence[str], words: Sequence[str], desc: str | None = None) -> list[SentenceScore]:
        """``log P([MASK]... = pronoun | context + " " + word with the pronoun masked)``; ``n_tokens`` = masks.

        The pronoun is ``word`` without surrounding punctuation (:mod:`biaslab.scoring.masked_cloze`); one
        forward row per distinct masked sentence. An item whose pronoun cannot be located raises, naming it.
        """
        from biaslab.scoring.masked_cloze import masked_cloze_job

        if len(contexts) != len(words):
            raise ValueError(f"{len(contexts)} contexts but {len(words)} words")
        jobs = []
        for k, (context, word) in enumerate(zip(contexts, words)):
            try:
                jobs.append(masked_cloze_job(self, context, word))
            except ValueError as exc:
                raise ItemError(k, str(exc)) from None
        logprobs = self.masked_token_logprobs([j[0] for j in jobs], [j[1] for j in jobs], [j[2] for j in jobs],
                                              desc=desc)
        return [SentenceScore(lp, len(j[1])) for lp, j in zip(logprobs, jobs)]

    def word_vectors(self, words: Sequence[str]):
        """The model's input embeddings, mean over each word's sub-tokens (:func:`biaslab.scoring.static_vectors.model_vectors`)."""
        from biaslab.scoring.static_vectors import model_vectors

        return model_vectors(self.model, self.tokenizer, words)

    # ------------------------------------------------------------------ variants
    def with_prefix(self, prefix: str) -> "MaskedScorer":
        """The same model with an instruction before every sentence (prompt debiasing).

        The sentence is encoded as ``prefix + " " + sentence``; the prefix tokens condition every
        masked prediction but are never scored (:meth:`scorable_positions` skips them).
        """
        return MaskedScorer(self.model, self.tokenizer, self.batch_size, self.max_batch_tokens, self.max_length, prefix,
                            self.prefix_separator)

    def with_prefix_separator(self, separator: str) -> "MaskedScorer":
        """The same scorer joining its prefix (if any) and each sentence with ``separator``."""
        return MaskedScorer(self.model, self.tokenizer, self.batch_size, self.max_batch_tokens, self.max_length,
                            self.prompt_prefix, separator)

    # ------------------------------------------------------------------ tokenisation
    def encode(self, sentences: Sequence[str]) -> list[list[int]]:
        """Token ids with the model's special tokens (``[CLS] ... [SEP]`` / ``<s> ... </s>``)."""
        out = []
        for i, sentence in enumerate(sentences):
            text = f"{self.prompt_prefix}{self.prefix_separator}{sentence}" if self.prompt_prefix else sentence
            ids = list(self.tokenizer(text, add_special_tokens=True)["input_ids"])
            if len(ids) > self.max_length:
                raise ValueError(
                    f"sentence {i} has {len(ids)} tokens, more than the model's maximum {self.max_length}: "
                    f"{sentence[:80]!r}"
                )
            out.append(ids)
        return out

    def scorable_positions(self, token_ids: Sequence[int]) -> list[int]:
        """Positions of the non-special tokens (what PPLL sums over).

        ``[UNK]`` stands for real text, so it is scored (as the CrowS and lmppl loops do); only the
        added structure tokens (``[CLS]``, ``[SEP]``, ``<s>``, ...) are not.
        """
        special = self.tokenizer.get_special_tokens_mask(list(token_ids), already_has_special_tokens=True)
        unk = self.tokenizer.unk_token_id
        positions = [i for i, (t, s) in enumerate(zip(token_ids, special)) if not s or (unk is not None and t == unk)]
        if not self.prompt_prefix or not positions:
            return positions
        prefix = list(self.tokenizer(self.prompt_prefix, add_special_tokens=False)["input_ids"])
        start = positions[0]
        if list(token_ids[start : start + len(prefix)]) != prefix:
            raise ValueError(
                f"prompt prefix {self.prompt_prefix!r} does not tokenise to the same ids inside the sentence; "
                "cannot tell prefix tokens from sentence tokens"
            )
        return [p for p in positions if p >= start + len(prefix)]

    # ------------------------------------------------------------------ scoring
    def sentence_pll(self, sentences: Sequence[str], desc: str | None = None) -> list[float]:
        """PPLL of each sentence: every non-special token masked in turn (natural log)."""
        return self.pseudo_loglikelihood(self.encode(sentences), desc=desc)

    def pseudo_loglikelihood(
        self,
        token_ids: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]] | None = None,
        desc: str | None = None,
    ) -> list[float]:
        """For each sentence, ``sum_{t in positions} log P(token_t | sentence with t masked)``.

        ``token_ids`` include the special tokens (see :meth:`encode`); ``positions`` default to all
        non-special positions. An empty position list scores 0.0.
        """
        if positions is None:
            positions = [self.scorable_positions(ids) for ids in token_ids]
        if len(positions) != len(token_ids):
            raise ValueError(f"{len(token_ids)} sentences but {len(positions)} position lists")
        jobs: list[tuple[int, int]] = []  # (sentence index, masked position)
        for s, (ids, pos) in enumerate(zip(token_ids, positions)):
            for p in pos:
                if not 0 <= p < len(ids):
                    raise ValueError(f"sentence {s}: position {p} outside 0..{len(ids) - 1}")
                jobs.append((s, p))
        # longest sentences first; copies of one sentence stay together
        jobs.sort(key=lambda j: (-len(token_ids[j[0]]), j[0], j[1]))
        totals = [0.0] * len(token_ids)
        batches = list(self._batches(jobs, token_ids))
        for batch in progress(batches, len(batches), desc):
            for (s, _), logprob in zip(batch, self._score_batch(batch, token_ids)):
                totals[s] += logprob
        return totals

    def _batches(self, jobs: list[tuple[int, int]], token_ids) -> Iterator[list[tuple[int, int]]]:
        """Cut the length-sorted jobs into batches: fixed size, or a padded-token budget (and a row cap)."""
        if self.batch_size != "auto":
            size = int(self.batch_size)
            for start in range(0, len(jobs), size):
                yield jobs[start : start + size]
            return
        vocab = int(getattr(self.model.config, "vocab_size", 0) or len(self.tokenizer))
        max_rows = max(1, LOGIT_BUDGET // vocab)  # [B, V] logits stay under LOGIT_BUDGET floats
        batch: list[tuple[int, int]] = []
        longest = 0
        for job in jobs:
            length = len(token_ids[job[0]])
            too_long = max(longest, length) * (len(batch) + 1) > self.max_batch_tokens
            if batch and (too_long or len(batch) >= max_rows):
                yield batch
                batch, longest = [], 0
            batch.append(job)
            longest = max(longest, length)
        if batch:
            yield batch

    @torch.inference_mode()
    def _score_batch(self, batch: Sequence[tuple[int, int]], token_ids) -> list[float]:
        width = max(len(token_ids[s]) for s, _ in batch)
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)  # [B, T]
        attention = torch.zeros((len(batch), width), dtype=torch.long)  # [B, T]
        targets = torch.empty(len(batch), dtype=torch.long)  # [B]
        mask_pos = torch.empty(len(batch), dtype=torch.long)  # [B]
        for b, (s, p) in enumerate(batch):
            ids = token_ids[s]
            input_ids[b, : len(ids)] = torch.tensor(list(ids), dtype=torch.long)
            attention[b, : len(ids)] = 1
            targets[b], mask_pos[b] = int(ids[p]), p
            input_ids[b, p] = self.tokenizer.mask_token_id
        device = input_device(self.model)  # batches are built on the CPU and moved to the model
        input_ids, attention, targets, mask_pos = (t.to(device) for t in (input_ids, attention, targets, mask_pos))
        rows = torch.arange(len(batch), device=device)
        state = {"ran": False}
        with only_masked_positions(self.model, mask_pos[:, None], state):
            logits = self.model(input_ids=input_ids, attention_mask=attention).logits
        # [B, 1, V] when the hook ran on the head's path; otherwise full [B, T, V] logits
        masked_logits = logits[:, 0] if state["ran"] else logits[rows, mask_pos]  # [B, V]
        logprobs = torch.log_softmax(masked_logits.float(), dim=-1)  # [B, V]
        return logprobs[rows, targets].tolist()


    # ------------------------------------------------------------------ per-token PLL / joint masking (additive)
    def token_pseudo_logprobs(
        self,
        token_ids: Sequence[Sequence[int]],
        positions: Sequence[Sequence[int]] | None = None,
        desc: str | None = None,
    ) -> list[list[float]]:
        """Like :meth:`MaskedScorer.pseudo_loglikelihood`, but each sentence's per-position log-probs.

        ``out[s][k] = log P(token_ids[s][positions[s][k]] | sentence s with that one token masked)``, in the
        order of ``positions[s]`` (default: :meth:`scorable_positions`). The jobs are packed and batched exactly
        as for :meth:`pseudo_loglikelihood` (one masked copy per scored token), so
        ``sum(out[s]) == pseudo_loglikelihood(...)[s]`` up to float summation order.
        """
        if positions is None:
            positions = [self.scorable_positions(ids) for ids in token_ids]
        if len(positions) != len(token_ids):
            raise ValueError(f"{len(token_ids)} sentences but {len(positions)} position lists")
        jobs: list[tuple[int, int]] = []
        for s, (ids, pos) in enumerate(zip(token_ids, positions)):
            for p in pos:
                if not 0 <= p < len(ids):
                    raise ValueError(f"sentence {s}: position {p} outside 0..{len(ids) - 1}")
                jobs.append((s, int(p)))
        jobs = sorted(set(jobs), key=lambda j: (-len(token_ids[j[0]]), j[0], j[1]))
        found: dict[tuple[int, int], float] = {}
        batches = list(self._batches(jobs, token_ids))
        for batch in progress(batches, len(batches), desc):
            found.update(zip(batch, self._score_batch(batch, token_ids)))
        return [[found[(s, int(p))] for p in pos] for s, pos in enumerate(positions)]

    def masked_token_logprobs(
        self,
        token_ids: Sequence[Sequence[int]],
        position_lists: Sequence[Sequence[int]],
        target_lists: Sequence[Sequence[int]],
        desc: str | None = None,
    ) -> list[float]:
        """For each sequence, ``sum_k log P(target_k at position_k | sequence with ALL its positions masked)``.

        One forward pass per masked sequence (not per position): every position of ``position_lists[s]`` is
        replaced by the mask token at once and the model's distribution at each of them is read for the
        matching ``target_lists[s]`` token. With one position this is ``P([MASK] = target | rest)``; with
        several it is the product of the per-position marginals of one joint masking (no chain rule).

        ``token_ids`` include the special tokens (see :meth:`encode`); whatever they hold at the masked
        positions is ignored. Sequences whose masked input is identical (e.g. the same sentence scored for
        "him" and for "her") share one forward row. Rows are packed longest-first into batches like
        :meth:`pseudo_loglikelihood`; the output-embedding hook keeps only the masked rows' hidden states
        (``[B, K, H]``, K = most positions in the batch), otherwise full logits are used. An empty position
        list scores 0.0.
        """
        if not len(token_ids) == len(position_lists) == len(target_lists):
            raise ValueError(f"{len(token_ids)} sequences, {len(position_lists)} position lists and "
                             f"{len(target_lists)} target lists: the three must have the same length")
        mask_id = int(self.tokenizer.mask_token_id)
        row_of: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
        rows: list[list[int]] = []
        row_positions: list[tuple[int, ...]] = []
        owners: list[list[tuple[int, tuple[int, ...]]]] = []  # per row: (sequence index, targets)
        for s, (ids, pos, tgt) in enumerate(zip(token_ids, position_lists, target_lists)):
            pos, tgt = tuple(int(p) for p in pos), tuple(int(t) for t in tgt)
            if len(pos) != len(tgt):
                raise ValueError(f"sequence {s}: {len(pos)} positions but {len(tgt)} targets")
            if len(set(pos)) != len(pos):
                raise ValueError(f"sequence {s}: repeated position in {list(pos)}")
            for p in pos:
                if not 0 <= p < len(ids):
                    raise ValueError(f"sequence {s}: position {p} outside 0..{len(ids) - 1}")
            if not pos:
                continue
            masked = [int(t) for t in ids]
            for p in pos:
                masked[p] = mask_id
            key = (tuple(masked), pos)
            if key not in row_of:
                row_of[key] = len(rows)
                rows.append(masked)
                row_positions.append(pos)
                owners.append([])
            owners[row_of[key]].append((s, tgt))
        jobs = sorted(((r, 0) for r in range(len(rows))), key=lambda j: (-len(rows[j[0]]), j[0]))
        batches = [part for batch in self._batches(jobs, rows)
                   for part in cap_rows_by_positions(self, batch, row_positions)]
        totals = [0.0] * len(token_ids)
        for batch in progress(batches, len(batches), desc):
            idx = [r for r, _ in batch]
            scores = score_masked_rows(self, [rows[r] for r in idx], [row_positions[r] for r in idx],
                                        [[t for _, t in owners[r]] for r in idx])
            for r, row_scores in zip(idx, scores):
                for (s, _), value in zip(owners[r], row_scores):
                    totals[s] = value
        return totals
