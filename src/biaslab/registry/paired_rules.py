"""The promotion gate's paired rules: each a bootstrap statistic of (variant − base) on the same test items.

Every rule reads both variants' per-item predictions (:class:`~biaslab.registry.evidence.GateEvidence`) and
the metric's item statistic (:class:`~biaslab.metrics.paired.ItemStatistic`, offered by its benchmark);
:func:`biaslab.metrics.paired.paired_difference` resamples the items (or the metric's own units, e.g.
GBEM-UA's professions) once per round and evaluates the statistic on both models' rows of them. What each
rule asks is in docs/gate.md. Anything missing - a metric, a table, an item statistic, a CI - refuses, with
the reason: the gate fails closed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from biaslab.config import GateCondition
from biaslab.metrics.bootstrap import bootstrap_ci
from biaslab.metrics.paired import ItemStatistic, PairedDifference, paired_difference
from biaslab.metrics.values import MetricValue


@dataclass
class RuleResult:
    """One gate rule, evaluated: what it asks, the paired estimate with its CI, the verdict and why."""

    metric: str
    rule: str
    asks: str
    passed: bool
    reason: str
    estimate: float | None = None  # the rule's statistic: a paired difference (variant − base) or a share
    ci: tuple[float, float] | None = None
    variant_value: float | None = None
    base_value: float | None = None


class Refusal(Exception):
    """Why a rule cannot be evaluated; the rule refuses with this reason (fail closed)."""


@dataclass
class Pairing:
    """The two variants' evidence and the bootstrap settings every rule of one gate decision shares."""

    variant: str
    base: str
    metrics: Mapping[str, Mapping[str, MetricValue]]  # variant name -> its metrics
    tables: Callable[[str], Mapping[str, Any]]  # variant name -> its prediction tables (raises Refusal)
    statistics: Mapping[str, tuple[str, ItemStatistic]]  # metric -> (benchmark, item statistic)
    samples: int
    seed: int
    confidence: float

    def metric(self, metric: str) -> tuple[MetricValue, MetricValue]:
        """The metric of the variant and of the base, or a refusal naming whose metrics lack it."""
        found = [self.metrics[name].get(metric) for name in (self.variant, self.base)]
        for name, value in zip((self.variant, self.base), found):
            if value is None or not math.isfinite(value.value):
                raise Refusal(f"{metric} missing or not computed in the metrics of {name} (metrics/{name}.json)")
        return found[0], found[1]

    def table(self, name: str, table: str) -> Any:
        tables = self.tables(name)
        if table not in tables:
            raise Refusal(f"no predictions table {table} for {name} (data/predictions/{name}/{table}.parquet)")
        return tables[table]

    def difference(self, metric: str, transform: Callable[[float], float] | None = None) -> PairedDifference:
        """``transform(metric)`` of the variant minus that of the base on the same items, paired CI.

        The prediction tables must reproduce both metrics files' values (else the evidence is not one run's).
        """
        v_metric, b_metric = self.metric(metric)
        if metric not in self.statistics:
            raise Refusal(f"no per-item statistic for {metric} (its benchmark offers none or is disabled): "
                          "the gate cannot pair it")
        benchmark, statistic = self.statistics[metric]
        table = f"{benchmark}__{statistic.table}"
        v_table, b_table = self.table(self.variant, table), self.table(self.base, table)
        for name, frame, recorded in ((self.variant, v_table, v_metric), (self.base, b_table, b_metric)):
            try:
                recomputed = statistic.value(frame)
            except (KeyError, ValueError, TypeError) as exc:
                raise Refusal(f"{table} of {name} cannot give {metric}: {exc!r} (not the table its benchmark "
                              "writes)") from exc
            if not math.isclose(recomputed, recorded.value, rel_tol=1e-9, abs_tol=1e-12):
                raise Refusal(f"{table} of {name} gives {metric} = {recomputed:.6g}, metrics/{name}.json says "
                              f"{recorded.value:.6g}: predictions and metrics are not one evaluation's")
        if transform is not None:
            inner = statistic.statistic
            statistic = replace(statistic, statistic=lambda cols: transform(float(inner(cols))))
        try:
            paired = paired_difference(v_table, b_table, statistic, samples=self.samples, seed=self.seed,
                                       confidence=self.confidence, where=f"{table} ({self.variant} vs {self.base})")
        except ValueError as exc:
            raise Refusal(str(exc)) from exc
        if paired.ci_low is None or paired.ci_high is None:
            raise Refusal(f"{metric}: no paired CI ({paired.n} items; the statistic is undefined on every resample)")
        return paired


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _ci(d: PairedDifference) -> str:
    return f"{_f(d.value)} [{_f(d.ci_low)}, {_f(d.ci_high)}]"


