"""Every output path of the pipeline, spelled once (relative to the project root).

Two kinds: fixed paths (``metrics/<variant>.json``, ``runs/<stage>.json``, ``reports/…``), defined
here, and directories the user configures in ``params.yaml`` (``data.prepared_dir``,
``model.output_dir``, ``variants.<v>.model_dir``, ``tune.output_dir``, ``lora.checkpoint_dir``), read
from :class:`~biaslab.config.Params`. :func:`stage_outputs` lists both per DVC stage;
``tests/pipeline/test_output_paths.py`` checks that it equals the ``outs``/``metrics``/``plots`` of
``dvc.yaml``, so the two cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from biaslab.config import Params

METRICS_DIR = Path("metrics")
RUNS_DIR = Path("runs")
REPORTS_DIR = Path("reports")
PREDICTIONS_DIR = Path("data") / "predictions"
RAW_INPUTS_DIR = Path("data") / "raw_inputs"
TABLES_DIR = REPORTS_DIR / "tables"
CALIBRATION_REPORT = REPORTS_DIR / "calibration.md"
CALIBRATION_TABLE = REPORTS_DIR / "calibration.csv"
SPIKE_IN_TABLE = REPORTS_DIR / "spike_in.csv"  # the spike-in self-test's dose-responses (docs/spike_in.md)
CURVES_DIR = REPORTS_DIR / "curves"


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


def raw_inputs_file(name: str) -> Path:
    """``data/raw_inputs/<name>.json`` (``datasets`` | ``corpora``): the sha256 of every raw input, by path."""
    return RAW_INPUTS_DIR / f"{name}.json"


def run_file(stage: str, item: str | None = None) -> Path:
    """``runs/<stage>.json``, or ``runs/<stage>_<item>.json`` for a ``foreach`` stage (one per item)."""
    return RUNS_DIR / (f"{stage}_{item}.json" if item else f"{stage}.json")


def curves_dir(stage: str, item: str | None = None) -> Path:
    """``reports/curves/<stage>[_<item>]/<series>.csv``: a training stage's curves (``dvc plots``)."""
    return CURVES_DIR / (f"{stage}_{item}" if item else stage)


@dataclass(frozen=True)
class ReportFiles:
    """What the ``report`` stage writes under ``reports/``."""

    report_md: Path
    summary_csv: Path
    bias_vs_accuracy_csv: Path
    bias_vs_accuracy_json: Path
    bias_vs_accuracy_png: Path
    side_by_side_dir: Path
    paper_dir: Path
    comparison_md: Path  # headline metrics vs base (``biaslab compare``'s table)
    comparison_html: Path

    @classmethod
    def under(cls, out_dir: str | Path = REPORTS_DIR) -> "ReportFiles":
        out = Path(out_dir)
        return cls(out / "report.md", out / "summary.csv", out / "bias_vs_accuracy.csv",
                   out / "bias_vs_accuracy.json", out / "bias_vs_accuracy.png", out / "side_by_side", out / "paper",
                   out / "comparison.md", out / "comparison.html")

    def all(self) -> list[Path]:
        return [getattr(self, f.name) for f in fields(self)]


def stage_outputs(stage: str, params: Params, item: str | None = None) -> list[Path]:
    """Every path DVC stage ``stage`` (``item``: its ``foreach`` item) writes, as ``dvc.yaml`` declares them."""
    if stage == "preflight":
        return [run_file("preflight")]
    if stage == "raw_data":
        return [raw_inputs_file("datasets"), raw_inputs_file("corpora")]
    if stage == "prepare":
        return [Path(params.data.prepared_dir)]
    if stage == "base_model":
        return [Path(params.model.output_dir), Path(params.model.pretrain.planted_bias.checkpoint_dir),
                run_file("base_model"), curves_dir("base_model")]
    if stage == "control_model":
        return [Path(params.calibrate.control_dir), run_file("control_model"), curves_dir("control_model")]
    if stage == "edit_embeddings":
        return [Path(params.variant(item).model_dir), run_file("edit_embeddings", item)]
    if stage == "gate_control":  # a control of the gate (docs/gate.md "Controls")
        return [Path(params.variant(item).model_dir), run_file("gate_control", item)]
    if stage == "tune":
        return [Path(params.tune.output_dir), run_file("tune")]
    if stage == "tune_variant":  # a variant's own study (tune_overrides)
        return [Path(params.tune_for(item).output_dir), run_file("tune", item)]
    if stage == "finetune":
        return [Path(params.variant(item).model_dir), Path(params.lora_for(item).checkpoint_dir),
                run_file("finetune", item), curves_dir("finetune", item)]
    if stage == "evaluate":
        return [metric_values_file(item), metrics_file(item), predictions_dir(item), tables_dir(item),
                run_file("evaluate", item)]
    if stage == "calibrate":  # evaluates the control model as a variant, then compares
        return [*stage_outputs("evaluate", params, "control"), CALIBRATION_REPORT, CALIBRATION_TABLE,
                SPIKE_IN_TABLE, run_file("calibrate")]
    if stage == "register":
        return [run_file("register")]
    if stage == "report":
        return ReportFiles.under().all()
    raise KeyError(f"{stage!r}: no outputs known; add the stage to biaslab.outputs.paths.stage_outputs")
