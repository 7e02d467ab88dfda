"""Remove the gender projection from embedding rows: ``e ← e − Bᵀ (B e)``, stored as the rows or in a checkpoint copy.

For rows E [n, d] and an orthonormal basis B [k, d]::

    coeff = E @ Bᵀ          # [n, k]  coordinates in the gender subspace
    E'    = E − coeff @ B   # [n, d]  now B @ E'ᵀ = 0

The arithmetic runs in float64 and is applied twice (the second pass removes the rounding left by the
first), then cast back to the stored dtype: for float32 rows ``|B e'| < 1e-6``; for bfloat16 rows the
residual is the bf16 rounding of the written row (at most ~2⁻⁸·‖e'‖).

Stored as the rows (:func:`edit_rows`, ``embedding_apply: rows``, the default): the edited rows alone, in the
base's dtype, with ``variant.json`` naming the base (:mod:`biaslab.models.embedding_rows` puts them into the
loaded base). Stored as a checkpoint (:func:`edit_checkpoint`, ``embedding_apply: checkpoint``): the base's files are copied byte for byte
(:mod:`biaslab.models.weights.files`), and only the target rows of the input-embedding tensor are overwritten
in the copy (:meth:`biaslab.models.weights.index.SafetensorsIndex.write_rows`). Every other byte - every other
row, every other tensor, the dtype - is the base's.

Tied embeddings: many LMs (GPT-2, Gemma, Qwen2.5-0.5B, XLM-R, our tests' ``tie_word_embeddings=True``)
share one matrix between the input embedding and the output head. Editing the shared rows would then
silently change the output logits of every target token too. :func:`untie_output_head` first gives the
head its own copy in the files - the base's embedding matrix as a new shard (or over the head tensor
when the checkpoint stores one) - and sets ``tie_word_embeddings: false``, so the variant reloads
untied and the edit stays an *input* intervention, exactly as the runtime hook is. The untied head
makes such a variant larger than its base by the size of the embedding matrix.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from biaslab.models.weights.index import INDEX_FILE, SafetensorsIndex, weight_files
from biaslab.models.weights.layout import ModelLayout

_COPY_CHUNK = 1 << 24  # 16 MiB per read when copying a tensor's bytes between files


def remove_projection(rows: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """``rows`` [n, d] minus their projection onto the span of ``basis`` [k, d] (orthonormal rows)."""
    b = basis.to(torch.float64)
    out = rows.to(torch.float64)
    for _ in range(2):
        out = out - (out @ b.T) @ b
    return out.to(rows.dtype)


def _set_untied(config_path: Path) -> None:
    """``tie_word_embeddings: false`` in ``config.json`` and in its ``text_config`` (composite models)."""
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["tie_word_embeddings"] = False
    if isinstance(config.get("text_config"), dict):
        config["text_config"]["tie_word_embeddings"] = False
    config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def _copy_tensor_bytes(index: SafetensorsIndex, src_key: str, dst_key: str) -> None:
    """Overwrite tensor ``dst_key``'s bytes with ``src_key``'s (same dtype and shape), in chunks."""
    src, dst = index[src_key], index[dst_key]
    if (src.dtype, src.shape) != (dst.dtype, dst.shape):
        raise ValueError(f"{index.directory}: cannot untie {dst_key} {dst.shape} from {src_key} {src.shape}")
    with src.file.open("rb") as fin, dst.file.open("r+b") as fout:
        for offset in range(0, src.nbytes, _COPY_CHUNK):
            fin.seek(src.start + offset)
            fout.seek(dst.start + offset)
            fout.write(fin.read(min(_COPY_CHUNK, src.nbytes - offset)))
        fout.flush()
        os.fsync(fout.fileno())


def _add_shard(directory: Path, name: str, tensor: torch.Tensor) -> None:
    """Add ``{name: tensor}`` as a new last shard: shards renumbered ``model-0000i-of-0000N``, index rewritten."""
    from biaslab.models.weights.files import save_tensors
    from biaslab.models.weights.index import file_entries

    shards = weight_files(directory)
    total = len(shards) + 1
    renamed = []
    for i, shard in enumerate(shards, start=1):
        target = directory / f"model-{i:05d}-of-{total:05d}.safetensors"
        os.replace(shard, target)
        renamed.append(target)
    new = directory / f"model-{total:05d}-of-{total:05d}.safetensors"
    save_tensors({name: tensor.contiguous()}, new, {"format": "pt"})
    weight_map, size = {}, 0
    for shard in [*renamed, new]:
        for entry in file_entries(shard):
            weight_map[entry.name] = shard.name
            size += entry.nbytes
    (directory / INDEX_FILE).write_text(
        json.dumps({"metadata": {"total_size": size}, "weight_map": weight_map}, indent=2, sort_keys=True) + "\n",
        encoding="utf-8")


def untie_output_head(directory: Path, layout: ModelLayout, embedding_key: str) -> bool:
    """Give a tied output head its own copy of the (unedited) embedding in ``directory``'s files.

    Returns whether the head was tied. Run before the embedding rows are edited.
    """
    if not layout.tied or layout.output_head is None:
        return False
    index = SafetensorsIndex(directory)
    head_key = layout.checkpoint_key(layout.output_head, index)
    if head_key is not None:  # the checkpoint stores the head although tied: make it the embedding's bytes
        _copy_tensor_bytes(index, embedding_key, head_key)
    else:
        from safetensors import safe_open

        entry = index[embedding_key]
        with safe_open(str(entry.file), framework="pt") as fh:
            embedding = fh.get_tensor(embedding_key)
        _add_shard(directory, layout.output_head, embedding)
        del embedding
    _store_untie_losses(directory, layout)
    _set_untied(directory / "config.json")
    return True


def _store_untie_losses(directory: Path, layout: ModelLayout) -> None:
    """Store the targets of the ties untying drops (``layout.untie_losses``) as copies of their sources.

    Without this an untied RoBERTa/XLM-R checkpoint reloads its MLM decoder bias as zeros (the file holds
    ``lm_head.bias`` once; with the tie gone, ``lm_head.decoder.bias`` is "missing" and freshly initialised),
    which shifts every output logit by the bias: the edit would no longer be an input intervention.
    """
    from safetensors import safe_open

    for target, source in layout.untie_losses:
        index = SafetensorsIndex(directory)
        if layout.checkpoint_key(target, index) is not None:
            continue
        source_key = layout.require_key(source, index)
        prefix = f"{layout.base_model_prefix}."
        stored_without_prefix = source_key != source and source.startswith(prefix)
        target_key = target[len(prefix):] if stored_without_prefix and target.startswith(prefix) else target
        with safe_open(str(index[source_key].file), framework="pt") as fh:
            _add_shard(directory, target_key, fh.get_tensor(source_key))


def edit_checkpoint(base_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], layout: ModelLayout,
                    basis: torch.Tensor, row_ids: Sequence[int]) -> dict[str, Any]:
    """Copy ``base_dir``'s model into ``out_dir``, untie a tied head, remove the projection from ``row_ids``.

    Returns ``{"output_head_untied", "max_residual_projection", "dtype", "embedding_tensor"}``; the
    residual is ``max ‖B e'‖`` over the edited rows as written (re-read from the file).
    """
    from biaslab.models.weights.files import copy_model_files

    out_dir = Path(out_dir)
    key = layout.require_key(layout.input_embedding, SafetensorsIndex(base_dir))
    copy_model_files(base_dir, out_dir)
    untied = untie_output_head(out_dir, layout, key)
    index = SafetensorsIndex(out_dir)
    ids = sorted({int(i) for i in row_ids})
    if ids:
        index.write_rows(key, ids, remove_projection(index.read_rows(key, ids), basis))
    return _edit_report(untied, index.read_rows(key, ids) if ids else None, basis, index[key].dtype, key)


def edit_rows(base_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], layout: ModelLayout,
              basis: torch.Tensor, row_ids: Sequence[int]) -> dict[str, Any]:
    """Write the edit of :func:`edit_checkpoint` as the edited rows alone (``embedding_rows.safetensors``).

    The rows are computed from the base's stored rows exactly as :func:`edit_checkpoint` computes the ones it
    writes into its copy (same function, same dtype), so the loaded variant has the same parameters; the
    variant is kilobytes to megabytes instead of a checkpoint. Returns the same report keys (the head is
    untied at load when the base ties it). ``variant.json`` is the caller's.
    """
    from biaslab.models.embedding_rows import save_rows

    index = SafetensorsIndex(base_dir)
    key = layout.require_key(layout.input_embedding, index)
    ids = sorted({int(i) for i in row_ids})
    rows = remove_projection(index.read_rows(key, ids), basis)
    untied = bool(layout.tied and layout.output_head is not None)
    save_rows(out_dir, row_ids=ids, rows=rows, embedding_tensor=key, vocab_rows=index[key].shape[0],
              untie_output_head=untied)
    return _edit_report(untied, rows if ids else None, basis, index[key].dtype, key)


def _edit_report(untied: bool, edited: torch.Tensor | None, basis: torch.Tensor, dtype: torch.dtype,
                 key: str) -> dict[str, Any]:
    """The report both ways of storing the edit return: ``max_residual_projection`` is ``max ‖B e'‖`` over
    the edited rows in the dtype they are stored in (0.0 when no row is edited)."""
    from biaslab.models.weights.convert import dtype_name

    residual = 0.0
    if edited is not None:
        residual = float((edited.to(torch.float64) @ basis.to(torch.float64).T).norm(dim=1).max())
    return {"output_head_untied": untied, "max_residual_projection": residual,
            "dtype": dtype_name(dtype), "embedding_tensor": key}

