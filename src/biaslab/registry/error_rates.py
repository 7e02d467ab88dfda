"""The gate's error rates, measured: false refusals of harmless A/A pairs, false approvals of known harm.

Shared by the calibrate stage (a section of ``reports/calibration.md``) and ``bench/gate_error_rates.py``
(docs/gate.md "Error rates"):

* :func:`aa_false_refusals` - the stored A/A pairs (``calibrate.draws``: a control and a control re-seeded
  after the shared phase, harmless to each other) judged by the spill-over rule, the re-seeded control as the
  variant: against the committed margins (in-sample for a margin sized on these pairs, out of sample for one
  sized on selection items) and **leave one out** (each pair against the margin the other pairs size:
  :mod:`biaslab.calibration.margins`), and, for comparison, the old sizing rule (the largest |A/A point
  difference|). The draws hold only each family's primary metric, so only the spill-over rule's A/A refusals
  can be counted from them.
* :func:`spike_in_approvals` - each spill-over family's stored base predictions with δ nats on every
  stereotype-consistent option (the benchmark's ``spike``, docs/spike_in.md) judged by the project's
  spill-over rule against the unspiked base: a spike whose point Δ badness exceeds the margin is harm beyond
  the margin by construction; its approval is a false approval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from biaslab.config import Params

def aa_false_refusals(draws: Sequence[Mapping[str, Any]], margins: Mapping[str, float],
                      families: Mapping[str, tuple[str, float]], level: float = 0.95) -> dict:
    """Every A/A pair x spill-over family (``{family: (primary metric, its ideal)}``): CI high of Δ badness vs
    the committed and the leave-one-out margin (:mod:`biaslab.calibration.margins`). ``sized``: the margin these
    pairs' test-item highs give; ``sized_on_select``: where pairs were also read on a family's selection items,
    their highs there and the margin they give (what a margin is sized on; docs/gate.md "Spill-over margins")."""
    from biaslab.calibration.margins import aa_highs, leave_one_out, prediction_margin

    rows, sized_margins, sized_on_select = [], {}, {}
    for family, (metric, ideal) in families.items():
        highs = aa_highs(draws, family, ideal)
        loo = leave_one_out([h for _, h, _ in highs], level) if len(highs) > 2 else [(None, None)] * len(highs)
        points = [d["families"][family]["effect"] for d in draws
                  if d["recipe"].endswith("/A-A") and family in d.get("families", {})]
        for k, ((pair, high, exact), (loo_margin, loo_refused)) in enumerate(zip(highs, loo)):
            margin = margins.get(family, 0.0)
            others = [abs(x) for j, x in enumerate(points) if j != k]
            largest = math.ceil(max(others) * 1000) / 1000 if others else None  # the old rule: largest |A/A point Δ|
            rows.append({"pair": pair, "family": family, "metric": metric, "badness_ci_high": high,
                         "how": "exact" if exact else "bound", "margin": margin, "refused": high >= margin,
                         "loo_margin": loo_margin, "loo_refused": loo_refused, "loo_largest_margin": largest,
                         "loo_largest_refused": None if largest is None else high >= largest})
        if len(highs) > 1:
            sized = prediction_margin([h for _, h, _ in highs], level)
            sized_margins[family] = sized
        on_select = aa_highs(draws, family, ideal, items="select")
        if len(on_select) > 1:
            sized_on_select[family] = {"highs": on_select,
                                       "margin": prediction_margin([h for _, h, _ in on_select], level)}
    pairs = sorted({r["pair"] for r in rows})
    return {"rows": rows, "pairs": len(pairs), "evaluations": len(rows), "level": level, "sized": sized_margins,
            "sized_on_select": sized_on_select,
            "refused": sum(r["refused"] for r in rows),
            "refused_pairs": len({r["pair"] for r in rows if r["refused"]}),
            "loo_evaluations": sum(r["loo_refused"] is not None for r in rows),
            "loo_refused": sum(bool(r["loo_refused"]) for r in rows),
            "loo_refused_pairs": len({r["pair"] for r in rows if r["loo_refused"]}),
            "loo_largest_evaluations": sum(r["loo_largest_refused"] is not None for r in rows),
            "loo_largest_refused": sum(bool(r["loo_largest_refused"]) for r in rows),
            "loo_largest_refused_pairs": len({r["pair"] for r in rows if r["loo_largest_refused"]})}


class _Evidence:
    """GateEvidence over tables in memory: the base's stored outputs and spiked copies of them."""

    def __init__(self):
        self.frames, self.values = {}, {}

    def add(self, name, tables, metrics):
        self.frames[name], self.values[name] = tables, metrics

    def metrics(self, variant):
        from biaslab.outputs.metrics_file import VariantMetrics

        return VariantMetrics(variant, self.values[variant])

    def predictions(self, variant):
        return self.frames[variant]

    def source(self, variant):
        return {}


def spill_over_families(params: Params, ideals: Mapping[str, float]) -> dict[str, tuple[str, float]]:
    """``{family: (primary metric, ideal)}`` of every family the project's gate adds a spill-over rule for."""
    from biaslab.registry.gate import gate_conditions

    spill = {c.metric for c in gate_conditions(params) if c.rule == "paired_no_spill_over"}
    return {f: (m, ideals[m]) for f, metrics in params.calibrate.families.items()
            for m in list(metrics)[:1] if m in spill and m in ideals}


