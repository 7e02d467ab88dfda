"""The fixed output paths of the pipeline, spelled once (relative to the project root).

Directories the user configures live in ``params.yaml`` (``data.prepared_dir``, ``model.output_dir``,
``variants.<v>.model_dir``, ``tune.output_dir``, ``lora.checkpoint_dir``) and are read from
:class:`~biaslab.config.Params`; the paths below are not configurable, and ``dvc.yaml`` names the same
ones in its ``outs``/``metrics``.
"""

from __future__ import annotations

from pathlib import Path

METRICS_DIR = Path("metrics")
RUNS_DIR = Path("runs")
REPORTS_DIR = Path("reports")
PREDICTIONS_DIR = Path("data") / "predictions"
TABLES_DIR = REPORTS_DIR / "tables"


def metrics_file(variant: str) -> Path:
    """``metrics/<variant>.json``: every metric with direction, ideal and CI (register/report read it)."""
    return METRICS_DIR / f"{variant}.json"


def metric_values_file(variant: str) -> Path:
    """``metrics/values/<variant>.json``: ``{metric: value}``, what ``dvc metrics show/diff`` prints."""
    return METRICS_DIR / "values" / f"{variant}.json"


def predictions_dir(variant: str) -> Path:
    """``data/predictions/<variant>/<benchmark>__<table>.parquet``: per-item rows."""
    return PREDICTIONS_DIR / variant


def tables_dir(variant: str) -> Path:
    """``reports/tables/<variant>/<benchmark>__<table>.csv``: each benchmark's paper-shaped tables."""
    return TABLES_DIR / variant


def run_file(stage: str, item: str | None = None) -> Path:
    """``runs/<stage>.json``, or ``runs/<stage>_<item>.json`` for a ``foreach`` stage (one per item)."""
    return RUNS_DIR / (f"{stage}_{item}.json" if item else f"{stage}.json")
