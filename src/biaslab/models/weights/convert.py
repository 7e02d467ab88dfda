"""Store a checkpoint in another dtype (``model.dtype: bfloat16`` of a float32 source), tensor by tensor.

Floating tensors are cast, integer/bool tensors (buffers, quantisation tables) are kept. Tensors are
read one at a time and gathered into output shards of at most ``max_shard_bytes``, each written with
``safetensors.torch.save_file`` before the next one is read, so memory holds one shard, not the model.
Several shards get the standard ``model.safetensors.index.json``; one shard is ``model.safetensors``.
``config.json`` records the new dtype (``dtype``, and ``torch_dtype`` where an older config has it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from biaslab.models.weights.index import INDEX_FILE, SINGLE_FILE, SafetensorsIndex, TensorEntry

DEFAULT_SHARD_BYTES = 1 << 30  # 1 GiB


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"`` (the spelling of config.json and params.yaml)."""
    return str(dtype).removeprefix("torch.")


def _target_bytes(entry: TensorEntry, dtype: torch.dtype) -> int:
    return entry.numel * dtype.itemsize if entry.dtype.is_floating_point else entry.nbytes


def plan_shards(entries: list[TensorEntry], dtype: torch.dtype, max_shard_bytes: int) -> list[list[TensorEntry]]:
    """Consecutive groups of tensors, each at most ``max_shard_bytes`` after the cast (a larger tensor alone)."""
    shards: list[list[TensorEntry]] = [[]]
    size = 0
    for entry in entries:
        nbytes = _target_bytes(entry, dtype)
        if shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(entry)
        size += nbytes
    return shards


def convert_weights(src: str | os.PathLike[str], dst: str | os.PathLike[str], dtype: torch.dtype, *,
                    max_shard_bytes: int = DEFAULT_SHARD_BYTES) -> list[Path]:
    """Write ``src``'s safetensors weights into ``dst`` with floating tensors cast to ``dtype``."""
    from safetensors import safe_open

    from biaslab.models.weights.files import save_tensors

    index = SafetensorsIndex(src)
    entries = list(index)
    shards = plan_shards(entries, dtype, max_shard_bytes)
    dst = Path(dst)
    names = ([SINGLE_FILE] if len(shards) == 1
             else [f"model-{i:05d}-of-{len(shards):05d}.safetensors" for i in range(1, len(shards) + 1)])
    weight_map, total = {}, 0
    for name, shard in zip(names, shards):
        tensors = {}
        for entry in shard:
            with safe_open(str(entry.file), framework="pt") as fh:
                tensor = fh.get_tensor(entry.name)
            tensors[entry.name] = tensor.to(dtype) if tensor.is_floating_point() else tensor
            weight_map[entry.name] = name
            total += _target_bytes(entry, dtype)
        save_tensors(tensors, dst / name, {"format": "pt"})
        del tensors
    if len(shards) > 1:
        (dst / INDEX_FILE).write_text(
            json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2, sort_keys=True) + "\n",
            encoding="utf-8")
    return [dst / n for n in names]


def set_config_dtype(config_path: str | os.PathLike[str], dtype: torch.dtype) -> None:
    """Record ``dtype`` in ``config.json`` (``dtype`` key, and ``torch_dtype`` where present), also in sub-configs.

    The file is left byte for byte as it was when it already says ``dtype``.
    """
    path = Path(config_path)
    config = json.loads(path.read_text(encoding="utf-8"))
    name = dtype_name(dtype)
    if config.get("dtype") == name and config.get("torch_dtype", name) == name:
        return

    def update(node: dict) -> None:
        node["dtype"] = name
        if "torch_dtype" in node:
            node["torch_dtype"] = name
        for value in node.values():
            if isinstance(value, dict) and ("dtype" in value or "torch_dtype" in value):
                update(value)

    update(config)
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
