"""The point-estimate gate rules (registry/point_gate.py), on hand-made metric values (no MLflow, no model)."""

from __future__ import annotations

import math

import pytest

from biaslab.config import GateCondition
from biaslab.metrics.values import MetricValue
from biaslab.registry import VariantMetrics, check_condition
from biaslab.registry import evaluate_gate_on_metrics as evaluate_gate
from biaslab.registry.point_gate import NOT_COMPUTED


def mv(value, lo=None, hi=None, direction="lower", ideal=None):
    return MetricValue(value=value, direction=direction, ideal=ideal, ci_low=lo, ci_high=hi)


def cond(rule, tolerance=0.0, metric="m"):
    return GateCondition(metric=metric, rule=rule, tolerance=tolerance)


@pytest.mark.parametrize(
    "variant, base, passed, why",
    [
        (mv(0.10, 0.08, 0.12), mv(0.20, 0.18, 0.22), True, "better beyond CI"),
        (mv(0.17, 0.15, 0.19), mv(0.20, 0.18, 0.22), False, "CIs overlap"),
        (mv(0.25, 0.23, 0.27), mv(0.20, 0.18, 0.22), False, "not better"),
        (mv(0.10), mv(0.20, 0.18, 0.22), False, "no confidence interval for the variant"),
        (mv(0.80, 0.78, 0.82, "higher"), mv(0.70, 0.68, 0.72, "higher"), True, "better beyond CI"),
        (mv(0.71, 0.69, 0.73, "higher"), mv(0.70, 0.68, 0.72, "higher"), False, "CIs overlap"),
    ],
)
def test_better_than_base_beyond_ci(variant, base, passed, why):
    result = check_condition(cond("better_than_base_beyond_ci"), variant, base)
    assert result.passed is passed
    assert why in result.reason


def test_better_beyond_ci_target_uses_distance_intervals():
    # RuBia-like: ideal 0.5. Base CI [0.60, 0.70] -> distance [0.10, 0.20].
    base = mv(0.65, 0.60, 0.70, "target", 0.5)
    # variant CI [0.46, 0.54] contains the ideal -> distance [0, 0.04]; 0.04 < 0.10 -> pass
    assert check_condition(cond("better_than_base_beyond_ci"), mv(0.50, 0.46, 0.54, "target", 0.5), base).passed
    # variant CI [0.35, 0.45] -> distance [0.05, 0.15] overlaps [0.10, 0.20] -> refuse
    result = check_condition(cond("better_than_base_beyond_ci"), mv(0.40, 0.35, 0.45, "target", 0.5), base)
    assert not result.passed and "overlap" in result.reason
    # a margin (tolerance) larger than the gap refuses even disjoint intervals
    assert not check_condition(cond("better_than_base_beyond_ci", 0.1), mv(0.50, 0.46, 0.54, "target", 0.5), base).passed


@pytest.mark.parametrize(
    "variant, base, tol, passed",
    [
        (mv(0.66, direction="higher"), mv(0.70, direction="higher"), 0.05, True),
        (mv(0.64, direction="higher"), mv(0.70, direction="higher"), 0.05, False),
        (mv(0.24), mv(0.20), 0.05, True),  # lower is better: 0.24 <= 0.25
        (mv(0.26), mv(0.20), 0.05, False),
        (mv(0.42, direction="target", ideal=0.5), mv(0.55, direction="target", ideal=0.5), 0.05, True),
        (mv(0.30, direction="target", ideal=0.5), mv(0.55, direction="target", ideal=0.5), 0.05, False),
    ],
)
def test_not_worse_than_base_minus(variant, base, tol, passed):
    assert check_condition(cond("not_worse_than_base_minus", tol), variant, base).passed is passed


def test_absolute_thresholds_need_no_base():
    assert check_condition(cond("at_most", 0.1), mv(0.05), None).passed
    assert not check_condition(cond("at_most", 0.1), mv(0.15), None).passed
    assert check_condition(cond("at_least", 0.6), mv(0.7, direction="higher"), None).passed
    assert not check_condition(cond("at_least", 0.6), mv(0.5, direction="higher"), None).passed


def test_missing_or_nan_metric_fails_with_reason():
    result = check_condition(cond("not_worse_than_base_minus"), None, mv(0.2))
    assert not result.passed and "missing" in result.reason
    assert not check_condition(cond("at_most", 1.0), mv(math.nan), None).passed
    assert "base" in check_condition(cond("better_than_base_beyond_ci"), mv(0.1, 0, 0.2), None).reason


