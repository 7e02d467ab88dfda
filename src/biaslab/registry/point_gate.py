"""The promotion gate: each ``registry.gate`` condition of ``params.yaml`` checked against the base's
metrics and CIs. Pure functions of two metrics files (no MLflow)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from biaslab.config import GateCondition
from biaslab.config.verdicts import PAIRED_RULES
from biaslab.metrics.values import MetricValue
from biaslab.outputs.metrics_file import VariantMetrics


NOT_COMPUTED = ("metric computed for neither the variant nor the base (a benchmark this model skips, e.g. GBEM-UA "
                "or OccuGender for a masked LM): name metrics the model has in registry.gate")
"""Why a condition fails whose metric this model never gets: the gate fails closed rather than pass unchecked."""


@dataclass
class ConditionResult:
    """One gate condition, evaluated: the numbers, the verdict, and why."""

    metric: str
    rule: str
    tolerance: float
    variant_value: float | None
    variant_ci: tuple[float, float] | None
    base_value: float | None
    base_ci: tuple[float, float] | None
    direction: str | None
    passed: bool
    reason: str
    min_share: float = 0.0  # better_than_base_beyond_ci: the share of the base's distance it must also remove

    @property
    def asks(self) -> str:
        """The gate table's column (the same as :attr:`threshold`; a paired rule's row names it so)."""
        return self.threshold

    @property
    def estimate(self) -> float | None:
        """A point rule has no paired estimate (the table shows the two values instead)."""
        return None

    @property
    def ci(self) -> tuple[float, float] | None:
        return None

    @property
    def threshold(self) -> str:
        """What the rule asks of the variant, in a few words (the ``biaslab promote`` table's column)."""
        if self.rule == "better_than_base_beyond_ci":
            return f"CIs apart, >= {self.min_share:.0%} removed" if self.min_share else "CIs apart"
        if self.rule == "not_worse_than_base_minus":
            return f"tolerance {self.tolerance:g}"
        return f"{'<=' if self.rule == 'at_most' else '>='} {self.tolerance:g}"


def _ci(mv: MetricValue) -> tuple[float, float] | None:
    if mv.ci_low is None or mv.ci_high is None or not (math.isfinite(mv.ci_low) and math.isfinite(mv.ci_high)):
        return None
    return (float(mv.ci_low), float(mv.ci_high))


def _distance_interval(ci: tuple[float, float], ideal: float) -> tuple[float, float]:
    """The interval of |x - ideal| for x in ``ci``: [0, far] when ``ideal`` lies inside the CI."""
    lo, hi = ci
    near, far = sorted((abs(lo - ideal), abs(hi - ideal)))
    return (0.0, far) if lo <= ideal <= hi else (near, far)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def check_condition(cond: GateCondition, variant: MetricValue | None, base: MetricValue | None) -> ConditionResult:
    """Evaluate one condition. Rules (``t`` = ``tolerance``, ``v`` variant, ``b`` base):

    * ``better_than_base_beyond_ci`` - better in the metric's direction *and* the CIs are disjoint by
      more than ``t``: ``higher``: v.ci_low - b.ci_high > t; ``lower``: b.ci_low - v.ci_high > t;
      ``target``: with d(CI) the interval of |x - ideal| over the CI (``[0, far]`` if the CI contains
      the ideal), b.d_low - v.d_high > t. Fails when either CI is missing.
      With ``min_share`` > 0 the variant must also remove at least that share of the base's distance
      from the ideal, ``1 - |v - ideal| / |b - ideal|`` (point estimates; ideal 0 for a ``lower`` metric
      without one; a ``higher`` metric has no distance to share and fails closed): CIs apart says the change
      is real, the share says it is large enough to call the variant debiased.
    * ``not_worse_than_base_minus`` - ``higher``: v >= b - t; ``lower``: v <= b + t;
      ``target``: |v - ideal| <= |b - ideal| + t.
    * ``at_most`` / ``at_least`` - v <= t / v >= t (``tolerance`` is the threshold; no base needed).
    """
    rule, t = cond.rule, cond.tolerance
    if rule in PAIRED_RULES:
        return ConditionResult(cond.metric, rule, t, None, None, None, None, None, False,
                               f"{rule} is a paired rule: it needs both variants' predictions "
                               "(biaslab.registry.gate.evaluate_gate), not two metrics files")

    def result(passed: bool, reason: str) -> ConditionResult:
        return ConditionResult(
            metric=cond.metric, rule=rule, tolerance=t, min_share=cond.min_share,
            variant_value=variant.value if variant else None, variant_ci=_ci(variant) if variant else None,
            base_value=base.value if base else None, base_ci=_ci(base) if base else None,
            direction=variant.direction if variant else (base.direction if base else None),
            passed=passed, reason=reason,
        )

    if variant is None and base is None:  # fails closed: a promotion needs evidence
        return result(False, NOT_COMPUTED)
    if variant is None or not math.isfinite(variant.value):
        return result(False, "metric missing or not computed for the variant")
    v = variant.value
    if rule == "at_most":
        return result(v <= t, f"{_fmt(v)} {'<=' if v <= t else '>'} {_fmt(t)}")
    if rule == "at_least":
        return result(v >= t, f"{_fmt(v)} {'>=' if v >= t else '<'} {_fmt(t)}")
    if base is None or not math.isfinite(base.value):
        return result(False, "metric missing or not computed for the base")
    b, direction = base.value, variant.direction
    declared_ideal = variant.ideal if variant.ideal is not None else base.ideal
    ideal = declared_ideal if declared_ideal is not None else 0.0

    if rule == "not_worse_than_base_minus":
        if direction == "higher":
            ok, why = v >= b - t, f"{_fmt(v)} vs base - tol = {_fmt(b - t)} (higher is better)"
        elif direction == "lower":
            ok, why = v <= b + t, f"{_fmt(v)} vs base + tol = {_fmt(b + t)} (lower is better)"
        else:
            dv, db = abs(v - ideal), abs(b - ideal)
            ok, why = dv <= db + t, f"|v-ideal| = {_fmt(dv)} vs |base-ideal| + tol = {_fmt(db + t)}"
        return result(ok, ("ok: " if ok else "worse than allowed: ") + why)

    # better_than_base_beyond_ci
    vci, bci = _ci(variant), _ci(base)
    if vci is None or bci is None:
        return result(False, "no confidence interval for the " + ("variant" if vci is None else "base")
                      + "; cannot claim an improvement beyond the CI")
    if direction == "higher":
        gap, how = vci[0] - bci[1], f"variant ci_low {_fmt(vci[0])} vs base ci_high {_fmt(bci[1])}"
    elif direction == "lower":
        gap, how = bci[0] - vci[1], f"variant ci_high {_fmt(vci[1])} vs base ci_low {_fmt(bci[0])}"
    else:
        dv, db = _distance_interval(vci, ideal), _distance_interval(bci, ideal)
        gap = db[0] - dv[1]
        how = f"variant |x-{ideal:g}| <= {_fmt(dv[1])} vs base |x-{ideal:g}| >= {_fmt(db[0])}"
    if gap > t:
        if cond.min_share:
            return _with_min_share(cond.min_share, v, b, direction, declared_ideal, how, result)
        return result(True, f"better beyond CI: {how}")
    if (direction == "higher" and v <= b) or (direction == "lower" and v >= b) or (
        direction == "target" and abs(v - ideal) >= abs(b - ideal)
    ):
        return result(False, f"not better than base ({_fmt(v)} vs {_fmt(b)}, {direction} is better)")
    return result(False, f"CIs overlap: {how}" + (f" (margin {_fmt(t)} required)" if t else ""))


def evaluate_gate_on_metrics(conditions: list[GateCondition], variant: VariantMetrics,
                             base: VariantMetrics) -> list[ConditionResult]:
    """Every point rule of ``conditions`` for ``variant`` against ``base``, on their metrics files alone (the gate
    before the paired rules; kept so callers written against it keep working)."""
    return [check_condition(c, variant.metrics.get(c.metric), base.metrics.get(c.metric)) for c in conditions]


def _with_min_share(min_share: float, v: float, b: float, direction: str | None, ideal: float | None,
                    how: str, result) -> ConditionResult:
    """The ``min_share`` part of ``better_than_base_beyond_ci``, once the CIs are apart."""
    if ideal is None and direction == "lower":
        ideal = 0.0
    if ideal is None:
        return result(False, f"better beyond CI ({how}), but min_share needs a metric with an ideal value "
                             f"(direction target, or lower with ideal 0); this one is {direction}")
    base_distance = abs(b - ideal)
    share = 1.0 - abs(v - ideal) / base_distance if base_distance > 0 else 0.0
    verdict = (f"removes {share:.0%} of the base's distance from the ideal {ideal:g} "
               f"({_fmt(base_distance)} -> {_fmt(abs(v - ideal))}), at least {min_share:.0%} required")
    if share >= min_share:
        return result(True, f"better beyond CI: {how}; {verdict}")
    return result(False, f"too small a change: {verdict} (CIs apart: {how})")
