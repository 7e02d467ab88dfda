"""The comparison table: headline metrics come from the benchmarks, Δ vs base is marked better/worse by
each metric's direction, and "beyond the CIs" agrees with the promotion gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biaslab.reporting import comparison
from biaslab.config import load_params
from biaslab.reporting.headlines import headline_metrics
from biaslab.metrics.values import MetricValue

ROOT = Path(__file__).resolve().parents[2]


def mv(value, lo=None, hi=None, direction="higher", ideal=None):
    return MetricValue(value, direction, ideal, lo, hi)


HEADLINES = {"b": ("b/acc", "b/gap", "b/share", "b/noci")}
METRICS = {
    "base": {"b/acc": mv(0.60, 0.55, 0.65), "b/gap": mv(0.20, 0.15, 0.25, "lower", 0.0),
             "b/share": mv(0.70, 0.66, 0.74, "target", 0.5), "b/noci": mv(1.0, direction="lower")},
    "good": {"b/acc": mv(0.75, 0.70, 0.80), "b/gap": mv(0.18, 0.13, 0.23, "lower", 0.0),
             "b/share": mv(0.30, 0.26, 0.34, "target", 0.5), "b/noci": mv(1.0, direction="lower")},
    "bad": {"b/acc": mv(0.58, 0.53, 0.63), "b/gap": mv(0.40, 0.35, 0.45, "lower", 0.0),
            "b/share": mv(0.90, 0.87, 0.93, "target", 0.5)},
}


def cells(table, metric):
    return next(r for r in table.rows if r.metric == metric).cells


def test_deltas_and_marks_follow_each_metrics_direction():
    table = comparison.compare(METRICS, HEADLINES, base="base")
    assert table.variants == ["base", "good", "bad"]
    acc, gap, share, noci = (cells(table, m) for m in HEADLINES["b"])
    assert acc["base"].delta is None and acc["base"].mark == ""
    assert acc["good"].delta == pytest.approx(0.15) and acc["good"].mark == "▲"  # higher, CIs disjoint
    assert acc["bad"].delta == pytest.approx(-0.02) and acc["bad"].mark == "▽"  # lower, CIs overlap
    assert gap["good"].mark == "△" and gap["bad"].mark == "▼"  # lower is better
    # target 0.5: 0.30 is as far from the ideal as 0.70 -> no difference; 0.90 is further, beyond the CIs
    assert share["good"].verdict == "same" and share["good"].mark == "="
    assert share["bad"].mark == "▼"
    assert noci["good"].mark == "=" and noci["bad"] is None  # a variant without the metric: empty cell


def test_beyond_ci_is_the_gate_rule_both_ways():
    from biaslab.config import GateCondition
    from biaslab.registry import check_condition

    rule = GateCondition(metric="b/acc", rule="better_than_base_beyond_ci")
    for variant in ("good", "bad"):
        for metric in HEADLINES["b"][:3]:
            v, b = METRICS[variant][metric], METRICS["base"][metric]
            which, beyond = comparison.verdict(v, b)
            gate_better, gate_worse = check_condition(rule, v, b).passed, check_condition(rule, b, v).passed
            assert beyond == (gate_better or gate_worse)
            assert not beyond or (which == "better") == gate_better


def test_renderings_carry_the_same_numbers():
    table = comparison.compare(METRICS, HEADLINES, base="base")
    md = comparison.to_markdown(table)
    assert md.splitlines()[0] == "| benchmark | metric | base (base) | good | bad |"
    assert "| b | acc ↑ | 0.600 [0.550, 0.650] | 0.750 [0.700, 0.800] ▲ +0.150 | 0.580 [0.530, 0.630] ▽ −0.020 |" in md
    assert "share ◎ (ideal 0.5)" in md and comparison.LEGEND in md
    page = comparison.to_html(table)
    assert page.startswith("<!doctype html>") and "▲ +0.150" in page and 'class="worse"' in page
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(comparison.to_rich(table))
    text = console.export_text()
    assert "▲ +0.150" in text and "0.600 [0.550, 0.650]" in text


def test_missing_base_and_never_computed_metrics():
    with pytest.raises(ValueError, match="no metrics for the base variant 'base'"):
        comparison.compare({"good": METRICS["good"]}, HEADLINES)
    table = comparison.compare(METRICS, {"b": ("b/acc", "b/absent")})
    assert table.missing == ["b/absent"] and [r.metric for r in table.rows] == ["b/acc"]


def test_every_benchmark_names_headline_metrics_it_reports():
    """Each enabled benchmark's headline metrics are in the committed metrics of a real run, and the
    prepared files it declares are files the prepare stage writes."""
    from biaslab.data import prepare

    params = load_params(ROOT / "params.yaml")
    headlines = headline_metrics(params.evaluation.benchmarks)
    assert set(headlines) == set(params.evaluation.benchmarks)
    committed = json.loads((ROOT / "metrics" / "values" / "base.json").read_text())
    for benchmark, names in headlines.items():
        assert names and all(n.startswith(benchmark + "/") for n in names)
        if not any(k.startswith(benchmark + "/") for k in committed):
            continue  # a benchmark added after the committed run (its metrics come with the next one)
        assert set(names) <= set(committed), sorted(set(names) - set(committed))
    import importlib

    from biaslab.data.splits import SPLITS

    source = Path(prepare.__file__).read_text()
    for entry in params.evaluation.benchmarks.values():
        for name in importlib.import_module(entry.module).BENCHMARK.prepared_files:
            folder, _, file = name.rpartition("/")  # a split's copy: data/prepared/<split>/<file>
            assert f'"{file}"' in source and (not folder or folder in SPLITS), name


def test_benchmark_without_headline_is_named():
    with pytest.raises(ValueError, match="biaslab.benchmarks.base: BENCHMARK has no `headline`"):
        headline_metrics({"x": {"module": "biaslab.benchmarks.base"}})


def test_one_variant_s_headline_table_has_a_row_per_headline_metric_with_its_ci():
    """The evaluate run's description: value [CI] per headline metric, direction arrows, missing ones named."""
    from biaslab.reporting.headlines import variant_markdown

    metrics = {"b/acc": MetricValue(0.71234, "higher", 1.0, 0.65, 0.77),
               "b/gap": MetricValue(-0.0004, "target", 0.0, float("nan"), float("nan"))}
    text = variant_markdown("lora", metrics, {"b": ("b/acc", "b/gap", "b/absent")})
    assert text.startswith("Headline metrics of **lora**, with 95 % bootstrap CIs.")
    rows = [line for line in text.splitlines() if line.startswith("| b |")]
    assert rows == ["| b | acc ↑ | 0.712 [0.650, 0.770] |", "| b | gap ◎ (ideal 0) | -4.00e-04 |"]
    assert text.rstrip().endswith("Not computed: b/absent")
