"""Masked-LM rows with several masked positions each, for :meth:`biaslab.scoring.masked.MaskedScorer.masked_token_logprobs`:
batches capped so ``rows x K`` logits stay under :data:`LOGIT_BUDGET` floats, the rows scored in one
forward pass, and a forward hook that runs the LM head only at the masked positions.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from biaslab.scoring.device import input_device
LOGIT_BUDGET = 2**26  # floats per [B, V] logits tensor (256 MB): caps the rows of a batch for huge vocabularies


def cap_rows_by_positions(scorer: Any, batch, row_positions) -> Iterator[list[tuple[int, int]]]:
    """Split a batch so ``rows x K`` logits rows stay under ``LOGIT_BUDGET`` (auto batch size only)."""
    if scorer.batch_size != "auto":
        yield batch
        return
    vocab = int(getattr(scorer.model.config, "vocab_size", 0) or len(scorer.tokenizer))
    max_rows = max(1, LOGIT_BUDGET // vocab)
    part: list[tuple[int, int]] = []
    k = 0
    for job in batch:
        k_new = max(k, len(row_positions[job[0]]))
        if part and k_new * (len(part) + 1) > max_rows:
            yield part
            part, k_new = [], len(row_positions[job[0]])
        part.append(job)
        k = k_new
    if part:
        yield part


@torch.inference_mode()
def score_masked_rows(scorer: Any, rows, positions, targets) -> list[list[float]]:
    """``rows`` already masked; returns, per row, the summed target log-probs of each of its owners."""
    width = max(len(r) for r in rows)
    k_max = max(len(p) for p in positions)
    pad_id = scorer.tokenizer.pad_token_id if scorer.tokenizer.pad_token_id is not None else 0
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # [B, T]
    attention = torch.zeros((len(rows), width), dtype=torch.long)  # [B, T]
    mask_pos = torch.empty((len(rows), k_max), dtype=torch.long)  # [B, K] (short rows repeat a position)
    for b, (ids, pos) in enumerate(zip(rows, positions)):
        input_ids[b, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention[b, : len(ids)] = 1
        mask_pos[b] = torch.tensor(list(pos) + [pos[0]] * (k_max - len(pos)), dtype=torch.long)
    device = input_device(scorer.model)  # batches are built on the CPU and moved to the model
    input_ids, attention, mask_pos = (t.to(device) for t in (input_ids, attention, mask_pos))
    state = {"ran": False}
    with only_masked_positions(scorer.model, mask_pos, state):
        logits = scorer.model(input_ids=input_ids, attention_mask=attention).logits
    if state["ran"]:
        if logits.shape[1] != k_max:
            raise RuntimeError(f"output-embedding hook ran but logits have shape {tuple(logits.shape)}")
        selected = logits  # [B, K, V]
    else:
        selected = logits[torch.arange(len(rows), device=device).unsqueeze(1), mask_pos]  # [B, T, V] -> [B, K, V]
    logprobs = torch.log_softmax(selected.float(), dim=-1)  # [B, K, V]
    out = []
    for b, (pos, row_targets) in enumerate(zip(positions, targets)):
        ks = torch.arange(len(pos), device=device)
        out.append([float(logprobs[b, ks, torch.tensor(t, dtype=torch.long, device=device)].sum())
                    for t in row_targets])
    return out


@contextmanager
def only_masked_positions(model: torch.nn.Module, mask_pos: torch.Tensor, state: dict):
    """While active, the vocabulary projection sees only the masked positions: ``[B, T, H] -> [B, K, H]``.

    Every op after the hooked module (the vocabulary projection, or DeBERTa-v2's head dense) is
    per-position, so selecting positions first gives the same logits. Sets ``state['ran']`` when the
    hook ran; a model without an output-embedding module is left alone (full logits).
    """
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None:
        yield
        return
    rows = torch.arange(mask_pos.shape[0], device=mask_pos.device).unsqueeze(1)  # [B, 1]

    def select(_module, args):
        state["ran"] = True
        return (args[0][rows, mask_pos], *args[1:])  # [B, K, H]

    handle = head.register_forward_pre_hook(select)
    try:
        yield
    finally:
        handle.remove()
