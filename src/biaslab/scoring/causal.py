"""Batched log-likelihood scoring and greedy generation for causal LMs.

The engine's contract is lm-evaluation-harness' ``loglikelihood``: one :class:`Score` per
:class:`Request`, in input order. How it gets there is its own business:

* requests are tokenised once, every distinct text in one batched call
  (:mod:`biaslab.scoring.tokenization`), and left-truncated to the model's window;
* **prefix sharing**: requests are sorted by their token sequence and adjacent ones that share a long
  token prefix form a group (:meth:`CausalScorer._group`) - OccuGender's ~26 surface forms after one
  prompt, GBEM-UA's positive/negative sentences up to "не", ClozeGender's him/her pair. A group's
  prefix runs once; only the members' own remaining tokens run again, attending to the prefix's KV
  cache gathered per member. A request without partner is a group of one: a plain batch row.
* groups are packed **longest prefix first** into chunks under a token budget (``max_batch_tokens``,
  capped by free memory) that counts a prefix once per group; an explicit ``batch_size`` caps rows;
* prefixes are **left-padded** so they end together (explicit ``position_ids``) and the LM head runs
  only on the columns that predict continuation tokens (``logits_to_keep``); log-probabilities are
  computed only at those positions (``logsumexp`` minus the target logit, summed in float64).

Shapes per chunk: prefix pass ``input_ids [G, Wp]`` -> ``logits [G, K, V]``, where ``K`` covers every
member's first scored position inside its prefix; suffix pass ``[R, Ws]`` over a gathered cache of
``[R, heads, Wp, head_dim]`` -> ``logits [R, Ws, V]``. Token ``k`` of a request (context + continuation)
is predicted at fed position ``k - 1``: inside the prefix at column ``K - Wg + k - 1`` of its group's
row (``Wg`` = that group's prefix length), otherwise at column ``k - 1 - Wg`` of its suffix row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import math

import torch

from biaslab.scoring.causal_budget import batch_budgets, model_free_memory
from biaslab.scoring.device import free_memory_bytes, input_device
from biaslab.scoring.formatting import PromptFormat
from biaslab.scoring.kv_gather import resolve_prefix_sharing
from biaslab.scoring.progress import progress
from biaslab.scoring.protocol import (
    CAPABILITIES,
    SENTENCE_LOGLIKELIHOOD,
    PaddedProbability,
    PairScore,
    SentenceProbabilities,
    SentenceScore,
    TokenScore,
    check_pair_methods,
)
from biaslab.scoring.causal_logits import ScoredPositions, split_lm_head, token_logprobs
from biaslab.scoring.prefix_groups import fed_tokens, group_requests, pack_chunks
from biaslab.scoring.requests import NonFiniteScoreError, Request, Score, TokenRequest


@dataclass
class CausalScorer:
    """The :class:`~biaslab.scoring.protocol.Scorer` of a Hugging Face causal LM (``AutoModelForCausalLM``).

    ``add_bos`` (``auto | True | False``) and ``prompt_format`` (``raw | chat``) decide how text becomes
    tokens (:mod:`biaslab.scoring.formatting`); ``memory_probe(device) -> free bytes`` sizes the token
    budget (default: the device's own free memory). ``max_batch_tokens="auto"`` sizes it from free device
    memory (:func:`biaslab.scoring.causal_budget.batch_budgets`; 1024 on the CPU). ``prefix_sharing``
    (``auto | on | off``) decides the KV gather (:mod:`biaslab.scoring.kv_gather`); the outcome is
    :attr:`share_prefixes`.
    """

    model: torch.nn.Module
    tokenizer: object
    batch_size: int | str = "auto"
    max_batch_tokens: int | str = 1024  # padded tokens per pass; small batches stay in CPU cache (bench/)
    max_length: int | None = None
    prompt_prefix: str = ""
    prefix_sharing: str | bool = "auto"
    min_shared_fraction: float = 0.5
    cache: object | None = None  # biaslab.scoring.cache.ScoreCache, keyed by this model's fingerprint
    add_bos: str | bool = "auto"
    prompt_format: str = "raw"
    memory_probe: object = free_memory_bytes
    share_prefixes: bool = field(default=True, init=False)  # what prefix_sharing resolved to for this model
    kind: str = field(default="causal", init=False)
    capabilities: frozenset = field(default=frozenset(CAPABILITIES), init=False)
    description: str = field(default="causal LM", init=False)
    # Work actually done, summed over calls (the benchmark turns it into executed FLOP/s):
    # tokens through the decoder stack (padding included) and rows through the LM head.
    stats: dict[str, int] = field(default_factory=lambda: {"passes": 0, "decoder_tokens": 0, "head_rows": 0},
                                  init=False)

    def __post_init__(self) -> None:
        import inspect

        self.model.eval()
        if self.max_length is None:
            self.max_length = int(getattr(self.model.config, "max_position_embeddings", 2048))
        self.format = PromptFormat.create(self.tokenizer, self.add_bos, self.prompt_format, self.prompt_prefix)
        base = getattr(self.model, "get_base_model", lambda: self.model)()
        self._supports_logits_to_keep = "logits_to_keep" in inspect.signature(base.forward).parameters
        self._decoder, self._head = split_lm_head(self.model)
        self._device = input_device(self.model)  # batches are built on the CPU and moved here
        free = model_free_memory(self.model, self.memory_probe)
        self.max_batch_tokens, self._kv_budget = batch_budgets(self.model, self.max_batch_tokens, free)
        self.share_prefixes = resolve_prefix_sharing(self.prefix_sharing, self._probe_cache, type(base).__name__)

    def supports(self, capability: str) -> bool:
        return capability in self.capabilities

    # ------------------------------------------------------------------ variants
    def with_prefix(self, prefix: str) -> "CausalScorer":
        """The same model with an instruction prepended to every prompt and sentence (prompt debiasing)."""
        import copy

        other = copy.copy(self)  # same model, budgets and stats; only the formatting changes
        other.prompt_prefix = prefix
        other.format = self.format.with_prefix(prefix)
        return other

    def with_prefix_separator(self, separator: str) -> "CausalScorer":
        """The same scorer joining its prefix (if any) and each text with ``separator`` instead of a space."""
        import copy

        other = copy.copy(self)
        other.format = self.format.with_separator(separator)
        return other

    # ------------------------------------------------------------------ scoring
    def loglikelihood(self, requests: Sequence[Request], desc: str | None = None) -> list[Score]:
        """``log P(continuation | context)`` for every request (see :class:`Request`)."""
        return self.loglikelihood_tokens(self.format.encode_requests(requests), desc=desc)

    def sentence_scores(self, sentences: Sequence[str], desc: str | None = None) -> list[SentenceScore]:
        """``log P(sentence | BOS)`` (lm-evaluation-harness' ``loglikelihood("", sentence)``)."""
        scores = self.loglikelihood([Request("", s) for s in sentences], desc=desc)
        return [SentenceScore(s.logprob, s.n_tokens) for s in scores]

    def pair_scores(self, first: Sequence[str], second: Sequence[str], method: str | Sequence[str] = "ppll",
                    desc: str | None = None) -> list[PairScore]:
        """Both sentences' log-likelihoods, in one engine call (``method`` is for pseudo-likelihood scorers)."""
        if len(first) != len(second):
            raise ValueError(f"{len(first)} first sentences but {len(second)} second sentences")
        check_pair_methods(method, len(first))
        scores = self.sentence_scores([*first, *second], desc=desc)
        n = len(first)
        return [PairScore(SENTENCE_LOGLIKELIHOOD, scores[i], scores[n + i]) for i in range(n)]

    def token_scores(self, sentences: Sequence[str], desc: str | None = None) -> list[list[TokenScore]]:
        """Each token's ``log P(t_k | BOS, t_<k)``: one request (one forward row) per sentence, one engine call.

        The sentence is encoded exactly as :meth:`sentence_scores` encodes it (BOS, prompt prefix) and the
        engine returns every continuation token's log-probability from the same pass that sums them
        (``loglikelihood_tokens(..., per_token=True)``), so ``sum(token logprobs) == sentence_scores``.
        """
        requests = [self.format.sentence_request(sentence) for sentence in sentences]
        scores = self.loglikelihood_tokens(requests, desc=desc, per_token=True)
        return [[TokenScore(self.tokenizer.decode([token]), logprob)
                 for token, logprob in zip(request.continuation_ids, score.token_logprobs)]
                for request, score in zip(requests, scores)]

    def cloze_scores(self, contexts: Sequence[str], words: Sequence[str], desc: str | None = None) -> list[SentenceScore]:
        """``log P(" " + word | context)`` for every (context, word); duplicates scored once."""
        if len(contexts) != len(words):
            raise ValueError(f"{len(contexts)} contexts but {len(words)} words")
        requests = [Request(c, f" {w}") for c, w in zip(contexts, words)]
        unique = list(dict.fromkeys(requests))
        by_request = dict(zip(unique, self.loglikelihood(unique, desc=desc) if unique else []))
        return [SentenceScore(by_request[r].logprob, by_request[r].n_tokens) for r in requests]

    def word_vectors(self, words: Sequence[str]):
        """The model's input embeddings, mean over each word's sub-tokens (:func:`biaslab.scoring.static_vectors.model_vectors`)."""
        from biaslab.scoring.static_vectors import model_vectors

        return model_vectors(self.model, self.tokenizer, words)

    def geometric_mean_probabilities(
        self, sentences: Sequence[str], pairs: Sequence[tuple[int, int]] = (), pad_with_eos: bool = True,
        desc: str | None = None,
    ) -> SentenceProbabilities:
        """Geometric-mean token probabilities of sentences, unpadded and pair-padded with EOS (GBEM-UA).

        Every sentence is scored from BOS (``exp(log P(sentence | BOS) / n_tokens)``). For each pair
        ``(i, j)`` with ``pad_with_eos``, the side with fewer tokens gets EOS tokens appended until both
        have the same count; the pads are fed to the model and scored as ordinary tokens inside the
        geometric mean - the GBEM-UA authors' rule (``prob_metric.compute_sentence_probability`` appends
        ``eos_token * number_eos`` to the text it feeds). All distinct token requests (unpadded and
        padded) go to the engine in one call.
        """
        eos = self.tokenizer.eos_token_id
        if pad_with_eos and pairs and eos is None:
            raise ValueError("EOS pair padding needs a tokenizer with an EOS token")
        base = [self.format.sentence_request(s) for s in sentences]

        def padded(request: TokenRequest, k: int) -> TokenRequest:
            return TokenRequest(request.context_ids, request.continuation_ids + (eos,) * k)

        pair_requests = []
        for i, j in pairs:
            a, b = base[i], base[j]
            width = max(len(a.continuation_ids), len(b.continuation_ids)) if pad_with_eos else 0
            pair_requests.append((padded(a, max(0, width - len(a.continuation_ids))),
                                  padded(b, max(0, width - len(b.continuation_ids)))))
        unique: dict[TokenRequest, int] = {}
        for request in [*base, *(r for pair in pair_requests for r in pair)]:
            unique.setdefault(request, len(unique))
        scores = self.loglikelihood_tokens(list(unique), desc=desc) if unique else []

        def probability(request: TokenRequest) -> float:
            return math.exp(scores[unique[request]].logprob / len(request.continuation_ids))

        return SentenceProbabilities(
            sentences=[SentenceScore(scores[unique[r]].logprob, len(r.continuation_ids)) for r in base],
            pairs=[tuple(PaddedProbability(len(r.continuation_ids) - len(base[k].continuation_ids), probability(r))
                         for r, k in zip(pair, ij)) for pair, ij in zip(pair_requests, pairs)],
        )

    def loglikelihood_tokens(self, requests: Sequence[TokenRequest], desc: str | None = None,
                             per_token: bool = False) -> list[Score]:
        """Score pre-tokenised requests; results come back in input order.

        ``per_token=True`` also returns each continuation token's log-probability
        (:attr:`Score.token_logprobs`), read from the same forward pass at no extra model cost - a
        sentence's per-token scores are one request, not one request per token.
        With a :class:`~biaslab.scoring.cache.ScoreCache` (``scoring.cache_dir``), requests this model
        (same fingerprint) has scored before are read back instead of recomputed.
        """
        for i, r in enumerate(requests):
            if not r.context_ids or not r.continuation_ids:
                raise ValueError(f"request {i}: context and continuation must both be non-empty token lists")
        if self.cache is None:
            return self._compute(requests, desc, per_token)
        keys = [self.cache.key(r) for r in requests]
        known = self.cache.get_many(sorted(set(keys)), per_token=per_token)
        todo = {k: r for k, r in zip(keys, requests) if k not in known}
        if todo:
            fresh = self._compute(list(todo.values()), desc, per_token)
            computed = dict(zip(todo, fresh))
            self.cache.put_many(computed)
            known.update(computed)
        return [known[k] for k in keys]

    def _compute(self, requests: Sequence[TokenRequest], desc: str | None, per_token: bool = False) -> list[Score]:
        requests = [self._fit_to_window(i, r) for i, r in enumerate(requests)]
        results: list[Score | None] = [None] * len(requests)
        chunks = list(self._chunks(self._group(requests), requests))
        for chunk in progress(chunks, len(chunks), desc):
            scores = self._score_chunk([(n, [requests[i] for i in group]) for n, group in chunk], per_token)
            for i, score in zip((i for _, group in chunk for i in group), scores):
                results[i] = score
        bad = [i for i, s in enumerate(results) if not math.isfinite(s.logprob)]
        if bad:
            raise NonFiniteScoreError(
                f"{len(bad)} of {len(results)} requests scored NaN/inf log-probabilities (first: request {bad[0]}, "
                f"{len(requests[bad[0]].context_ids)} context tokens): the model's weights or inputs are broken"
            )
        return results  # type: ignore[return-value]

    def _fit_to_window(self, index: int, r: TokenRequest) -> TokenRequest:
        """Left-truncate the context so at most ``max_length`` tokens are fed (the harness' rule)."""
        excess = len(r.context_ids) + len(r.continuation_ids) - 1 - self.max_length
        if excess <= 0:
            return r
        if excess >= len(r.context_ids):
            raise ValueError(
                f"request {index}: its continuation alone has {len(r.continuation_ids)} tokens, more than the "
                f"model's window of {self.max_length}; shorten it or use a model with a longer context"
            )
        return TokenRequest(r.context_ids[excess:], r.continuation_ids)

    # ------------------------------------------------------------------ grouping
    @staticmethod
    def _fed(r: TokenRequest) -> tuple[int, ...]:
        return fed_tokens(r)

    def _group(self, requests: Sequence[TokenRequest]) -> list[tuple[int, list[int]]]:
        """Requests grouped by a shared token prefix (:func:`biaslab.scoring.prefix_groups.group_requests`)."""
        return group_requests(requests, self.share_prefixes, self.min_shared_fraction)

    def _chunks(
        self, groups: list[tuple[int, list[int]]], requests: Sequence[TokenRequest]
    ) -> Iterator[list[tuple[int, list[int]]]]:
        """Groups packed into chunks under this scorer's budgets (:func:`biaslab.scoring.prefix_groups.pack_chunks`)."""
        max_rows = None if self.batch_size == "auto" else max(1, int(self.batch_size))
        return pack_chunks(groups, requests, self.max_batch_tokens, max(self.max_batch_tokens, self._kv_budget), max_rows)

    # ------------------------------------------------------------------ forward passes
    @torch.inference_mode()
    def _score_chunk(self, chunk: Sequence[tuple[int, Sequence[TokenRequest]]], per_token: bool = False) -> list[Score]:
        """Score a chunk of groups: each group's prefix runs once, only members' suffixes run again.

        Prefix pass: prefixes left-padded to ``Wp`` (``[G, Wp]``) so they end together (explicit
        ``position_ids``); the LM head runs only on the last ``K`` columns (``logits_to_keep``), enough to
        cover every member's first scored position inside the prefix. For a group of one, the prefix is
        the whole fed sequence and ``K`` its continuation length: a plain left-padded batch row.
        Suffix pass: members' remaining fed tokens, right-padded (``[R, Ws]``), attend to their own
        group's cached prefix (KV gathered with ``index_select`` over the batch dim). Each continuation
        token's log-prob is then read from whichever pass predicted it. Returns scores in group-major order;
        with ``per_token`` each score also carries its tokens' log-probs (a member's tokens are scored in
        order, those predicted inside the prefix before those of its suffix).
        """
        members = [(g, r) for g, (_, group) in enumerate(chunk) for r in group]
        fed = [self._fed(r) for _, r in members]
        prefixes = [fed[m][: chunk[g][0]] for m, (g, _) in enumerate(members) if m == 0 or members[m - 1][0] != g]
        lengths = torch.tensor([len(p) for p in prefixes])
        n_groups, wp = len(prefixes), int(lengths.max())
        first_scored = [wp] * n_groups
        for g, r in members:
            first_scored[g] = min(first_scored[g], len(r.context_ids) - 1)
        keep = min(wp, max(1, max(int(lengths[g]) - first_scored[g] for g in range(n_groups))))
        ids = torch.zeros((n_groups, wp), dtype=torch.long)
        self.stats["passes"] += 1
        self.stats["decoder_tokens"] += n_groups * wp
        mask = torch.zeros((n_groups, wp), dtype=torch.long)
        for g, prefix in enumerate(prefixes):
            ids[g, wp - len(prefix) :] = torch.tensor(prefix)
            mask[g, wp - len(prefix) :] = 1
        with_suffix = [m for m, (g, _) in enumerate(members) if len(fed[m]) > int(lengths[g])]
        prefix_out, cache = self._forward(ids, mask, (mask.cumsum(-1) - 1).clamp(min=0), keep,
                                          use_cache=bool(with_suffix))  # [G, K, H or V]

        suffix_out, suffix_row = None, {}
        if with_suffix:
            ws = max(len(fed[m]) - int(lengths[members[m][0]]) for m in with_suffix)
            s_ids = torch.zeros((len(with_suffix), ws), dtype=torch.long)
            self.stats["passes"] += 1
            self.stats["decoder_tokens"] += len(with_suffix) * ws
            s_mask = torch.zeros((len(with_suffix), ws), dtype=torch.long)
            owner = torch.tensor([members[m][0] for m in with_suffix])
            for row, m in enumerate(with_suffix):
                suffix = fed[m][int(lengths[members[m][0]]) :]
                s_ids[row, : len(suffix)] = torch.tensor(suffix)
                s_mask[row, : len(suffix)] = 1
                suffix_row[m] = row
            cache.reorder_cache(owner.to(self._device))  # each row's own prefix KV: [R, heads, Wp, head_dim]
            attention = torch.cat([mask[owner], s_mask], dim=1)  # [R, Wp + Ws]
            positions = lengths[owner][:, None] + torch.arange(ws)[None, :]  # [R, Ws]
            suffix_out, _ = self._forward(s_ids, attention, positions, ws, use_cache=False, cache=cache)

        # Where each continuation token was predicted: a position (row, column) of the prefix or the
        # suffix pass. Members of a group predict their shared tokens at the same prefix position
        # (OccuGender: all ~26 forms' first token), so each distinct position is projected once.
        passes = {True: ScoredPositions(), False: ScoredPositions()}
        for m, (g, r) in enumerate(members):
            length = int(lengths[g])
            full = r.context_ids + r.continuation_ids
            for k in range(len(r.context_ids), len(full)):  # token k is predicted at fed position k - 1
                if k - 1 < length:
                    passes[True].add((g, keep - length + k - 1), full[k], m)
                else:
                    passes[False].add((suffix_row[m], k - 1 - length), full[k], m)
        totals = torch.zeros(len(members), dtype=torch.float64)
        misses = torch.zeros(len(members), dtype=torch.long)
        per_member: list[list[float]] = [[] for _ in members] if per_token else []
        for states, scored in ((prefix_out, passes[True]), (suffix_out, passes[False])):
            if not scored.targets:
                continue
            # states/logits stay where the model put them (with a device map: the last device)
            rows, cols = (torch.tensor(c, device=states.device) for c in zip(*scored.positions))
            picked = states[rows, cols]  # [U, H] (or [U, V] without the split head)
            logits = picked if self._head is None else self._head(picked)  # [U, V]
            self.stats["head_rows"] += len(scored.positions) if self._head is not None else states.shape[0] * states.shape[1]
            logprob, greedy = token_logprobs(logits, torch.tensor(scored.position_of, device=logits.device),
                                              torch.tensor(scored.targets, device=logits.device))
            owner_t = torch.tensor(scored.owners)
            logprob = logprob.cpu()
            totals.index_add_(0, owner_t, logprob)
            misses.index_add_(0, owner_t, (~greedy).long().cpu())
            if per_token:  # the prefix pass's tokens of a member precede its suffix pass's: order is kept
                for m, value in zip(scored.owners, logprob.tolist()):
                    per_member[m].append(value)
        return [Score(float(totals[m]), len(r.continuation_ids), bool(misses[m] == 0),
                      tuple(per_member[m]) if per_token else None) for m, (_, r) in enumerate(members)]

    def _forward(self, input_ids, attention, positions, keep: int, use_cache: bool, cache=None):
        """One pass over ``[B, T]``; returns the last ``keep`` columns' outputs and the KV cache.

        With a split LM head (:func:`split_lm_head`) the outputs are hidden states ``[B, keep, H]``
        and the head runs later on the scored positions only; otherwise they are logits ``[B, keep, V]``
        (the head restricted to those columns by ``logits_to_keep`` where the model supports it).
        """
        kwargs = {"past_key_values": cache} if cache is not None else {}
        input_ids, attention, positions = (t.to(self._device) for t in (input_ids, attention, positions))
        if self._decoder is not None:
            out = self._decoder(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                                use_cache=use_cache, **kwargs)
            return out.last_hidden_state[:, -keep:], out.past_key_values
        if self._supports_logits_to_keep:
            kwargs["logits_to_keep"] = keep
        out = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                         use_cache=use_cache, **kwargs)
        return out.logits[:, -keep:], out.past_key_values

    @torch.inference_mode()
    def _probe_cache(self):
        """The KV cache this model returns from a two-row, two-token pass (what a prefix pass would gather)."""
        vocab = int(getattr(self.model.config, "vocab_size", 2) or 2)
        ids = torch.tensor([[1, 2], [2, 1]]) % vocab
        return self._forward(ids, torch.ones_like(ids), torch.arange(2).expand(2, 2), 1, use_cache=True)[1]

    # ------------------------------------------------------------------ generation
    @torch.inference_mode()
    def generate(self, prompts: Sequence[str], max_new_tokens: int = 5, desc: str | None = None) -> list[str]:
        """Greedy continuation of each prompt (left-padded batches), decoded without special tokens."""
        encoded = [self.format.encode_prompt(p) for p in prompts]
        order = sorted(range(len(prompts)), key=lambda i: -len(encoded[i]))
        size = 16 if self.batch_size == "auto" else int(self.batch_size)
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None:
            pad_id = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0
        outputs: list[str] = [""] * len(prompts)
        chunks = [order[s : s + size] for s in range(0, len(order), size)]
        for chunk in progress(chunks, len(chunks), desc):
            width = max(len(encoded[i]) for i in chunk)
            input_ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
            attention = torch.zeros((len(chunk), width), dtype=torch.long)
            for b, i in enumerate(chunk):
                ids = encoded[i]
                input_ids[b, width - len(ids) :] = torch.tensor(ids)
                attention[b, width - len(ids) :] = 1
            generated = self.model.generate(
                input_ids=input_ids.to(self._device),
                attention_mask=attention.to(self._device),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=pad_id,
            )
            for b, i in enumerate(chunk):
                outputs[i] = self.tokenizer.decode(generated[b, width:], skip_special_tokens=True)
        return outputs