def _distance(value: MetricValue) -> tuple[float, Callable[[float], float]]:
    """The metric's ideal and its distance from it (target: |x - ideal|; lower: x - ideal, ideal 0 if unset)."""
    if value.direction == "target":
        ideal = value.ideal if value.ideal is not None else 0.0
        return ideal, lambda x: abs(x - ideal)
    if value.direction == "lower":
        ideal = value.ideal if value.ideal is not None else 0.0
        return ideal, lambda x: x - ideal
    raise Refusal(f"a {value.direction}-is-better metric has no distance from an ideal to remove; a bias rule "
                  "needs a target metric or a lower-is-better one")


def _result(cond: GateCondition, asks: str) -> Callable[..., RuleResult]:
    if cond.reference:
        asks = f"{asks} ({cond.reference})"
    return lambda passed, reason, **numbers: RuleResult(cond.metric, cond.rule, asks, passed, reason, **numbers)


def bias_reduction(cond: GateCondition, pairing: Pairing) -> RuleResult:
    """The variant's distance from the ideal is smaller beyond the paired CI, by at least ``min_share``."""
    result = _result(cond, f"CI of Δ distance from ideal < 0, >= {cond.min_share:.0%} of base's distance removed")
    try:
        v, b = pairing.metric(cond.metric)
        ideal, distance = _distance(v)
        d = pairing.difference(cond.metric, distance)
    except Refusal as exc:
        return result(False, str(exc))
    dv, db = distance(v.value), distance(b.value)
    numbers = {"estimate": d.value, "ci": (d.ci_low, d.ci_high), "variant_value": v.value, "base_value": b.value}
    if db <= 0:
        return result(False, f"the base is at the ideal {ideal:g} already: no bias to remove", **numbers)
    share = 1.0 - dv / db
    how = f"distance from {ideal:g}: {_f(db)} -> {_f(dv)}, Δ {_ci(d)}, {share:.0%} removed"
    if not d.excludes_zero(-1):
        return result(False, f"no reduction beyond the paired CI: {how}", **numbers)
    if share < cond.min_share:
        return result(False, f"too small a reduction: {how}, {cond.min_share:.0%} required", **numbers)
    return result(True, how, **numbers)


def non_inferior(cond: GateCondition, pairing: Pairing) -> RuleResult:
    """Non-inferiority: the paired CI bound of (variant − base) on the bad side stays within the tolerance."""
    t = cond.tolerance
    try:
        v, b = pairing.metric(cond.metric)
        if v.direction == "higher":
            asks, d = f"CI low of Δ > -{t:g}", pairing.difference(cond.metric)
            bound, ok = d.ci_low, d.ci_low > -t
        elif v.direction == "lower":
            asks, d = f"CI high of Δ < +{t:g}", pairing.difference(cond.metric)
            bound, ok = d.ci_high, d.ci_high < t
        else:
            _, distance = _distance(v)
            asks, d = f"CI high of Δ distance from ideal < +{t:g}", pairing.difference(cond.metric, distance)
            bound, ok = d.ci_high, d.ci_high < t
    except Refusal as exc:
        return _result(cond, f"paired CI within tolerance {t:g}")(False, str(exc))
    how = f"Δ {_ci(d)} ({v.direction} is better), bound {_f(bound)} vs tolerance {t:g}"
    return _result(cond, asks)(bool(ok), ("within the tolerance: " if ok else "worse than the tolerance allows: ")
                               + how, estimate=d.value, ci=(d.ci_low, d.ci_high),
                               variant_value=v.value, base_value=b.value)


def no_spill_over(cond: GateCondition, pairing: Pairing) -> RuleResult:
    """Non-inferiority on another family's primary bias metric: the paired CI high of Δ badness (variant −
    base; distance from the ideal, or minus a higher-is-better metric) stays below the family's margin
    ``tolerance`` - what re-training the same recipe moves it (``registry.spill_over_margins``, sized by A/A
    re-trainings; docs/gate.md). A real difference between two checkpoints is not harm; one beyond what
    re-training moves is."""
    t = cond.tolerance
    result = _result(cond, f"CI high of Δ badness < +{t:g} (the family's A/A margin)")
    try:
        v, b = pairing.metric(cond.metric)
        if v.direction == "higher":
            badness: Callable[[float], float] = lambda x: -x  # noqa: E731
        else:
            badness = _distance(v)[1]
        d = pairing.difference(cond.metric, badness)
    except Refusal as exc:
        return result(False, str(exc))
    numbers = {"estimate": d.value, "ci": (d.ci_low, d.ci_high), "variant_value": v.value, "base_value": b.value}
    what = "distance from the ideal" if v.direction != "higher" else "minus the metric"
    if d.ci_high >= t:
        return result(False, f"the bias moved here beyond the margin: Δ {what} {_ci(d)}, CI high >= {t:g}",
                      **numbers)
    return result(True, f"within the margin: Δ {what} {_ci(d)}, CI high < {t:g}", **numbers)


def _answer_shares(column: Any, answers: list[Any]) -> dict[Any, float]:
    values = np.asarray(column)
    return {a: float(np.mean(values == a)) if len(values) else float("nan") for a in answers}


NOT_INFORMATIVE = "QA accuracy not informative on this model"
"""The answer floor's verdict when the base itself is collapsed (docs/gate.md): it passes on that ground."""


