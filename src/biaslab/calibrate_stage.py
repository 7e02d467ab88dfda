"""The ``calibrate`` stage: the known-answer check of the planted bias.

The control model (stage ``control_model``, :mod:`biaslab.pretrain.control`) is the default model's
training with the planted sentences' genders counterbalanced. ``calibrate`` evaluates the control with every enabled benchmark (as a ``method: none``
variant named ``control``, outputs under ``metrics/control.json`` etc.), compares it with the base and every
mitigation variant (:mod:`biaslab.calibration`) and writes ``reports/calibration.md`` and
``reports/calibration.csv``; the numbers go to the stage's MLflow run as ``calibration/...`` metrics.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from biaslab import tracking
from biaslab.atomic import atomic_write_text, remove_outputs
from biaslab.config import ConfigError, Params, VariantConfig
from biaslab.outputs import paths, run_file

CONTROL = "control"
PLANTED_FILE = "planted_bias.json"  # the answer key next to the model (= biaslab.pretrain.phases.PLANTED_FILE)
REPORT = paths.CALIBRATION_REPORT
TABLE = paths.CALIBRATION_TABLE
RUN_FILE = paths.run_file("calibrate")


def no_planted_bias(params: Params) -> str | None:
    """Why there is nothing to calibrate on (a hub model, or the planted bias disabled), or None."""
    if params.model.source:
        return f"model.source is {params.model.source!r}: a snapshotted model has no planted bias to calibrate on"
    if not params.model.pretrain.planted_bias.enabled:
        return "model.pretrain.planted_bias.enabled is false: the default model has no planted bias"
    return None


def write_skipped(root: Path, reason: str) -> None:
    """Every output of the stage, saying why calibration did not run (so ``dvc repro`` completes)."""
    from biaslab.evaluation import EvaluationOutputs

    outputs = EvaluationOutputs.for_variant(CONTROL, root)
    for folder in (outputs.predictions, outputs.tables):
        folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(outputs.metrics, json.dumps({"variant": CONTROL, "skipped": reason, "metrics": {}}, indent=2))
    atomic_write_text(outputs.values, "{}\n")
    atomic_write_text(outputs.run_file, json.dumps({"skipped": reason}) + "\n")
    atomic_write_text(root / REPORT, f"# Calibration\n\nNot run: {reason}.\n")
    atomic_write_text(root / TABLE, "family,metric,verdict\n")
    atomic_write_text(root / RUN_FILE, json.dumps({"skipped": reason}) + "\n")


def with_control(params: Params) -> Params:
    """``params`` with the control model as an extra ``method: none`` variant named ``control``."""
    if CONTROL in params.variants:
        raise ConfigError(f"params.yaml variants: {CONTROL!r} is reserved for the calibrate stage's control model")
    control = VariantConfig(method="none", model_dir=params.calibrate.control_dir,
                            description="counterbalanced control of the planted bias (calibrate stage)")
    return params.model_copy(update={"variants": {**params.variants, CONTROL: control}})


def planted_info(params: Params, root: Path) -> dict[str, object]:
    """The planted bias as trained (the answer key's headline numbers), for the report's header."""
    pb = params.model.pretrain.planted_bias
    info: dict[str, object] = {"dose": pb.dose, "strength": pb.strength, "from_step": pb.from_step,
                               "max_steps": params.model.pretrain.max_steps,
                               "language_shares": json.dumps(pb.language_shares, sort_keys=True)}
    key = root / params.model.output_dir / PLANTED_FILE
    if key.is_file():
        info["planted_token_share"] = json.loads(key.read_text(encoding="utf-8")).get("planted_token_share")
    return info


def run_calibrate(params: Params, root: str | os.PathLike[str] = ".") -> dict[str, float]:
    """Evaluate the control, compare planted vs control and every mitigation; write the report."""
    from biaslab.calibration import calibrate
    from biaslab.evaluation import EvaluationOutputs, evaluate_variant
    from biaslab.outputs import metrics_file

    root = Path(root)
    remove_outputs(root / REPORT, root / TABLE, root / RUN_FILE)
    reason = no_planted_bias(params)
    if reason:
        write_skipped(root, reason)
        return {}
    control = evaluate_variant(with_control(params), CONTROL, root)
    base = metrics_file.read(EvaluationOutputs.for_variant("base", root).metrics).metrics
    variants = {name: metrics_file.read(EvaluationOutputs.for_variant(name, root).metrics).metrics
                for name, v in params.variants.items() if name != "base" and v.method != "none"}
    cfg = params.calibrate
    report = calibrate(cfg.families, cfg.mitigation_metrics, cfg.quality_metrics, base, control, variants,
                       planted_info(params, root))
    import pandas as pd

    atomic_write_text(root / REPORT, report.markdown)
    atomic_write_text(root / TABLE, pd.DataFrame(report.table()).to_csv(index=False))
    numbers = report.mlflow_metrics()
    tracking.configure(params.tracking, root=root)
    with tracking.stage_run("calibrate", variant=CONTROL) as run:
        for name, value in numbers.items():
            tracking.log_metric(name, value)
        tracking.log_text(report.markdown, "calibration.md")
        run_file.write(root / RUN_FILE, run_id=run.info.run_id, **{
            "families_detected": numbers.get("calibration/families_detected"),
            "families": numbers.get("calibration/families")})
    return numbers
