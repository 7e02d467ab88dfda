"""DVC stage ``calibrate``: does every benchmark see the planted bias, and does every mitigation remove it?

    python -m pipelines.calibrate --params params.yaml

The control model (stage ``control_model``) is the default model's training with the planted sentences'
genders counterbalanced. This stage evaluates the control with every enabled benchmark (as a ``method:
none`` variant named ``control``, :mod:`biaslab.pretrain.control_variant`; outputs under ``metrics/control.json``
etc., in its own ``evaluate@control`` run), compares it with the base and every mitigation variant
(:mod:`biaslab.calibration.families`; every headline metric, and every mitigation's change, also paired item by
item from the models' ``data/predictions`` tables, where its benchmark can recompute it from them) and
writes ``reports/calibration.md`` and ``reports/calibration.csv``; the numbers go to the stage's MLflow
run as ``calibration/...`` metrics, with the report and a figure per family (``calibration/families.png``).
Without a planted bias every output says why and the stage succeeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from biaslab.atomic import atomic_write_text, remove_outputs
from biaslab.config import Params, load_params
from biaslab.pretrain.control_variant import CONTROL, no_planted_bias, with_control
from biaslab.outputs import paths, run_file
from pipelines.stage.entry import stage_main

PLANTED_FILE = "planted_bias.json"  # the answer key next to the model (= biaslab.pretrain.phases.PLANTED_FILE)
REPORT = paths.CALIBRATION_REPORT
TABLE = paths.CALIBRATION_TABLE
RUN_FILE = paths.run_file("calibrate")


def main(argv: list[str] | None = None) -> int:
    return stage_main("calibrate", __doc__, run, argv)


def run(args: argparse.Namespace) -> None:
    numbers = run_calibrate(load_params(args.params))
    print(f"calibrate: {numbers.get('calibration/families_detected', 0):.0f} of "
          f"{numbers.get('calibration/families', 0):.0f} benchmark families detect the planted bias -> {REPORT}")


def run_calibrate(params: Params, root: str | os.PathLike[str] = ".") -> dict[str, float]:
    """Evaluate the control, compare planted vs control and every mitigation; write the report; log one run."""
    import pandas as pd

    from biaslab.tracking import runs as tracking
    from biaslab.calibration.families import calibrate, paired_differences
    from biaslab.evaluation.suite import EvaluationOutputs
    from biaslab.outputs import metrics_file
    from biaslab.reporting.plots import calibration_figure
    from biaslab.tracking.run_description import describe
    from pipelines.evaluate import evaluate_variant

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
    statistics = item_statistics(params, [m for metrics in cfg.families.values() for m in metrics]
                                 + list(cfg.mitigation_metrics))
    tables = sorted({f"{bench}__{stat.table}" for bench, stat in statistics.values()})

    def predictions(variant: str) -> dict:
        return prediction_tables(EvaluationOutputs.for_variant(variant, root).predictions, tables)

    ev = params.evaluation
    pairing = {"samples": ev.bootstrap_samples, "seed": ev.seed, "confidence": ev.confidence}
    base_tables = predictions("base")
    paired = paired_differences(statistics, base_tables, predictions(CONTROL), **pairing)
    mitigation = {m: statistics[m] for m in cfg.mitigation_metrics if m in statistics}
    changes = {name: paired_differences(mitigation, predictions(name), base_tables, label=f"{name} vs base", **pairing)
               for name in variants}
    report = calibrate(cfg.families, cfg.mitigation_metrics, cfg.quality_metrics, base, control, variants,
                       planted_info(params, root), paired, changes)
    atomic_write_text(root / REPORT, report.markdown)
    atomic_write_text(root / TABLE, pd.DataFrame(report.table()).to_csv(index=False))
    numbers = report.mlflow_metrics()
    tracking.configure(params.tracking, root=root)
    with tracking.stage_run("calibrate", variant=CONTROL) as mlflow_run:
        for name, value in numbers.items():
            tracking.log_metric(name, value)
        tracking.log_text(report.markdown, "calibration.md")
        describe(report.markdown, whole="calibration.md")
        tracking.log_figure(calibration_figure([row for row in report.table() if row["primary"]]),
                            "calibration/families.png")
        run_file.write(root / RUN_FILE, run_id=mlflow_run.info.run_id, **{
            "families_detected": numbers.get("calibration/families_detected"),
            "families": numbers.get("calibration/families")})
    return numbers


def item_statistics(params: Params, metrics: list[str]) -> dict[str, tuple[str, object]]:
    """``{metric: (benchmark, ItemStatistic)}`` for the ``metrics`` whose benchmark can recompute them per item.

    A metric is ``<benchmark>/...``; its benchmark offers ``item_statistics(options)`` (optional part of the
    benchmark contract, :mod:`biaslab.benchmarks.base`) or has no paired reading.
    """
    from biaslab.benchmarks.registry import load_benchmark

    out: dict[str, tuple[str, object]] = {}
    offered: dict[str, dict] = {}
    for metric in metrics:
        name = metric.split("/", 1)[0]
        entry = params.evaluation.benchmarks.get(name)
        if entry is None or not entry.enabled:
            continue
        if name not in offered:
            benchmark = load_benchmark(name, entry.module)
            method = getattr(benchmark, "item_statistics", None)
            offered[name] = method(dict(entry.options)) if method else {}
        if metric in offered[name]:
            out[metric] = (name, offered[name][metric])
    return out


def prediction_tables(folder: Path, names: list[str]) -> dict[str, object]:
    """The prediction tables ``names`` (``<benchmark>__<table>``) of one variant that exist in ``folder``."""
    import pandas as pd

    return {name: pd.read_parquet(folder / f"{name}.parquet") for name in names if (folder / f"{name}.parquet").is_file()}


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


def write_skipped(root: Path, reason: str) -> None:
    """Every output of the stage, saying why calibration did not run (so ``dvc repro`` completes)."""
    from biaslab.evaluation.suite import EvaluationOutputs

    outputs = EvaluationOutputs.for_variant(CONTROL, root)
    for folder in (outputs.predictions, outputs.tables):
        folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(outputs.metrics, json.dumps({"variant": CONTROL, "skipped": reason, "metrics": {}}, indent=2))
    atomic_write_text(outputs.values, "{}\n")
    atomic_write_text(outputs.run_file, json.dumps({"skipped": reason}) + "\n")
    atomic_write_text(root / REPORT, f"# Calibration\n\nNot run: {reason}.\n")
    atomic_write_text(root / TABLE, "family,metric,verdict\n")
    atomic_write_text(root / RUN_FILE, json.dumps({"skipped": reason}) + "\n")


if __name__ == "__main__":
    sys.exit(main())
