"""Snapshot a hub or local model into ``models/base`` as safetensors (``model.source`` is set).

Loading goes through :func:`biaslab.models.load_model`, so the same safety rules apply as everywhere:
safetensors only unless ``allow_pickle``, no remote code unless ``trust_remote_code``, and an unknown hub id
on an offline machine is a :class:`~biaslab.models.ModelLoadError` that says what to do. The snapshot is
written atomically (temporary directory, then rename) with a ``snapshot.json`` recording where it came from:
the requested ``revision`` and the ``resolved_commit`` it named when the files were fetched (a branch moves,
a commit does not: pin ``model.revision`` to that commit to reproduce the run).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from biaslab.atomic import atomic_dir
from biaslab.config import ModelConfig


def snapshot_model(cfg: ModelConfig, out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Load ``cfg.source`` and save model + tokenizer into ``out_dir``; returns the provenance record."""
    from biaslab.models import ModelLoadError, load_model

    if not cfg.source:
        raise ValueError("model.source is null: there is nothing to snapshot (train the default model instead)")
    loaded = load_model(
        cfg.source,
        kind=cfg.kind,
        trust_remote_code=cfg.trust_remote_code,
        allow_pickle=cfg.allow_pickle,
        revision=cfg.revision,
    )
    record = {
        "source": cfg.source,
        "revision": cfg.revision,
        "resolved_commit": loaded.commit,  # the hub commit the requested revision named; null for a local dir
        "kind": loaded.kind,
        "source_fingerprint": loaded.fingerprint,
        "architecture": type(loaded.model).__name__,
        "n_parameters": sum(p.numel() for p in loaded.model.parameters()),
    }
    with atomic_dir(out_dir) as tmp:
        loaded.model.save_pretrained(tmp)  # transformers 5 writes safetensors only
        loaded.tokenizer.save_pretrained(tmp)
        if not any(p.suffix == ".safetensors" for p in Path(tmp).iterdir()):
            raise ModelLoadError(f"{cfg.source}: save_pretrained wrote no .safetensors file into {out_dir}")
        (Path(tmp) / "snapshot.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record
