"""Training curves as ``dvc plots`` files: one ``<series>.csv`` (``step,value``) per curve in a stage's folder.

The training stages log their curves to MLflow while they train (``train/loss`` every step, ``val/ppl_<lang>``
every ``eval_every`` steps, the LoRA trainer's ``train/loss``/``train/eval_loss``); once the run has ended the
stage writes the same points here (``reports/curves/<stage>[_<item>]/``, see
:func:`biaslab.outputs.paths.curves_dir`), declared as the stage's ``plots:`` in ``dvc.yaml``, so
``dvc plots show`` / ``dvc plots diff`` draw them for any commit or experiment without an MLflow server.
A folder whose stage trained nothing (a snapshot of ``model.source``, a skipped control) holds the header
of :data:`EMPTY_SERIES` only, so the DVC output always exists.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from biaslab.atomic import atomic_dir

LORA = ("train/loss", "train/eval_loss")  # finetune: the trainer's logged loss (and validation loss when on)
COLUMNS = ("step", "value")
EMPTY_SERIES = "train_loss"


def file_name(metric: str) -> str:
    """``train/loss`` -> ``train_loss.csv``."""
    return metric.replace("/", "_") + ".csv"


def write(folder: str | os.PathLike[str], series: Mapping[str, Sequence[tuple[int, float]]]) -> Path:
    """Write ``{metric: [(step, value), ...]}`` as one CSV per metric, sorted by step, replacing ``folder`` atomically."""
    with atomic_dir(folder) as tmp:
        for metric, points in (series or {EMPTY_SERIES: []}).items():
            lines = [",".join(COLUMNS)] + [f"{int(step)},{float(value)!r}" for step, value in sorted(points)]
            (tmp / file_name(metric)).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Path(folder)


def read(folder: str | os.PathLike[str]) -> dict[str, list[tuple[int, float]]]:
    """The curves of a folder written by :func:`write` (file stem -> points)."""
    out = {}
    for path in sorted(Path(folder).glob("*.csv")):
        rows = path.read_text(encoding="utf-8").splitlines()[1:]
        out[path.stem] = [(int(s), float(v)) for s, v in (row.split(",") for row in rows)]
    return out
