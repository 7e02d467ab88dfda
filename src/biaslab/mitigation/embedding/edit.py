"""Remove the gender projection from embedding rows: ``e ← e − Bᵀ (B e)``.

For rows E [n, d] and an orthonormal basis B [k, d]::

    coeff = E @ Bᵀ          # [n, k]  coordinates in the gender subspace
    E'    = E − coeff @ B   # [n, d]  now B @ E'ᵀ = 0

The arithmetic runs in float64 and is applied twice (the second pass removes the float32 rounding
left by the first), then cast back to the weight's dtype: for float32 weights ``|B e'| < 1e-6``.

Tied embeddings: many LMs (GPT-2, Gemma, Qwen2.5-0.5B, our tests' ``tie_word_embeddings=True``) share
one matrix between the input embedding and the output head. Editing the input rows in place would then
silently change the output logits of every target token too. :func:`untie_output_head` first gives the
head its own copy (``clone``) and sets ``tie_word_embeddings=False`` so the saved checkpoint reloads
untied — the edit stays an *input* intervention, exactly as the runtime hook is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def remove_projection(rows: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """``rows`` [n, d] minus their projection onto the span of ``basis`` [k, d] (orthonormal rows)."""
    b = basis.to(torch.float64)
    out = rows.to(torch.float64)
    for _ in range(2):
        out = out - (out @ b.T) @ b
    return out.to(rows.dtype)


def _tied(model: Any) -> bool:
    head = model.get_output_embeddings()
    if head is None:
        return False
    return head.weight is model.get_input_embeddings().weight or (
        head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    )


def untie_output_head(model: Any) -> bool:
    """Give a tied output head its own copy of the weight; returns whether it was tied."""
    if not _tied(model):
        return False
    head = model.get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach().clone(), requires_grad=head.weight.requires_grad)
    for config in {id(c): c for c in (model.config, model.config.get_text_config())}.values():
        config.tie_word_embeddings = False
    # transformers ≥ 5 keeps the tie mapping on the model; recompute it from the (now untied) config
    if hasattr(model, "all_tied_weights_keys") and hasattr(model, "get_expanded_tied_weights_keys"):
        model.all_tied_weights_keys = model.get_expanded_tied_weights_keys(all_submodels=True)
    return True


@torch.no_grad()
def edit_input_embeddings(model: Any, basis: torch.Tensor, row_ids: Sequence[int]) -> float:
    """Untie, then remove the projection from the input-embedding rows ``row_ids``.

    Returns the largest remaining ``|B e|`` over the edited rows (a self-check reported by the stage).
    """
    untie_output_head(model)
    weight = model.get_input_embeddings().weight  # [V, d]
    ids = torch.as_tensor(list(row_ids), dtype=torch.long, device=weight.device)
    if ids.numel() == 0:
        return 0.0
    basis = basis.to(weight.device)
    weight[ids] = remove_projection(weight[ids], basis)
    residual = weight[ids].to(torch.float64) @ basis.to(torch.float64).T  # [n, k]
    return float(residual.norm(dim=1).max())
