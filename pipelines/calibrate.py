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
Without a planted bias every output says why and the stage succeeds. A variant the active profile disables
(docs/profiles.md) is left out of the comparison, with one line saying so.

The gate's controls (docs/gate.md "Controls"): the project's gate is evaluated on every ``method: control``
variant (``positive_control``, ``negative_control``); the report opens with their verdicts, and after every
output is written the stage fails (:class:`biaslab.calibration.controls.GateControlError`, naming the rule that
decided) when the gate refuses the positive control or does not refuse the negative one; whether a harm rule
(not only the bias rule) refused the negative one is its own column, metric and error-rate row.

First, on any model, the spike-in self-test (:mod:`biaslab.calibration.spike_in`, docs/spike_in.md): each
family's primary metric on the base's stored predictions with δ nats added to every stereotype-consistent
option, for every δ of ``calibrate.spike_deltas`` (``reports/spike_in.csv``, a section of the report,
``calibration/spike...`` metrics and ``calibration/spike_in.png``). A family whose metric does not move
monotonically in the stereotyped direction, or whose δ = 0 metric is not the evaluated one, fails the stage.
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
from pipelines.stage.profile import disabled_names

PLANTED_FILE = "planted_bias.json"  # the answer key next to the model (= biaslab.pretrain.phases.PLANTED_FILE)
REPORT = paths.CALIBRATION_REPORT
TABLE = paths.CALIBRATION_TABLE
SPIKE_TABLE = paths.SPIKE_IN_TABLE
SPIKED = "base"  # the model whose stored predictions the spike-in self-test reads
RUN_FILE = paths.run_file("calibrate")


def main(argv: list[str] | None = None) -> int:
    return stage_main("calibrate", __doc__, run, argv)


def run(args: argparse.Namespace) -> None:
    numbers = run_calibrate(load_params(args.params))
    prefix = "calibration/spike_resolution/"
    resolutions = ", ".join(f"{k[len(prefix):]} {v:g}" for k, v in numbers.items() if k.startswith(prefix))
    print(f"calibrate: spike-in self-test passed; resolution δ* in nats (-1 = beyond the grid): "
          f"{resolutions or 'no family spiked'} -> {SPIKE_TABLE}")
    print(f"calibrate: {numbers.get('calibration/families_detected', 0):.0f} of "
          f"{numbers.get('calibration/families', 0):.0f} benchmark families detect the planted bias -> {REPORT}")


