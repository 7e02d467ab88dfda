"""Each benchmark's headline metrics: which they are, and one variant's as the table its evaluate run shows.

Which metrics are "headline" is the benchmarks' call, not this module's: each benchmark object lists them
(``BENCHMARK.headline``, see :mod:`biaslab.benchmarks.base`), so a new benchmark brings its own.
:mod:`biaslab.reporting.comparison` sets the variants side by side on them; :func:`variant_markdown` is one variant
alone, the description of its ``evaluate`` run in the MLflow UI (that stage does not read the base's
metrics, so it has no Δ to show). Light on purpose: the evaluate stage imports it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

from biaslab.metrics.values import MetricValue

ARROWS = {"higher": "↑", "lower": "↓", "target": "◎"}
DIRECTIONS = "↑ higher is better, ↓ lower is better, ◎ closest to the ideal is better."


def headline_metrics(benchmarks: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """``{benchmark: its headline metric names}`` for the enabled benchmarks (``evaluation.benchmarks``).

    ``benchmarks`` maps a benchmark name to its params entry (anything with a ``module`` attribute);
    the module's ``BENCHMARK.headline`` lists the metrics. A benchmark without one is an error naming it.
    """
    out: dict[str, tuple[str, ...]] = {}
    for name, entry in benchmarks.items():
        module = getattr(entry, "module", None) or entry["module"]
        benchmark = getattr(importlib.import_module(module), "BENCHMARK", None)
        headline = tuple(getattr(benchmark, "headline", ()) or ())
        if not headline:
            raise ValueError(f"{module}: BENCHMARK has no `headline` metrics (see biaslab.benchmarks.base)")
        out[name] = headline
    return out


def number(x: float) -> str:
    return f"{x:.3f}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"


def with_ci(value: float, ci_low: float | None, ci_high: float | None) -> str:
    """``value [low, high]``, or the value alone without a (finite) CI."""
    text = number(value)
    if ci_low is not None and ci_high is not None and math.isfinite(ci_low) and math.isfinite(ci_high):
        text += f" [{number(ci_low)}, {number(ci_high)}]"
    return text


def label(benchmark: str, metric: str, direction: str, ideal: float | None) -> str:
    """The metric without its benchmark prefix, its direction arrow and (for a target) its ideal."""
    name = metric.split("/", 1)[1] if metric.startswith(benchmark + "/") else metric
    target = f" (ideal {ideal:g})" if direction == "target" and ideal is not None else ""
    return f"{name} {ARROWS.get(direction, '?')}{target}"


def variant_markdown(variant: str, metrics: Mapping[str, MetricValue],
                     headlines: Mapping[str, Sequence[str]]) -> str:
    """One variant's headline metrics as a pipe table, ``value [95% CI]`` a row, in the benchmarks' order."""
    lines = [f"Headline metrics of **{variant}**, with 95 % bootstrap CIs. {DIRECTIONS}", "",
             "| benchmark | metric | value [95% CI] |", "|---|---|---:|"]
    missing = []
    for benchmark, names in headlines.items():
        for name in names:
            mv = metrics.get(name)
            if mv is None or not math.isfinite(mv.value):
                missing.append(name)
                continue
            lines.append(f"| {benchmark} | {label(benchmark, name, mv.direction, mv.ideal)} | "
                         f"{with_ci(mv.value, mv.ci_low, mv.ci_high)} |")
    if missing:
        lines += ["", "Not computed: " + ", ".join(missing)]
    return "\n".join(lines) + "\n"
