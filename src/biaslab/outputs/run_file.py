"""``runs/<stage>.json``: the record a stage leaves for the stages after it.

A stage that DVC skips runs no code and creates no MLflow run, so downstream stages (and the
``biaslab`` CLI) find a stage's MLflow run id, model directory and fingerprint here. Every stage
writes its file last, atomically, after its outputs; it is a DVC output with ``cache: false``. Keys per
stage (``run_id`` always):

* ``base_model``: ``model_uri``, ``fingerprint``, ``source``;
* ``edit_embeddings_<v>``: ``variant``, ``model_dir``, ``model_fingerprint``, ``stage``;
* ``tune``: ``study_name``, ``best_trial``, ``best_params``, ``values``, ``n_complete``, ``best_params_path``;
* ``finetune``: ``variant``, ``model_dir``, ``fingerprint``, ``hyperparameters``, ``global_step``, ``resumed_from``;
* ``evaluate_<v>``: ``variant``, ``model_dir``, ``fingerprint``;
* ``register``: ``model_name``, ``versions`` (variant -> registry version), ``candidate``, ``details``,
  ``skipped`` (variant -> why it has no version; only when a variant was skipped, :func:`registered_skips`)
  (no ``run_id``: see :func:`registered_versions`).

When LoRA does not apply to the base model (a masked LM, :mod:`biaslab.mitigation.applicability`), the
``tune``, ``finetune_<v>`` and ``evaluate_<v>`` files of the LoRA variants hold ``skipped`` (the reason)
instead of the results.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from biaslab.atomic import atomic_write_text
from biaslab.errors import MissingInputError
from biaslab.outputs import paths


def write(path: str | os.PathLike[str], **fields: Any) -> Path:
    """Write a run file atomically (sorted keys, so reruns with the same content give the same bytes)."""
    atomic_write_text(path, json.dumps(fields, indent=2, sort_keys=True, default=str) + "\n")
    return Path(path)


def read(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a run file; a missing one is an error naming the stage that writes it."""
    path = Path(path)
    if not path.is_file():
        raise MissingInputError(f"{path}: run file not found; run the stage that produces it (dvc repro)")
    return json.loads(path.read_text(encoding="utf-8"))


def registered_versions(path: str | os.PathLike[str] = paths.run_file("register")) -> dict[str, str]:
    """``variant -> registry version`` from ``runs/register.json``; empty when nothing is registered yet."""
    path = Path(path)
    if not path.is_file():
        return {}
    return {k: str(v) for k, v in json.loads(path.read_text(encoding="utf-8")).get("versions", {}).items()}


def registered_skips(path: str | os.PathLike[str] = paths.run_file("register")) -> dict[str, str]:
    """``variant -> reason`` of the variants ``runs/register.json`` lists as not registered (their mitigation
    did not apply); empty when there are none or nothing is registered yet."""
    path = Path(path)
    if not path.is_file():
        return {}
    return dict(json.loads(path.read_text(encoding="utf-8")).get("skipped", {}))
