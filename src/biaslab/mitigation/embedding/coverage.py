"""How much of the evaluation text an edit touches — the shared sub-word caveat, measured.

A checkpoint edit rewrites a *row*, so it changes that token everywhere: if ``автоматниці`` is
``автомат`` + ``ниці``, the row of ``ниці`` also changes inside ``вчительниці`` or any other word using it.
For each sentence (tokenised without special tokens) we mark:

* ``row``  — tokens whose embedding row a checkpoint edit rewrites (id ∈ target rows);
* ``span`` — tokens inside an occurrence of a target word (what the runtime hook edits);
* ``collateral = row ∧ ¬span`` — tokens changed by a checkpoint edit although they are not part of a
  target word occurrence.

Reported: token counts and shares of all tokens, and ``shared_rows`` = target rows that occur at least
once outside a target span (rows whose edit leaks into non-target words in this text).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch

from biaslab.models.token_spans import pack_sequences, span_mask


BATCH = 256


def _batches(tokenizer: Any, sentences: Iterable[str]) -> Iterator[torch.Tensor]:
    """Token ids of the sentences (no special tokens) as [b, t] tensors right-padded with -1."""
    encoded = [ids for ids in tokenizer(list(sentences), add_special_tokens=False)["input_ids"] if ids]
    for start in range(0, len(encoded), BATCH):
        chunk = encoded[start : start + BATCH]
        batch = torch.full((len(chunk), max(map(len, chunk))), -1, dtype=torch.long)
        for row, ids in enumerate(chunk):
            batch[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        yield batch


def edit_coverage(tokenizer: Any, sentences: Iterable[str], row_ids: Sequence[int],
                  sequences: Sequence[Sequence[int]]) -> dict[str, float | int]:
    """Counts and shares of edited tokens in ``sentences`` (see the module docstring)."""
    rows = torch.tensor(sorted(row_ids), dtype=torch.long)
    packed = pack_sequences(sequences)
    n_sentences = total = row_count = span_count = collateral_count = 0
    shared: set[int] = set()
    for ids in _batches(tokenizer, sentences):  # [b, t]
        real = ids >= 0
        row = torch.isin(ids, rows) & real
        span = span_mask(ids, packed)
        collateral = row & ~span
        n_sentences += ids.shape[0]
        total += int(real.sum())
        row_count += int(row.sum())
        span_count += int(span.sum())
        collateral_count += int(collateral.sum())
        shared.update(ids[collateral].tolist())
    share = (lambda n: n / total) if total else (lambda n: float("nan"))
    return {
        "sentences": n_sentences,
        "tokens": total,
        "tokens_row_edited": row_count,
        "tokens_in_target_spans": span_count,
        "tokens_collateral": collateral_count,
        "share_row_edited": share(row_count),
        "share_in_target_spans": share(span_count),
        "share_collateral": share(collateral_count),
        "shared_rows": len(shared),
    }
