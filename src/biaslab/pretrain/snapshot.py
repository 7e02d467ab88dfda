"""Snapshot a hub or local model into ``models/base`` (``model.source`` is set), in its own dtype.

The snapshot is a byte copy of the checkpoint's files (weights, config, tokenizer; :mod:`biaslab.models.weights.files`),
not a load and re-save: a bf16 checkpoint stays bf16 and the stage never holds the model in memory.
``model.dtype`` other than ``auto`` stores another dtype, converted tensor by tensor
(:mod:`biaslab.models.weights.convert`). Before copying, the source is checked the way every load is:
safetensors only unless ``allow_pickle``, no remote code unless ``trust_remote_code``, the config
builds a model (on the meta device: no weights), the tokenizer loads. A hub id is resolved to one
commit and its model files are fetched at that commit into the Hugging Face cache (``snapshot_download``
with the model-file patterns); a hub failure is a :class:`~biaslab.models.load.ModelLoadError` quoting the
hub and saying what to do. ``snapshot.json`` records the requested ``revision`` and the
``resolved_commit`` it named (a branch moves, a commit does not: pin ``model.revision`` to reproduce).

A pickle-only source (``allow_pickle: true``) cannot be copied as safetensors: it is loaded with
transformers and saved once (memory: the whole model), in its own dtype unless ``model.dtype`` says.
The snapshot is written atomically with a ``snapshot.json`` recording where it came from.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from biaslab.atomic import atomic_dir
from biaslab.config import ModelConfig
from biaslab.models.weights.files import MODEL_FILE_PATTERNS, PICKLE_SUFFIXES, copy_model_files, model_files


def fetch_source(cfg: ModelConfig) -> tuple[Path, str | None]:
    """``(local directory holding cfg.source, hub commit or None)``: the directory itself, or its hub snapshot.

    A hub id is resolved to one commit first (:func:`biaslab.models.hub.resolve_commit`) and its model files are
    fetched at that commit into the Hugging Face cache; a hub failure (gated or missing repository, wrong
    revision, offline) is a :class:`~biaslab.models.load.ModelLoadError` quoting the hub (:func:`biaslab.models.hub.explain`).
    """
    from biaslab.models import hub
    from biaslab.models.load import ModelLoadError

    local = Path(cfg.source)
    if local.exists():
        if not local.is_dir() or not (local / "config.json").is_file():
            raise ModelLoadError(f"{local}: not a model directory (no config.json)")
        return local, None
    patterns = list(MODEL_FILE_PATTERNS)
    if cfg.allow_pickle:
        patterns += [f"*{suffix}" for suffix in PICKLE_SUFFIXES]
    if cfg.trust_remote_code:
        patterns.append("*.py")
    try:
        commit = hub.resolve_commit(cfg.source, cfg.revision).resolved
        return hub.download_snapshot(cfg.source, commit, patterns), commit  # the index's shards only
    except Exception as exc:
        message = hub.explain(exc, cfg.source, cfg.revision)
        if message is None:
            raise
        raise ModelLoadError(message) from exc


def snapshot_model(cfg: ModelConfig, out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Copy (or convert) ``cfg.source`` into ``out_dir``; returns the provenance record."""
    import torch
    from transformers import AutoTokenizer

    from biaslab.models.load import ModelLoadError, check_safe
    from biaslab.outputs.variant_dir import fingerprint_dir
    from biaslab.models.weights.convert import convert_weights, dtype_name, set_config_dtype
    from biaslab.models.weights.index import SafetensorsIndex, weight_files
    from biaslab.models.weights.layout import model_layout

    if not cfg.source:
        raise ValueError("model.source is null: there is nothing to snapshot (train the default model instead)")
    source, commit = fetch_source(cfg)
    check_safe(source, cfg.allow_pickle)
    layout = model_layout(source, kind=cfg.kind, trust_remote_code=cfg.trust_remote_code)
    AutoTokenizer.from_pretrained(str(source), trust_remote_code=cfg.trust_remote_code)  # fails here, not later
    record: dict[str, Any] = {
        "source": cfg.source,
        "revision": cfg.revision,
        "resolved_commit": commit,  # the hub commit the requested revision named; null for a local dir
        "kind": layout.kind,
        "source_fingerprint": fingerprint_dir(source) if commit is None else f"hub:{cfg.source}@{commit}",
        "architecture": layout.architecture,
        "n_parameters": layout.n_parameters,
    }
    with atomic_dir(out_dir) as tmp:
        if weight_files(source):
            stored = SafetensorsIndex(source).floating_dtype()
            target = stored if cfg.dtype == "auto" else getattr(torch, cfg.dtype)
            converting = stored is not None and target != stored
            copy_model_files(source, tmp, weights=not converting, trust_remote_code=cfg.trust_remote_code)
            if converting:
                convert_weights(source, tmp, target)
            if target is not None:
                set_config_dtype(tmp / "config.json", target)  # dtype="auto" then loads what is stored
            record |= {"stored_dtype": dtype_name(stored) if stored else None,
                       "dtype": dtype_name(target) if target else None, "method": "convert" if converting else "copy"}
        else:
            record |= _resave_pickle(cfg, source, tmp)
        if not any(p.suffix == ".safetensors" for p in Path(tmp).iterdir()):
            raise ModelLoadError(f"{cfg.source}: the snapshot holds no .safetensors file ({out_dir})")
        record["files"] = sorted(p.name for p in model_files(tmp))
        (Path(tmp) / "snapshot.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def _resave_pickle(cfg: ModelConfig, source: Path, out: Path) -> dict[str, Any]:
    """Load a pickle-only checkpoint (``allow_pickle``) and save it once as safetensors."""
    from biaslab.models.load import load_model
    from biaslab.models.weights.convert import dtype_name

    loaded = load_model(source, kind=cfg.kind, trust_remote_code=cfg.trust_remote_code, allow_pickle=True,
                        dtype=cfg.dtype)
    dtype = next(loaded.model.parameters()).dtype
    loaded.model.save_pretrained(out)  # transformers 5 writes safetensors only
    loaded.tokenizer.save_pretrained(out)
    return {"stored_dtype": None, "dtype": dtype_name(dtype), "method": "load-and-save (pickle source)"}
