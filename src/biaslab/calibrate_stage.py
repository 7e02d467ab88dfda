"""The ``control_model`` and ``calibrate`` stages: the known-answer check of the planted bias.

``control_model`` continues the base model's shared checkpoint (``planted_bias.checkpoint_dir``) with the
planted sentences' genders counterbalanced (``direction: balanced``) into ``calibrate.control_dir``: the
same corpus rows, the same frames, the same steps as the default model, only the gender of the planted
sentences differs. ``calibrate`` evaluates the control with every enabled benchmark (as a ``method: none``
variant named ``control``, outputs under ``metrics/control.json`` etc.), compares it with the base and every
mitigation variant (:mod:`biaslab.calibration`) and writes ``reports/calibration.md`` and
``reports/calibration.csv``; the numbers go to the stage's MLflow run as ``calibration/...`` metrics.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from biaslab import tracking
from biaslab.atomic import atomic_write_text, remove_outputs
from biaslab.config import ConfigError, Params, VariantConfig

CONTROL = "control"
CONTROL_RUN = Path("runs/control_model.json")
REPORT = Path("reports/calibration.md")
TABLE = Path("reports/calibration.csv")
RUN_FILE = Path("runs/calibrate.json")


def _require_planted(params: Params) -> None:
    pb = params.model.pretrain.planted_bias
    if params.model.source or not pb.enabled:
        raise ConfigError("calibrate: needs the offline default model with model.pretrain.planted_bias.enabled "
                          "(a hub model has no planted bias to calibrate on)")


def run_control_model(params: Params, root: str | os.PathLike[str] = ".", *, progress: bool = True) -> dict[str, Any]:
    """Train the counterbalanced control from the shared checkpoint; returns its training summary."""
    import torch

    from biaslab.models import fingerprint_dir
    from biaslab.pretrain.phases import continue_training, save_continued
    from biaslab.pretrain.stage import default_threads, log_training

    _require_planted(params)
    root = Path(root)
    out_dir = root / params.calibrate.control_dir
    remove_outputs(root / CONTROL_RUN)
    torch.set_num_threads(default_threads(params.scoring.num_threads))
    tracking.configure(params.tracking, root=root)
    with tracking.stage_run("control_model", variant=CONTROL) as run:
        result = continue_training(params, root / params.model.pretrain.planted_bias.checkpoint_dir, "balanced",
                                   progress=progress, desc="control_model")
        if params.model.dtype != "auto":
            result.model.to(getattr(torch, params.model.dtype))
        save_continued(result, out_dir)
        log_training(result)
        tracking.log_dict(result.summary, "control_model_summary.json")
        tracking.write_run_json(root / CONTROL_RUN, run_id=run.info.run_id, model_dir=params.calibrate.control_dir,
                                fingerprint=fingerprint_dir(out_dir))
    return result.summary


def with_control(params: Params) -> Params:
    """``params`` with the control model as an extra ``method: none`` variant named ``control``."""
    if CONTROL in params.variants:
        raise ConfigError(f"params.yaml variants: {CONTROL!r} is reserved for the calibrate stage's control model")
    control = VariantConfig(method="none", model_dir=params.calibrate.control_dir,
                            description="counterbalanced control of the planted bias (calibrate stage)")
    return params.model_copy(update={"variants": {**params.variants, CONTROL: control}})


def planted_info(params: Params, root: Path) -> dict[str, object]:
    """The planted bias as trained (the answer key's headline numbers), for the report's header."""
    from biaslab.pretrain.phases import PLANTED_FILE

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
    from biaslab.registry import read_metrics

    _require_planted(params)
    root = Path(root)
    remove_outputs(root / REPORT, root / TABLE, root / RUN_FILE)
    control = evaluate_variant(with_control(params), CONTROL, root)
    base = read_metrics(EvaluationOutputs.for_variant("base", root).metrics).metrics
    variants = {name: read_metrics(EvaluationOutputs.for_variant(name, root).metrics).metrics
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
        tracking.write_run_json(root / RUN_FILE, run_id=run.info.run_id, **{
            "families_detected": numbers.get("calibration/families_detected"),
            "families": numbers.get("calibration/families")})
    return numbers