def spike_in_approvals(params: Params, root: Path, deltas: Sequence[float]) -> dict:
    """Each spill-over family's base predictions spiked by δ, judged by the project's spill-over rule."""
    import dataclasses

    import pandas as pd

    from biaslab.benchmarks.registry import item_statistics_of, load_benchmark
    from biaslab.outputs import metrics_file, paths
    from biaslab.registry.gate import evaluate_gate, gate_conditions

    base_metrics = metrics_file.read(root / paths.metrics_file("base"), "base").metrics
    folder = root / paths.predictions_dir("base")
    spill = [c for c in gate_conditions(params) if c.rule == "paired_no_spill_over"]
    statistics = item_statistics_of(params.evaluation.benchmarks, [c.metric for c in spill])
    boot = params.registry.bootstrap
    rows = []
    for cond in spill:
        name = cond.metric.split("/", 1)[0]
        entry = params.evaluation.benchmarks[name]
        benchmark = load_benchmark(name, entry.module)
        if not hasattr(benchmark, "spike") or cond.metric not in statistics:
            continue
        tables = {p.stem[len(name) + 2:]: pd.read_parquet(p) for p in sorted(folder.glob(f"{name}__*.parquet"))}
        _, statistic = statistics[cond.metric]
        for delta in deltas:
            spiked = benchmark.spike(tables, delta, dict(entry.options))
            evidence = _Evidence()
            full = {f"{name}__{k}": v for k, v in tables.items()}
            evidence.add("base", full, base_metrics)
            value = statistic.value(spiked[statistic.table])
            evidence.add("spiked", {**full, **{f"{name}__{k}": v for k, v in spiked.items()}},
                         {**base_metrics, cond.metric: dataclasses.replace(base_metrics[cond.metric], value=value)})
            row = evaluate_gate([cond], evidence, "spiked", "base", statistics=statistics, seed=boot.seed,
                                samples=boot.samples, confidence=boot.confidence).rows[0]
            harm = row.estimate is not None and row.estimate > cond.tolerance
            rows.append({"metric": cond.metric, "delta": delta, "estimate": row.estimate, "ci": row.ci,
                         "margin": cond.tolerance, "harm_beyond_margin": harm, "approved": row.passed,
                         "false_approval": harm and row.passed, "reason": row.reason})
    harmful = [r for r in rows if r["harm_beyond_margin"]]
    return {"rows": rows, "harmful": len(harmful), "false_approvals": sum(r["false_approval"] for r in rows)}




def render_markdown(aa: Mapping[str, Any] | None, spikes: Mapping[str, Any] | None,
                    controls: Sequence[Any] = (), *, source: str | None = None, sized_on: bool | None = None) -> str:
    """The report's section: each error rate with its count (docs/gate.md "Error rates"). ``source``: the draws
    file the A/A pairs come from; ``sized_on``: whether the committed margins were sized on those pairs
    (``calibrate.margins_draws``; ``None``: not known, the wording names both cases)."""
    lines = ["## The gate's error rates", "", "| error | measured on | count |", "|---|---|---|"]
    if aa:
        families = aa["evaluations"] // max(aa["pairs"], 1)
        pairs = f"A/A pairs of `{source}`" if source else "stored A/A pairs"
        sample = {True: "in-sample for a margin sized on these pairs, out of sample for one sized on selection items",
                  False: "out of sample: these pairs sized no margin",
                  None: "in-sample for a margin they sized, out of sample for one sized on selection items"}[sized_on]
        lines.append(f"| false refusal (spill-over) | {aa['pairs']} {pairs} x {families} "
                     f"families, leave one out (margin sized on the other pairs) | {aa['loo_refused']} of "
                     f"{aa['loo_evaluations']} rule evaluations ({aa['loo_refused_pairs']} of {aa['pairs']} pairs) |")
        refused_in = sorted({r["family"] for r in aa["rows"] if r["refused"]})
        lines.append(f"| false refusal (spill-over), committed margins | the same pairs ({sample}) | {aa['refused']} of "
                     f"{aa['evaluations']} ({aa['refused_pairs']} of {aa['pairs']} pairs"
                     + (f"; {', '.join(refused_in)}" if refused_in else "") + ") |")
        lines.append(f"| false refusal, old rule (largest \\|A/A Δ\\|) | the same pairs, leave one out | "
                     f"{aa['loo_largest_refused']} of {aa['loo_largest_evaluations']} ({aa['loo_largest_refused_pairs']} of "
                     f"{aa['pairs']} pairs) |")
    if spikes:
        lines.append(f"| false approval (spill-over) | spike-ins into the base's stored predictions, point harm beyond "
                     f"the margin | {spikes['false_approvals']} of {spikes['harmful']} |")
    negatives = [c for c in controls if c.role == "negative"]
    if negatives:  # the whole gate may refuse a negative control by its bias rule while every harm rule misses it
        wrong = sum(not c.ok for c in negatives)
        missed = sum(c.harm_caught is False or not c.ok for c in negatives)
        lines.append(f"| false approval (whole gate) | negative controls | {wrong} of {len(negatives)} |")
        lines.append(f"| false approval (harm rules) | negative controls: no harm rule refused it | {missed} of "
                     f"{len(negatives)} |")
    positives = [c for c in controls if c.role == "positive"]
    if positives:
        lines.append(f"| false refusal (whole gate) | positive controls | {sum(not c.ok for c in positives)} of "
                     f"{len(positives)} |")
    return "\n".join(lines) + "\n"


def mlflow_metrics(aa: Mapping[str, Any] | None, spikes: Mapping[str, Any] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    if aa:
        out |= {"calibration/gate_error/aa_loo_refused": float(aa["loo_refused"]),
                "calibration/gate_error/aa_loo_evaluations": float(aa["loo_evaluations"])}
    if spikes:
        out |= {"calibration/gate_error/spike_false_approvals": float(spikes["false_approvals"]),
                "calibration/gate_error/spike_harmful": float(spikes["harmful"])}
    return out