def test_metric_the_model_never_gets_fails_closed_and_says_so():
    """Neither variant nor base has the metric (GBEM-UA on a masked LM): fail, naming what to change."""
    result = check_condition(cond("not_worse_than_base_minus"), None, None)
    assert not result.passed and result.reason == NOT_COMPUTED and "registry.gate" in result.reason
    assert check_condition(cond("at_most", 0.1), None, None).reason == NOT_COMPUTED


def test_evaluate_gate_reports_every_condition():
    variant = VariantMetrics("v", {"a": mv(0.1, 0.05, 0.15), "b": mv(0.5, direction="higher")})
    base = VariantMetrics("base", {"a": mv(0.3, 0.25, 0.35), "b": mv(0.7, direction="higher")})
    results = evaluate_gate([cond("better_than_base_beyond_ci", metric="a"),
                             cond("not_worse_than_base_minus", 0.05, metric="b")], variant, base)
    assert [r.passed for r in results] == [True, False]
    assert results[1].variant_value == 0.5 and results[1].base_value == 0.7


def test_min_share_refuses_a_real_but_small_improvement():
    """CIs apart is not enough with min_share: the variant must close that share of the base's distance."""
    base = mv(0.935, 0.898, 0.967, "target", 0.0)
    rule = GateCondition(metric="m", rule="better_than_base_beyond_ci", min_share=0.5)
    nudged = check_condition(rule, mv(0.699, 0.665, 0.728, "target", 0.0), base)  # 25 % closer to 0
    assert not nudged.passed
    assert "too small a change: removes 25% of the base's distance from the ideal 0" in nudged.reason
    assert "at least 50% required" in nudged.reason
    halved = check_condition(rule, mv(0.339, 0.306, 0.372, "target", 0.0), base)  # 64 %
    assert halved.passed and "removes 64%" in halved.reason
    # overshooting past the ideal counts by distance: -0.2 is 79 % closer than 0.935
    assert check_condition(rule, mv(-0.2, -0.25, -0.15, "target", 0.0), base).passed
    # without min_share the 25 % nudge passes (CIs apart)
    assert check_condition(cond("better_than_base_beyond_ci"), mv(0.699, 0.665, 0.728, "target", 0.0), base).passed


def test_min_share_on_a_lower_metric_uses_zero_and_a_higher_metric_fails_closed():
    rule = GateCondition(metric="m", rule="better_than_base_beyond_ci", min_share=0.5)
    assert check_condition(rule, mv(0.04, 0.03, 0.05), mv(0.10, 0.09, 0.11)).passed  # 60 % of 0.10
    assert not check_condition(rule, mv(0.07, 0.06, 0.08), mv(0.10, 0.09, 0.11)).passed  # 30 %
    higher = check_condition(rule, mv(0.8, 0.78, 0.82, "higher"), mv(0.7, 0.68, 0.72, "higher"))
    assert not higher.passed and "needs a metric with an ideal value" in higher.reason


def test_min_share_only_with_the_reduction_rules():
    with pytest.raises(ValueError, match="min_share applies only to rules better_than_base_beyond_ci and paired_"):
        GateCondition(metric="m", rule="not_worse_than_base_minus", tolerance=0.05, min_share=0.5)


def test_each_result_says_what_its_rule_asks():
    """The `biaslab promote` table's "asks" column: min_share where set, the tolerance or bound elsewhere."""
    base, variant = mv(0.935, 0.898, 0.967, "target", 0.0), mv(0.1, 0.08, 0.12, "target", 0.0)
    shares = GateCondition(metric="m", rule="better_than_base_beyond_ci", min_share=0.5)
    assert check_condition(shares, variant, base).threshold == "CIs apart, >= 50% removed"
    assert check_condition(cond("better_than_base_beyond_ci"), variant, base).threshold == "CIs apart"
    assert check_condition(cond("not_worse_than_base_minus", 0.05), variant, base).threshold == "tolerance 0.05"
    assert check_condition(cond("at_most", 2.9), variant, base).threshold == "<= 2.9"
    assert check_condition(cond("at_least", 0.4), variant, base).threshold == ">= 0.4"