def _minority_difference(cond: GateCondition, pairing: Pairing, frame: Any, base: Any,
                         answers: list[Any]) -> PairedDifference | None:
    """Paired CI of (variant − base) of the least-given answer's share, items matched on ``item_id`` (units:
    ``profession`` where the table has it, as GBEM-UA's own CIs); None when the tables cannot be paired."""
    key = ("item_id",)
    if not all(k in t.columns for t in (frame, base) for k in key):
        return None
    unit = ("profession",) if all("profession" in t.columns for t in (frame, base)) else None
    columns = [*key, *(unit or ()), cond.column]
    share = lambda cols: min(_answer_shares(cols[cond.column], answers).values())  # noqa: E731
    statistic = ItemStatistic(cond.table, lambda t: t[columns], key, share, unit)
    try:
        return paired_difference(frame, base, statistic, samples=pairing.samples, seed=pairing.seed,
                                 confidence=pairing.confidence, where=f"{cond.table} ({pairing.variant} vs "
                                                                       f"{pairing.base})")
    except ValueError:
        return None


def answer_floor(cond: GateCondition, pairing: Pairing) -> RuleResult:
    """Collapse, judged against what the base can do.

    Where the base gives every answer on at least ``floor`` of the items, the absolute floor holds: every
    answer >= ``floor`` of the variant's items. Where the base itself is collapsed (an answer below the floor),
    QA accuracy is not informative on this model: the rule passes, saying so, unless the variant collapses
    *further* than the base - its least-given answer's share lower beyond the paired CI (items matched).
    """
    result = _result(cond, f"each answer of {cond.table}.{cond.column} >= {cond.floor:.0%} of the items, "
                           "or no further collapse than a collapsed base")
    try:
        frame = pairing.table(pairing.variant, cond.table)
        base = pairing.table(pairing.base, cond.table)
    except Refusal as exc:
        return result(False, str(exc))
    for name, table in ((pairing.variant, frame), (pairing.base, base)):
        if cond.column not in table.columns or table.empty:
            return result(False, f"{cond.table} of {name} has no column {cond.column!r} or no rows")
    if frame[cond.column].dtype == bool:
        answers: list[Any] = [True, False]
    else:
        seen = [*frame[cond.column].dropna().unique(), *base[cond.column].dropna().unique()]
        answers = sorted(set(seen), key=str)
    if len(answers) < 2:
        return result(False, f"{cond.table}.{cond.column}: one answer ({answers}) in the variant and the base")
    shares, base_shares = _answer_shares(frame[cond.column], answers), _answer_shares(base[cond.column], answers)
    least, base_least = min(shares, key=shares.get), min(base_shares, key=base_shares.get)
    named = {a: cond.answer_names.get(str(a), str(a)) for a in answers}
    text = ", ".join(f"{named[a]}: {s:.1%}" for a, s in shares.items()) + f" of {len(frame)} items (base: " + \
        ", ".join(f"{named[a]}: {s:.1%}" for a, s in base_shares.items()) + ")"
    numbers: dict[str, Any] = {"estimate": shares[least], "variant_value": shares[least],
                               "base_value": base_shares[base_least]}
    if base_shares[base_least] >= cond.floor:
        minority = lambda cols: min(_answer_shares(cols[cond.column], answers).values())  # noqa: E731
        low, high = bootstrap_ci(frame[[cond.column]], minority, samples=pairing.samples, seed=pairing.seed,
                                 confidence=pairing.confidence)
        numbers["ci"] = None if low is None else (low, high)  # the smallest share's CI, items resampled (shown)
        if shares[least] < cond.floor:
            return result(False, f"collapsed: answer {named[least]} gets {shares[least]:.1%} < {cond.floor:.0%} "
                                 f"where the base clears the floor; {text}", **numbers)
        return result(True, f"every answer >= {cond.floor:.0%}: {text}", **numbers)
    d = _minority_difference(cond, pairing, frame, base, answers)
    if d is not None and d.ci_low is not None:
        numbers |= {"estimate": d.value, "ci": (d.ci_low, d.ci_high)}
    further = (d.excludes_zero(-1) if d is not None else shares[least] < base_shares[base_least])
    how = (f"least-given answer's share Δ {_ci(d)} (variant − base, paired)" if d is not None else
           f"least-given answer's share {shares[least]:.1%} vs the base's {base_shares[base_least]:.1%} (unpaired)")
    if further:
        return result(False, f"collapsed further than the base: {how}; {text}", **numbers)
    return result(True, f"{NOT_INFORMATIVE}: the base itself gives {named[base_least]} on "
                        f"{base_shares[base_least]:.1%} < {cond.floor:.0%} of the items; no further collapse: "
                        f"{how}; {text}", **numbers)


PAIRED = {"paired_bias_reduction": bias_reduction, "paired_non_inferior": non_inferior,
          "paired_no_spill_over": no_spill_over, "answer_floor": answer_floor}
"""Rule name (``registry.gate[].rule``) -> its evaluation."""
