"""The checkpoint edit stored as the edit: a base's input-embedding rows replaced at load time.

A checkpoint edit (:mod:`biaslab.mitigation.embedding.edit`) changes a few hundred rows of one tensor, yet
stores a whole copy of the base (16 GB for an 8B bf16 model, again in DVC's cache and in MLflow). The *rows
overlay* stores those rows alone, next to ``variant.json`` naming the base:

File ``embedding_rows.safetensors``: ``row_ids`` int64 [r] (sorted, distinct), ``rows`` [r, d] in the base's
stored dtype (the edited rows, byte for byte what the checkpoint edit writes into its copy); one metadata
entry ``embedding_rows``, a JSON object (sorted keys, so the same edit is the same bytes) of
``embedding_tensor`` (the checkpoint's key, for the reader), ``vocab_rows`` (the base embedding's row count)
and ``untie_output_head`` (``"true"`` when the base ties its output head to the input embedding).

:func:`apply_rows` gives a tied head its own copy of the (unedited) matrix first, as the checkpoint edit's
``untie_output_head`` does in the files, then writes the rows into the input embedding, cast to the loaded
dtype: the loaded model's parameters are the ones a loaded checkpoint edit has, so its scores are too
(``tests/unit/test_embedding_debias.py`` compares them). The untied head costs one embedding matrix of memory
at load, as the checkpoint edit's copy did.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROWS_FILE = "embedding_rows.safetensors"
METADATA_KEY = "embedding_rows"  # the file's one metadata entry: its fields as JSON with sorted keys


def save_rows(model_dir: str | os.PathLike[str], *, row_ids: Sequence[int], rows: Any, embedding_tensor: str,
              vocab_rows: int, untie_output_head: bool) -> Path:
    """Write the edited rows into ``model_dir`` (a directory being built atomically by the caller)."""
    import torch
    from safetensors.torch import save

    ids = torch.tensor([int(i) for i in row_ids], dtype=torch.long)
    if len(ids) != rows.shape[0] or bool((ids[1:] <= ids[:-1]).any()):
        raise ValueError(f"embedding rows: {len(ids)} ids (sorted, distinct) for {rows.shape[0]} rows")
    path = Path(model_dir) / ROWS_FILE
    fields = {"embedding_tensor": embedding_tensor, "vocab_rows": str(int(vocab_rows)),
              "untie_output_head": "true" if untie_output_head else "false"}
    # one metadata entry: safetensors writes a metadata map's entries in a per-process random order, so with
    # several the same edit gave other bytes on every run (another DVC md5 and content hash, evaluate re-run).
    # Serialised in memory (megabytes) and written by Python, so the file gets the umask's mode like the
    # variant's other files (safetensors' own save_file creates it 0600).
    path.write_bytes(save({"row_ids": ids, "rows": rows.detach().cpu().contiguous()},
                          metadata={METADATA_KEY: json.dumps(fields, sort_keys=True)}))
    return path


def read_metadata(meta: dict[str, str] | None) -> dict[str, str]:
    """The fields :func:`save_rows` stores: from the one ``embedding_rows`` entry (JSON), or - a file written
    before 2026-11-29 - the same fields as separate metadata entries."""
    meta = meta or {}
    return json.loads(meta[METADATA_KEY]) if METADATA_KEY in meta else meta


def _untie_head(model: Any) -> bool:
    """Give an output head that shares the input embedding's weight its own copy; return whether it did.

    ``tie_word_embeddings`` is set to false (and in a composite model's ``text_config``) so that nothing
    re-ties the head later (``tie_weights`` reads the config)."""
    import torch

    head = model.get_output_embeddings()
    weight = model.get_input_embeddings().weight
    if head is None or head.weight is not weight:
        return False
    head.weight = torch.nn.Parameter(weight.detach().clone(), requires_grad=weight.requires_grad)
    for config in (model.config, getattr(model.config, "text_config", None)):
        if config is not None and hasattr(config, "tie_word_embeddings"):
            config.tie_word_embeddings = False
    return True


def apply_rows(model: Any, row_ids: Any, rows: Any, *, where: str = ROWS_FILE) -> bool:
    """Untie a tied head, then set the input embedding's rows ``row_ids`` to ``rows``; return whether it untied.

    ``where`` names the file in the error when the rows do not fit the model's embedding."""
    import torch

    weight = model.get_input_embeddings().weight
    if rows.ndim != 2 or rows.shape[1] != weight.shape[1]:
        raise ValueError(f"{where}: rows of width {tuple(rows.shape)[1:]} for an embedding of width {weight.shape[1]}")
    if len(row_ids) and int(row_ids.max()) >= weight.shape[0]:
        raise ValueError(f"{where}: row id {int(row_ids.max())} beyond the model's {weight.shape[0]} embedding rows; "
                         "the variant was built on another base. Rebuild it (dvc repro)")
    untied = _untie_head(model)
    weight = model.get_input_embeddings().weight
    with torch.no_grad():
        weight[row_ids.to(weight.device)] = rows.to(device=weight.device, dtype=weight.dtype)
    return untied


def apply_rows_from_dir(model: Any, model_dir: str | os.PathLike[str]) -> bool:
    """Load ``<model_dir>/embedding_rows.safetensors`` and apply it (:func:`apply_rows`); the model's embedding
    must have the row count the rows were cut from (another vocabulary would put them on other words)."""
    from safetensors import safe_open

    path = Path(model_dir) / ROWS_FILE
    with safe_open(str(path), framework="pt") as fh:
        meta = read_metadata(fh.metadata())
        row_ids, rows = fh.get_tensor("row_ids"), fh.get_tensor("rows")
    vocab_rows = int(meta.get("vocab_rows", -1))
    found = model.get_input_embeddings().weight.shape[0]
    if vocab_rows != found:
        raise ValueError(f"{path}: cut from an embedding of {vocab_rows} rows, the loaded model's has {found}; the "
                         "rows would replace other words' rows. Rebuild the variant (dvc repro)")
    return apply_rows(model, row_ids, rows, where=str(path))
