"""Batched log-likelihood scoring and greedy generation for causal LMs.

The engine's contract is lm-evaluation-harness' ``loglikelihood``: one :class:`Score` per
:class:`Request`, in input order. How it gets there is its own business:

* requests are tokenised once (:mod:`biaslab.scoring.tokenization`), then **sorted longest-first**
  so each batch pads little and the first batch reveals an out-of-memory early;
* each batch is left-padded to its own longest row (explicit ``position_ids``), so every row's
  continuation sits in the last columns and the LM head runs only there (``logits_to_keep``);
* the batch size comes from a token budget (``max_batch_tokens``) unless set explicitly;
* **prefix sharing**: requests with the same (non-trivial) context - OccuGender's ~26 surface forms per
  prompt, GBEM-UA's " так"/" ні" pair, ClozeGender's him/her pair - run that context once. Contexts of
  a chunk are left-padded so they end together (``ctx [G, Lc]``), their KV cache is gathered per
  continuation row (``index_select`` over the batch dim), and only the continuations' own tokens run
  again (``cont [R, W]``, ``W = max(len(cont)) - 1``). The first continuation token is scored from the
  context pass' last logits, so single-token continuations cost no second pass at all.

Shapes: ``input_ids [B, T]`` where ``T = max(len(ctx) + len(cont)) - 1`` (the last token is never
fed: it is only predicted), ``logits [B, K, V]`` with ``K = max(len(cont))``; continuation token ``j``
of row ``b`` is read at column ``K - len(cont_b) + j``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch

import math

from biaslab.scoring.progress import progress
from biaslab.scoring.requests import NonFiniteScoreError, Request, Score, TokenRequest, with_prefix
from biaslab.scoring.tokenization import encode_requests


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def memory_token_budget(model, fraction: float = 0.05, ceiling_bytes: int = 1 << 30) -> int:
    """Largest batch (in tokens) whose float32 logits ``[tokens, V]`` fit a slice of free memory.

    The logits tensor dominates memory for real vocabularies (16k tokens x 50k vocab x 4 B = 3.3 GB),
    and smaller batches also stay in cache, so the budget is min(5% of available RAM, 1 GiB) / (4 V).
    """
    import psutil

    vocab = int(getattr(model.config, "vocab_size", 32000) or 32000)
    usable = min(int(psutil.virtual_memory().available * fraction), ceiling_bytes)
    return max(64, usable // (4 * vocab))


@dataclass
class CausalScorer:
    """Scores requests with a Hugging Face causal LM (``AutoModelForCausalLM``)."""

    model: torch.nn.Module
    tokenizer: object
    batch_size: int | str = "auto"
    max_batch_tokens: int = 16384
    max_length: int | None = None
    prompt_prefix: str = ""
    share_prefixes: bool = True
    min_shared_fraction: float = 0.5
    cache: object | None = None  # biaslab.scoring.cache.ScoreCache, keyed by this model's fingerprint
    kind: str = field(default="causal", init=False)

    def __post_init__(self) -> None:
        import inspect

        self.model.eval()
        if self.max_length is None:
            self.max_length = int(getattr(self.model.config, "max_position_embeddings", 2048))
        base = getattr(self.model, "get_base_model", lambda: self.model)()
        self._supports_logits_to_keep = "logits_to_keep" in inspect.signature(base.forward).parameters
        self.max_batch_tokens = min(self.max_batch_tokens, memory_token_budget(self.model))

    # ------------------------------------------------------------------ variants
    def with_prefix(self, prefix: str) -> "CausalScorer":
        """The same model with an instruction prepended to every request (prompt debiasing)."""
        return CausalScorer(
            self.model, self.tokenizer, self.batch_size, self.max_batch_tokens, self.max_length, prefix,
            self.share_prefixes, self.min_shared_fraction, self.cache,
        )

    # ------------------------------------------------------------------ scoring
    def loglikelihood(self, requests: Sequence[Request], desc: str | None = None) -> list[Score]:
        """``log P(continuation | context)`` for every request (see :class:`Request`)."""
        requests = [with_prefix(r, self.prompt_prefix) for r in requests]
        return self.loglikelihood_tokens(encode_requests(self.tokenizer, requests), desc=desc)

    def loglikelihood_tokens(self, requests: Sequence[TokenRequest], desc: str | None = None) -> list[Score]:
        """Score pre-tokenised requests; results come back in input order.

        With a :class:`~biaslab.scoring.cache.ScoreCache` (``scoring.cache_dir``), requests this model
        (same fingerprint) has scored before are read back instead of recomputed.
        """
        for i, r in enumerate(requests):
            if not r.context_ids or not r.continuation_ids:
                raise ValueError(f"request {i}: context and continuation must both be non-empty token lists")
        if self.cache is None:
            return self._compute(requests, desc)
        keys = [self.cache.key(r) for r in requests]
        known = self.cache.get_many(sorted(set(keys)))
        todo = {k: r for k, r in zip(keys, requests) if k not in known}
        if todo:
            fresh = self._compute(list(todo.values()), desc)
            computed = dict(zip(todo, fresh))
            self.cache.put_many(computed)
            known.update(computed)
        return [known[k] for k in keys]

    def _compute(self, requests: Sequence[TokenRequest], desc: str | None) -> list[Score]:
        results: list[Score | None] = [None] * len(requests)
        shared, single = self._split_shared(requests)
        order = sorted(single, key=lambda i: -self._fed_length(requests[i]))
        batches = list(self._batches(order, requests))
        chunks = list(self._shared_chunks(shared, requests))
        for kind, work in progress([("single", b) for b in batches] + [("shared", c) for c in chunks],
                                    len(batches) + len(chunks), desc):
            if kind == "single":
                scores = self._score_batch([requests[i] for i in work])
                indices = work
            else:
                indices = [i for _, group in work for i in group]
                scores = self._score_shared_chunk([(n, [requests[i] for i in group]) for n, group in work])
            for i, score in zip(indices, scores):
                results[i] = score
        bad = [i for i, s in enumerate(results) if not math.isfinite(s.logprob)]
        if bad:
            raise NonFiniteScoreError(
                f"{len(bad)} of {len(results)} requests scored NaN/inf log-probabilities (first: request {bad[0]}, "
                f"{len(requests[bad[0]].context_ids)} context tokens): the model's weights or inputs are broken"
            )
        return results  # type: ignore[return-value]

    # ------------------------------------------------------------------ prefix sharing
    def _fed(self, r: TokenRequest) -> tuple[int, ...]:
        return (r.context_ids + r.continuation_ids)[:-1]

    def _split_shared(self, requests: Sequence[TokenRequest]) -> tuple[list[tuple[int, list[int]]], list[int]]:
        """Group requests whose fed tokens share a long common prefix; the rest are scored one row each.

        Requests are sorted by their token sequence, so requests with a common prefix are adjacent. A
        neighbour joins the current group when the two share at least ``min_shared_fraction`` of the
        shorter sequence (and >= 2 tokens) - e.g. OccuGender's surface forms after one prompt (the whole
        prompt is shared), or GBEM-UA's positive/negative sentences (everything before ``не``), but not
        two prompts that merely start with "Q: Imagine a". Returns ``[(prefix_length, members)]`` and the
        singles.
        """
        if not self.share_prefixes or not requests:
            return [], list(range(len(requests)))
        fed = [self._fed(r) for r in requests]
        order = sorted(range(len(requests)), key=lambda i: fed[i])
        groups: list[tuple[int, list[int]]] = []
        members, shared_len = [order[0]], len(fed[order[0]])
        for prev, cur in zip(order, order[1:]):
            common = _common_prefix(fed[prev], fed[cur])
            if common >= 2 and min(shared_len, common) >= self.min_shared_fraction * min(len(fed[prev]), len(fed[cur])):
                members.append(cur)
                shared_len = min(shared_len, common)
            else:
                groups.append((shared_len, members))
                members, shared_len = [cur], len(fed[cur])
        groups.append((shared_len, members))
        shared, single = [], []
        for shared_len, group in groups:
            fits = all(len(fed[i]) <= self.max_length for i in group)
            if len(group) >= 2 and shared_len >= 2 and fits:
                shared.append((shared_len, group))
            else:
                single.extend(group)
        return shared, single

    def _shared_chunks(
        self, groups: list[tuple[int, list[int]]], requests: Sequence[TokenRequest]
    ) -> Iterator[list[tuple[int, list[int]]]]:
        """Pack prefix groups (longest prefix first) into chunks within the padded-token budget."""
        budget = self.max_batch_tokens
        max_rows = None if self.batch_size == "auto" else max(1, int(self.batch_size))
        groups = sorted(groups, key=lambda g: -g[0])
        chunk: list[tuple[int, list[int]]] = []
        prefix_len = rows = width = 0
        for shared_len, group in groups:
            w = max(len(self._fed(requests[i])) for i in group) - shared_len
            per_piece = max(2, budget // max(1, shared_len + w))  # a huge group is split into pieces
            if max_rows:
                per_piece = max(2, min(per_piece, max_rows))
            for start in range(0, len(group), per_piece):
                piece = group[start : start + per_piece]
                new = (max(prefix_len, shared_len), rows + len(piece), max(width, w))
                too_big = new[1] * (new[0] + new[2]) > budget or (max_rows and new[1] > max_rows)
                if chunk and too_big:
                    yield chunk
                    chunk, prefix_len, rows, width = [], 0, 0, 0
                    new = (shared_len, len(piece), w)
                chunk.append((shared_len, piece))
                prefix_len, rows, width = new
        if chunk:
            yield chunk

    @torch.inference_mode()
    def _score_shared_chunk(self, chunk: Sequence[tuple[int, Sequence[TokenRequest]]]) -> list[Score]:
        """Score groups that share a token prefix: the prefix runs once, only the suffixes run again.

        Prefix pass: prefixes left-padded to ``Wp`` (``[G, Wp]``) so they end together; its logits are kept
        for the last ``K`` columns, enough to cover every member's first scored position inside the prefix.
        Suffix pass: each member's remaining fed tokens, right-padded (``[R, Ws]``), attend to their own
        group's cached prefix (KV gathered with ``index_select`` over the batch dim). Each continuation
        token is then read from whichever pass predicted it. Returns scores in group-major order.
        """
        prefixes = [list(self._fed(members[0])[:shared_len]) for shared_len, members in chunk]
        lengths = torch.tensor([len(p) for p in prefixes])
        n_groups, wp = len(prefixes), int(lengths.max())
        first_scored = [min(len(r.context_ids) - 1 for r in members) for _, members in chunk]
        keep = max(1, max(int(lengths[g]) - first_scored[g] for g in range(n_groups)))
        keep = min(keep, wp)
        ids = torch.zeros((n_groups, wp), dtype=torch.long)
        mask = torch.zeros((n_groups, wp), dtype=torch.long)
        for g, prefix in enumerate(prefixes):
            ids[g, wp - len(prefix) :] = torch.tensor(prefix)
            mask[g, wp - len(prefix) :] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        kwargs = {"logits_to_keep": keep} if self._supports_logits_to_keep else {}
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **kwargs)
        prefix_lp = torch.log_softmax(out.logits[:, -keep:].float(), dim=-1)  # [G, K, V]

        members = [(g, r) for g, (_, group) in enumerate(chunk) for r in group]
        fed = [self._fed(r) for _, r in members]
        with_suffix = [m for m, (g, _) in enumerate(members) if len(fed[m]) > int(lengths[g])]
        suffix_lp, suffix_row = None, {}
        if with_suffix:
            ws = max(len(fed[m]) - int(lengths[members[m][0]]) for m in with_suffix)
            s_ids = torch.zeros((len(with_suffix), ws), dtype=torch.long)
            s_mask = torch.zeros((len(with_suffix), ws), dtype=torch.long)
            owner = torch.tensor([members[m][0] for m in with_suffix])
            for row, m in enumerate(with_suffix):
                suffix = fed[m][int(lengths[members[m][0]]) :]
                s_ids[row, : len(suffix)] = torch.tensor(suffix)
                s_mask[row, : len(suffix)] = 1
                suffix_row[m] = row
            cache = out.past_key_values
            cache.reorder_cache(owner)  # each row's own prefix KV: [R, heads, Wp, head_dim]
            attention = torch.cat([mask[owner], s_mask], dim=1)  # [R, Wp + Ws]
            positions = lengths[owner][:, None] + torch.arange(ws)[None, :]  # [R, Ws]
            logits = self.model(input_ids=s_ids, attention_mask=attention, position_ids=positions,
                                past_key_values=cache, use_cache=True).logits  # [R, Ws, V]
            suffix_lp = torch.log_softmax(logits.float(), dim=-1)

        # gather every continuation token's log-prob from the pass that predicted it
        p_idx, s_idx, p_owner, s_owner = [], [], [], []
        for m, (g, r) in enumerate(members):
            length = int(lengths[g])
            full = r.context_ids + r.continuation_ids
            for k in range(len(r.context_ids), len(full)):  # token k is predicted at fed position k - 1
                q = k - 1
                if q < length:
                    p_idx.append((g, keep - length + q, full[k]))
                    p_owner.append(m)
                else:
                    s_idx.append((suffix_row[m], q - length, full[k]))
                    s_owner.append(m)
        totals = torch.zeros(len(members), dtype=torch.float64)
        misses = torch.zeros(len(members), dtype=torch.long)
        for table, index, owners in ((prefix_lp, p_idx, p_owner), (suffix_lp, s_idx, s_owner)):
            if not index:
                continue
            a, b, t = (torch.tensor(col) for col in zip(*index))
            values = table[a, b, t].double()
            wrong = (table[a, b].argmax(-1) != t).long()
            owner_t = torch.tensor(owners)
            totals.index_add_(0, owner_t, values)
            misses.index_add_(0, owner_t, wrong)
        return [
            Score(float(totals[m]), len(r.continuation_ids), bool(misses[m] == 0)) for m, (_, r) in enumerate(members)
        ]

    def _fed_length(self, r: TokenRequest) -> int:
        return min(len(r.context_ids) + len(r.continuation_ids) - 1, self.max_length)

    def _batches(self, order: list[int], requests: Sequence[TokenRequest]) -> Iterator[list[int]]:
        """Cut the length-sorted order into batches: fixed size, or a padded-token budget."""
        if self.batch_size != "auto":
            size = int(self.batch_size)
            for start in range(0, len(order), size):
                yield order[start : start + size]
            return
        batch: list[int] = []
        longest = 0
        for i in order:
            length = self._fed_length(requests[i])
            if batch and max(longest, length) * (len(batch) + 1) > self.max_batch_tokens:
                yield batch
                batch, longest = [], 0
            batch.append(i)
            longest = max(longest, length)
        if batch:
            yield batch

    @torch.inference_mode()
    def _score_batch(self, batch: Sequence[TokenRequest]) -> list[Score]:
        """One forward pass over left-padded rows; logits only for the last K = max(n_cont) columns.

        Left padding makes every row end at column T - 1, so each row's continuation is predicted in
        its last ``n_cont`` columns and the LM head (``[B, K, V]``, the largest tensor) runs on those
        alone - for long prompts with short answers that is most of the cost saved.
        """
        rows, n_conts = [], []
        for r in batch:
            whole = list(r.context_ids) + list(r.continuation_ids)
            # keep the last max_length+1 tokens (left truncation, as the harness does); never feed the last
            rows.append(whole[-(self.max_length + 1) :][:-1])
            n_conts.append(len(r.continuation_ids))
        width, keep = max(len(x) for x in rows), max(n_conts)
        input_ids = torch.zeros((len(rows), width), dtype=torch.long)  # [B, T]
        attention = torch.zeros((len(rows), width), dtype=torch.long)
        for b, fed in enumerate(rows):
            input_ids[b, width - len(fed) :] = torch.tensor(fed, dtype=torch.long)
            attention[b, width - len(fed) :] = 1
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        logits = self._logits(input_ids, attention, positions, keep)  # [B, K, V]
        # continuation j of row b sits at column K - n_cont_b + j: right-aligned targets [B, K]
        targets = torch.zeros((len(batch), keep), dtype=torch.long)
        for b, r in enumerate(batch):
            targets[b, keep - n_conts[b] :] = torch.tensor(r.continuation_ids, dtype=torch.long)
        return self._gather_scores(logits, targets, torch.tensor(n_conts))

    @staticmethod
    def _gather_scores(
        logits: torch.Tensor, targets: torch.Tensor, n_conts: torch.Tensor, normalised: bool = False
    ) -> list[Score]:
        """Vectorised scoring of right-aligned continuations: ``logits [B, K, V]``, ``targets [B, K]``.

        Row b's real targets are its last ``n_conts[b]`` columns; the padding columns are masked out.
        Sums are taken in float64 so long sentences do not lose precision. ``normalised``: the input is
        already log-probabilities (the prefix-shared path).
        """
        keep = targets.shape[1]
        logprobs = logits if normalised else torch.log_softmax(logits.float(), dim=-1)  # [B, K, V]
        token_lp = logprobs.gather(2, targets[:, :, None]).squeeze(2)  # [B, K]
        valid = torch.arange(keep)[None, :] >= (keep - n_conts)[:, None]  # [B, K]
        totals = torch.where(valid, token_lp.double(), torch.zeros((), dtype=torch.float64)).sum(1)
        greedy = ((logprobs.argmax(-1) == targets) | ~valid).all(1)
        return [Score(float(t), int(n), bool(g)) for t, n, g in zip(totals, n_conts, greedy)]

    def _logits(self, input_ids, attention, positions, keep: int):
        """Logits of the last ``keep`` columns (``logits_to_keep`` where the model supports it)."""
        if self._supports_logits_to_keep:
            return self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                              logits_to_keep=keep).logits
        return self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions).logits[:, -keep:]

    # ------------------------------------------------------------------ generation
    @torch.inference_mode()
    def generate(self, prompts: Sequence[str], max_new_tokens: int = 5, desc: str | None = None) -> list[str]:
        """Greedy continuation of each prompt (left-padded batches), decoded without special tokens."""
        prompts = [f"{self.prompt_prefix} {p}" if self.prompt_prefix else p for p in prompts]
        encoded = [self.tokenizer.encode(p, add_special_tokens=False) or [0] for p in prompts]
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
                input_ids=input_ids,
                attention_mask=attention,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=pad_id,
            )
            for b, i in enumerate(chunk):
                outputs[i] = self.tokenizer.decode(generated[b, width:], skip_special_tokens=True)
        return outputs