def run_calibrate(params: Params, root: str | os.PathLike[str] = ".") -> dict[str, float]:
    """Spike-in self-test; evaluate the control, compare planted vs control and every mitigation; write; log one run."""
    import pandas as pd

    from biaslab.tracking import runs as tracking
    from biaslab.calibration import spike_in
    from biaslab.calibration.families import calibrate, paired_differences
    from biaslab.evaluation.suite import EvaluationOutputs
    from biaslab.outputs import metrics_file
    from biaslab.reporting.plots import calibration_figure, spike_in_figure
    from biaslab.tracking.run_description import describe
    from pipelines.evaluate import evaluate_variant

    root = Path(root)
    remove_outputs(root / REPORT, root / TABLE, root / SPIKE_TABLE, root / RUN_FILE)
    spikes = spike_in_results(params, root)
    spike_in.check(spikes)  # a broken instrument fails before anything is written
    from biaslab.calibration import controls

    checks = gate_control_checks(params, root)
    reason = no_planted_bias(params)
    if reason:
        write_skipped(root, reason, spike_in.render_markdown(spikes, SPIKED) + "\n" + controls.render_markdown(checks))
        atomic_write_text(root / SPIKE_TABLE, pd.DataFrame(spike_in.table(spikes)).to_csv(index=False))
        controls.require(checks)
        return {**spike_in.mlflow_metrics(spikes), **controls.mlflow_metrics(checks)}
    control = evaluate_variant(with_control(params), CONTROL, root)
    base = metrics_file.read(EvaluationOutputs.for_variant("base", root).metrics).metrics
    disabled = disabled_names(params)  # the profile's disabled variants: no model, no predictions to compare
    for name, why in disabled.items():
        print(f"calibrate: {name} left out: {why}")
    variants = {name: metrics_file.read(EvaluationOutputs.for_variant(name, root).metrics).metrics
                for name, v in params.variants.items() if name != "base" and v.method != "none" and name not in disabled}
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
    across = draws_section(params, root)
    report = calibrate(cfg.families, cfg.mitigation_metrics, cfg.quality_metrics, base, control, variants,
                       planted_info(params, root), paired, changes, across.markdown)
    effects = {d.metric: d.effect for d in report.detections if d.primary}
    spike_rows = spike_in.table(spikes, effects)
    rates = gate_error_rates(params, root, base, checks)
    markdown = (controls.render_markdown(checks) + "\n" + rates[0] + "\n" + report.markdown + "\n"
                + spike_in.render_markdown(spikes, SPIKED, effects, aa_spread=across.aa_spread or None))
    atomic_write_text(root / REPORT, markdown)
    atomic_write_text(root / TABLE, pd.DataFrame(report.table()).to_csv(index=False))
    atomic_write_text(root / SPIKE_TABLE, pd.DataFrame(spike_rows).to_csv(index=False))
    numbers = {**report.mlflow_metrics(), **spike_in.mlflow_metrics(spikes), **across.metrics,
               **controls.mlflow_metrics(checks), **rates[1]}
    tracking.configure(params.tracking, root=root)
    with tracking.stage_run("calibrate", variant=CONTROL) as mlflow_run:
        for name, value in numbers.items():
            tracking.log_metric(name, value)
        tracking.log_text(markdown, "calibration.md")
        describe(markdown, whole="calibration.md")
        tracking.log_figure(calibration_figure([row for row in report.table() if row["primary"]]),
                            "calibration/families.png")
        if any(row["delta"] is not None for row in spike_rows):
            tracking.log_figure(spike_in_figure(spike_rows), "calibration/spike_in.png")
        run_file.write(root / RUN_FILE, run_id=mlflow_run.info.run_id, **{
            "families_detected": numbers.get("calibration/families_detected"),
            "families": numbers.get("calibration/families"),
            "families_detected_across_draws": numbers.get("calibration/draws/families_detected"),
            "gate_controls": {c.variant: {"role": c.role, "approved": c.approved, "ok": c.ok,
                                          "harm_caught": c.harm_caught} for c in checks}})
    controls.require(checks)  # after the report is written: a wrong control verdict fails the run, naming the rule
    return numbers


def gate_error_rates(params: Params, root: Path, base: dict,
                     checks: list | None = None) -> tuple[str, dict[str, float]]:
    """The report's section on the gate's error rates and its metrics (:mod:`biaslab.registry.error_rates`):
    spill-over refusals of the stored A/A pairs (``calibrate.draws``), and approvals of spike-ins of bias into
    the base's stored predictions (``calibrate.spike_deltas``)."""
    from biaslab.calibration import draws
    from biaslab.registry import error_rates

    ideals = {m: v.ideal for m, v in base.items() if v.direction == "target" and v.ideal is not None}
    families = error_rates.spill_over_families(params, ideals)
    margins = {f: m.tolerance for f, m in params.registry.spill_over_margins.items()}
    aa = None
    if params.calibrate.draws and (root / params.calibrate.draws).is_file():
        aa = error_rates.aa_false_refusals(draws.read_draws(root / params.calibrate.draws), margins, families)
    spikes = error_rates.spike_in_approvals(params, root, params.calibrate.spike_deltas)
    cfg = params.calibrate
    sized_on = None if cfg.margins_draws is None else Path(cfg.draws or "") == Path(cfg.margins_draws)
    return (error_rates.render_markdown(aa, spikes, checks or [], source=cfg.draws, sized_on=sized_on),
            error_rates.mlflow_metrics(aa, spikes))


def gate_control_checks(params: Params, root: Path) -> list:
    """The project's gate (:func:`biaslab.registry.gate.evaluate_gate_for` on the workspace's evaluate outputs)
    on every built ``method: control`` variant, checked against its role (:mod:`biaslab.calibration.controls`)."""
    from biaslab.calibration import controls
    from biaslab.outputs.variant_dir import variant_skip_reason
    from biaslab.registry.evidence import LocalEvidence
    from biaslab.registry.gate import evaluate_gate_for

    def built(name: str, v) -> bool:  # its stage wrote the directory, or it was evaluated (outputs of both stages)
        return (root / v.model_dir).is_dir() or (root / paths.metrics_file(name)).is_file()

    roles = {name: v.control.role for name, v in params.variants.items()
             if v.method == "control" and v.control is not None and built(name, v)
             and variant_skip_reason(v, root) is None}
    evidence = LocalEvidence(root)
    return controls.check({name: (role, evaluate_gate_for(params, evidence, name)) for name, role in roles.items()})


