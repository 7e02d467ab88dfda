"""A benchmark's item statistics must be its metrics: the same value and, resampled alike, the same CI.

:mod:`biaslab.metrics.paired` compares two models through ``BENCHMARK.item_statistics(options)``; each
benchmark test hands this check one evaluated result, and every item statistic whose metric and table the
result has must give that metric's value on the prediction table and - bootstrapped over its declared
unit with the evaluation's seed and sample count - that metric's CI. A wrong row filter, column or unit
shows up here. Comparing a model with itself must give a paired difference of exactly 0.
"""

from __future__ import annotations

import math

import pytest

from biaslab.benchmarks.base import BenchmarkResult, EvalContext
from biaslab.metrics.bootstrap import bootstrap_ci
from biaslab.metrics.paired import paired_difference


def assert_item_statistics_are_the_metrics(benchmark, result: BenchmarkResult, ctx: EvalContext, options=None,
                                          expected: tuple[str, ...] = ()) -> list[str]:
    """Check every item statistic the result can recompute; ``expected`` names metrics that must be among them."""
    statistics = benchmark.item_statistics(dict(options or {}))
    checked = []
    for name, statistic in statistics.items():
        if name not in result.metrics or statistic.table not in result.predictions:
            continue
        table, metric = result.predictions[statistic.table], result.metrics[name]
        value = statistic.value(table)
        assert value == pytest.approx(metric.value, abs=1e-12, nan_ok=True), name
        if metric.ci_low is not None and ctx.bootstrap_samples:
            rows = statistic.rows(table)
            unit = list(statistic.unit) if statistic.unit else None
            ci = bootstrap_ci(rows, statistic.statistic, samples=ctx.bootstrap_samples, seed=ctx.seed,
                              confidence=ctx.confidence, unit=unit)
            assert ci == pytest.approx((metric.ci_low, metric.ci_high), abs=1e-12), f"{name}: CI"
        if math.isfinite(value):
            itself = paired_difference(table, table, statistic, samples=20, seed=0)
            assert itself.value == 0 and (itself.ci_low, itself.ci_high) == (0, 0), name
        checked.append(name)
    missing = set(expected) - set(checked)
    assert not missing, f"no item statistic checked for {sorted(missing)}"
    return checked
