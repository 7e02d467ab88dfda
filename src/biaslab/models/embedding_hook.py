"""Runtime variant of the edit: a reversible forward hook on the input embedding module.

The seed paper removed the gender projection only from the *occurrences* of the target words in the
input. The hook does exactly that: for input ids X [b, t] and embedding output H [b, t, d]::

    mask     = span_mask(X, P)              # [b, t]  positions inside a target-word occurrence
    H[mask] ← H[mask] − (H[mask] @ Bᵀ) @ B   # [n, d]  projection removed at those positions only

If no position matches, the hook returns ``None`` and PyTorch keeps the module's output tensor
untouched, so logits are bit-identical to the base model's. Unlike a checkpoint edit it does not touch
a sub-word row everywhere it occurs (a target's piece inside a non-target word stays as it was), and
the output head is never affected. Remove it with ``handle.remove()``.

File ``embedding_hook.safetensors``: ``basis`` float32 [k, d], ``sequences`` int64 [n, L] (-1 padded,
:func:`.spans.pack_sequences`), ``row_ids`` int64 [r] (informational); metadata ``vocab_size``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HOOK_FILE = "embedding_hook.safetensors"


def save_hook(model_dir: str | os.PathLike[str], basis: Any, sequences: Sequence[Sequence[int]],
              row_ids: Sequence[int], vocab_size: int) -> Path:
    """Write the hook spec into ``model_dir`` (a directory being built atomically by the caller)."""
    import torch

    from biaslab.models.token_spans import pack_sequences
    from biaslab.models.weights.files import save_tensors

    path = Path(model_dir) / HOOK_FILE
    tensors = {
        "basis": torch.as_tensor(basis, dtype=torch.float32).contiguous(),
        "sequences": pack_sequences(sequences),
        "row_ids": torch.tensor(list(row_ids), dtype=torch.long),
    }
    save_tensors(tensors, path, {"vocab_size": str(vocab_size)})
    return path


class SpanProjectionHook:
    """``forward_hook(module, (input_ids,), output)``: remove the projection at target-word positions."""

    def __init__(self, basis: Any, sequences: Any):
        self.basis = basis  # [k, d]
        self.sequences = sequences  # [n, L]

    def __call__(self, module: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        import torch

        from biaslab.models.token_spans import span_mask

        mask = span_mask(inputs[0], self.sequences)  # [b, t]
        if not bool(mask.any()):
            return None
        basis = self.basis.to(device=output.device, dtype=torch.float64)
        selected = output[mask].to(torch.float64)  # [n, d]
        edited = output.clone()
        edited[mask] = (selected - (selected @ basis.T) @ basis).to(output.dtype)
        return edited


def attach_hook(model: Any, basis: Any, sequences: Any) -> Any:
    """Register the hook on ``model.get_input_embeddings()``; returns the removable handle."""
    module = model.get_input_embeddings()
    dim = module.weight.shape[1]
    if basis.shape[1] != dim:
        raise ValueError(f"embedding hook: basis has dimension {basis.shape[1]}, the model's embeddings {dim}")
    return module.register_forward_hook(SpanProjectionHook(basis, sequences))


def attach_hook_from_dir(model: Any, tokenizer: Any, model_dir: str | os.PathLike[str]) -> Any:
    """Load ``<model_dir>/embedding_hook.safetensors`` and attach it; the tokenizer must match its vocabulary."""
    from safetensors import safe_open

    path = Path(model_dir) / HOOK_FILE
    with safe_open(str(path), framework="pt") as fh:
        vocab_size = int((fh.metadata() or {}).get("vocab_size", len(tokenizer)))
        basis, sequences = fh.get_tensor("basis"), fh.get_tensor("sequences")
    if vocab_size != len(tokenizer):
        raise ValueError(
            f"{path}: built for a tokenizer of {vocab_size} tokens, the loaded one has {len(tokenizer)}; "
            "the hook's token ids would point at the wrong words. Rebuild the variant (dvc repro)."
        )
    return attach_hook(model, basis, sequences)
