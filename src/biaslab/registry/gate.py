"""The promotion gate: does a variant remove bias without harm, judged on the test items it was evaluated on?

Every rule is a statistic of (variant − base) on the *same* items, read from both variants' per-item
predictions through :class:`~biaslab.registry.evidence.GateEvidence` and bootstrapped in pairs
(:mod:`biaslab.registry.paired_rules`; docs/gate.md states each rule, its tolerance and reference):

* ``paired_bias_reduction`` - the distance of the bias metric from its ideal shrinks beyond the paired CI,
  by at least ``min_share`` of the base's distance;
* ``paired_non_inferior`` - an accuracy (higher) metric's CI low of Δ stays above −tolerance, a
  lower-is-better one's (bits/char) CI high below +tolerance;
* ``paired_no_spill_over`` - non-inferiority on another family's primary bias metric: the CI high of Δ
  badness stays below the family's A/A margin (``registry.spill_over_margins``; added for every
  ``calibrate.families`` primary by :func:`gate_conditions`);
* ``answer_floor`` - a QA benchmark's answers do not collapse: each answer gets at least ``floor`` of the
  variant's test items where the base clears the floor; where the base is itself collapsed, QA accuracy is
  not informative on this model and only a further collapse than the base's refuses.

The point-estimate rules of :mod:`biaslab.registry.point_gate` are still evaluated when a project states
them (on the metrics files). A gate with no rule, or a rule without its evidence, refuses. Pure: no MLflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from biaslab.config import GateCondition
from biaslab.registry.paired_rules import PAIRED, Pairing, Refusal, RuleResult
from biaslab.registry.point_gate import check_condition

if TYPE_CHECKING:
    from biaslab.config import Params
    from biaslab.registry.evidence import GateEvidence

DEFAULT_SAMPLES = 4000  # = GateBootstrap.samples: what a caller without params gets


@dataclass
class GateVerdict:
    """The gate's decision on one variant: every rule's row; approved only if there are rows and all pass."""

    variant: str
    base: str
    rows: list[RuleResult]
    samples: int
    seed: int
    confidence: float
    source: dict[str, dict[str, str]] = field(default_factory=dict)  # variant -> what was read (sha256 or run id)

    @property
    def passed(self) -> bool:
        return bool(self.rows) and all(r.passed for r in self.rows)

    @property
    def failed(self) -> list[RuleResult]:
        return [r for r in self.rows if not r.passed]


def evaluate_gate(conditions: list[GateCondition], evidence: GateEvidence, variant: str, base: str = "base", *,
                  statistics: Mapping[str, tuple[str, Any]] | None = None, seed: int = 0,
                  samples: int = DEFAULT_SAMPLES, confidence: float = 0.95) -> GateVerdict:
    """Every rule of ``conditions`` for ``variant`` against ``base`` on ``evidence``.

    ``statistics``: ``{metric: (benchmark, ItemStatistic)}`` (:func:`biaslab.benchmarks.registry.item_statistics_of`
    with the project's benchmarks); ``None`` looks each metric up in its benchmark's default module.
    ``seed``/``samples``/``confidence``: the paired bootstrap of every rule.
    """
    from biaslab.benchmarks.registry import item_statistics_of

    verdict = GateVerdict(variant, base, [], samples, seed, confidence)
    if not conditions:
        verdict.rows.append(RuleResult("-", "gate_defined", "at least one rule", False,
                                       "registry.gate in params.yaml is empty; refusing to promote without a gate"))
        return verdict
    if statistics is None:
        statistics = item_statistics_of(None, [c.metric for c in conditions if c.rule in PAIRED])
    metrics, missing = {}, {}
    for name in dict.fromkeys((variant, base)):
        try:
            metrics[name] = evidence.metrics(name)
            verdict.source[name] = dict(evidence.source(name))
        except (OSError, ValueError) as exc:  # BiaslabError subclasses of both: missing or malformed evidence
            missing[name] = f"no metrics for {name}: {exc}"
    if missing:
        verdict.rows += [RuleResult(c.metric, c.rule, "evidence", False, "; ".join(missing.values()))
                         for c in conditions]
        return verdict
    pairing = Pairing(variant, base, {n: m.metrics for n, m in metrics.items()}, _tables(evidence), statistics,
                      samples, seed, confidence)
    for cond in conditions:
        if cond.rule in PAIRED:
            verdict.rows.append(PAIRED[cond.rule](cond, pairing))
        else:
            point = check_condition(cond, metrics[variant].metrics.get(cond.metric),
                                    metrics[base].metrics.get(cond.metric))
            verdict.rows.append(RuleResult(cond.metric, cond.rule, f"{point.threshold} (point estimates, not paired)",
                                           point.passed, point.reason,
                                           variant_value=point.variant_value, base_value=point.base_value))
    return verdict


def _tables(evidence: GateEvidence):
    """Each variant's prediction tables, read once; unreadable evidence becomes a refusal naming it."""
    cache: dict[str, Any] = {}

    def tables(name: str) -> Mapping[str, Any]:
        if name not in cache:
            try:
                cache[name] = evidence.predictions(name)
            except (OSError, ValueError) as exc:
                cache[name] = Refusal(f"predictions of {name} unreadable: {exc}")
        if isinstance(cache[name], Refusal):
            raise cache[name]
        return cache[name]

    return tables


def gate_conditions(params: Params) -> list[GateCondition]:
    """``registry.gate``, plus (``registry.spill_over``) a ``paired_no_spill_over`` rule for the primary metric
    - the first of each ``calibrate.families`` entry - of every enabled family no bias rule names."""
    conditions = list(params.registry.gate)
    if not params.registry.spill_over or not conditions:
        return conditions
    named = {c.metric for c in conditions if c.rule in ("paired_bias_reduction", "paired_no_spill_over")}
    for family, metrics in params.calibrate.families.items():
        primary = next(iter(metrics), None)
        entry = params.evaluation.benchmarks.get(primary.split("/", 1)[0]) if primary else None
        if primary and primary not in named and entry is not None and entry.enabled:
            margin = params.registry.spill_over_margins.get(family)
            reference = (f"calibrate.families.{family}'s primary; margin: {margin.reference}" if margin else
                         f"calibrate.families.{family}'s primary; no A/A margin in registry.spill_over_margins: 0")
            conditions.append(GateCondition(metric=primary, rule="paired_no_spill_over",
                                            tolerance=margin.tolerance if margin else 0.0, reference=reference))
    return conditions


def evaluate_gate_for(params: Params, evidence: GateEvidence, variant: str, base: str = "base", *,
                      seed: int | None = None) -> GateVerdict:
    """The project's gate (:func:`gate_conditions`, ``registry.bootstrap``, its benchmarks' item statistics);
    ``seed`` overrides ``registry.bootstrap.seed`` (bench/gate_seeds.py)."""
    from biaslab.benchmarks.registry import item_statistics_of

    conditions = gate_conditions(params)
    boot = params.registry.bootstrap
    statistics = item_statistics_of(params.evaluation.benchmarks, [c.metric for c in conditions if c.rule in PAIRED])
    return evaluate_gate(conditions, evidence, variant, base, statistics=statistics,
                         seed=boot.seed if seed is None else seed, samples=boot.samples, confidence=boot.confidence)


__all__ = ["GateVerdict", "RuleResult", "evaluate_gate", "evaluate_gate_for", "gate_conditions"]