def draws_section(params: Params, root: Path):
    """The across-draw section, its metrics and the A/A spread from ``calibrate.draws``
    (:func:`biaslab.calibration.draws.draws_report`: a file drawn with another recipe, or recording none, is
    labelled stale and counts nothing); empty when unset."""
    from biaslab.calibration import draws

    cfg = params.calibrate
    if not cfg.draws:
        return draws.DrawsReport("", {}, {})
    return draws.draws_report(root / cfg.draws, params.model_dump(mode="json"), cfg.draws_recipe, cfg.draws_alpha,
                              source=cfg.draws)


def item_statistics(params: Params, metrics: list[str]) -> dict[str, tuple[str, object]]:
    """``{metric: (benchmark, ItemStatistic)}`` for the ``metrics`` whose enabled benchmark can recompute them per
    item (:func:`biaslab.benchmarks.registry.item_statistics_of` on ``evaluation.benchmarks``)."""
    from biaslab.benchmarks.registry import item_statistics_of

    return item_statistics_of(params.evaluation.benchmarks, metrics)


def spike_in_results(params: Params, root: Path, variant: str = SPIKED) -> list:
    """The spike-in dose-response of every family's primary metric on ``variant``'s stored predictions.

    A family whose benchmark is disabled, offers no ``spike`` or item statistic, or has no stored tables
    gets a result saying so (no points); it is reported, not failed.
    """
    from functools import partial

    import pandas as pd

    from biaslab.benchmarks.registry import load_benchmark
    from biaslab.calibration.spike_in import SpikeIn, dose_response
    from biaslab.evaluation.suite import EvaluationOutputs
    from biaslab.outputs import metrics_file

    cfg, ev = params.calibrate, params.evaluation
    outputs = EvaluationOutputs.for_variant(variant, root)
    stored = metrics_file.read(outputs.metrics).metrics if outputs.metrics.is_file() else {}
    results = []
    for family, metrics in cfg.families.items():
        metric, expected = next(iter(metrics.items()))
        name = metric.split("/", 1)[0]
        entry = ev.benchmarks.get(name)
        statistic = item_statistics(params, [metric]).get(metric)
        benchmark = load_benchmark(name, entry.module) if entry is not None and entry.enabled else None
        if benchmark is None or statistic is None or not hasattr(benchmark, "spike"):
            why = ("benchmark not enabled" if benchmark is None else
                   "no spike or item statistic for this metric")
            results.append(SpikeIn(family, metric, expected, stored=stored.get(metric), note=why))
            continue
        prefix = f"{name}__"
        tables = {path.stem[len(prefix):]: pd.read_parquet(path)
                  for path in sorted(outputs.predictions.glob(f"{prefix}*.parquet"))}
        spike = partial(_spike, benchmark, options=dict(entry.options))
        results.append(dose_response(family, metric, expected, statistic[1], tables, spike, cfg.spike_deltas,
                                     stored=stored.get(metric), samples=ev.bootstrap_samples, seed=ev.seed,
                                     confidence=ev.confidence))
    return results


def _spike(benchmark, tables, delta: float, *, options: dict):
    return benchmark.spike(tables, delta, options)


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


def write_skipped(root: Path, reason: str, spike_section: str = "") -> None:
    """Every output of the stage, saying why calibration did not run (so ``dvc repro`` completes)."""
    from biaslab.evaluation.suite import EvaluationOutputs

    outputs = EvaluationOutputs.for_variant(CONTROL, root)
    for folder in (outputs.predictions, outputs.tables):
        folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(outputs.metrics, json.dumps({"variant": CONTROL, "skipped": reason, "metrics": {}}, indent=2))
    atomic_write_text(outputs.values, "{}\n")
    atomic_write_text(outputs.run_file, json.dumps({"skipped": reason}) + "\n")
    atomic_write_text(root / REPORT, f"# Calibration\n\nNot run: {reason}.\n" + (f"\n{spike_section}" if spike_section else ""))
    atomic_write_text(root / TABLE, "family,metric,verdict\n")
    atomic_write_text(root / RUN_FILE, json.dumps({"skipped": reason}) + "\n")


if __name__ == "__main__":
    sys.exit(main())
