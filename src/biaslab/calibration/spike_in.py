"""The spike-in self-test: a known bias added to a model's stored predictions, read back by each benchmark family.

A *spike* of δ nats adds δ to the log-score of the stereotype-consistent option of every request
(each benchmark's ``spike(predictions, delta, options)``, the stored-prediction form of
:class:`~biaslab.scoring.spiked.SpikedScorer`; no training, no benchmark text touched). For every δ of
``calibrate.spike_deltas`` and every family's primary metric this module gives:

* the **dose-response**: the metric on the spiked predictions, with the metric's own *unpaired* bootstrap
  CI (its :class:`~biaslab.metrics.paired.ItemStatistic`, resampling the units its CI resamples);
* the **δ = 0 check**: the unspiked statistic must equal the stored (unwrapped) metric exactly;
* the **resolution** δ*: the smallest δ at which the family's detection rule between two trained models
  (:func:`~biaslab.calibration.families.detection_status`: the two CIs apart in the expected direction)
  calls the spiked model biased against the unspiked one. Not a paired CI of a model against its own
  spiked copy: a spike moves every item the same way, so that CI leaves 0 at almost any δ and says
  nothing about two models that differ item by item.

:func:`check` fails the run (:class:`SpikeInError`, one line naming the family and the δ) when the δ = 0
metric is not the stored one, or the metric does not move monotonically in the stereotyped (expected)
direction: the instrument is broken (a flipped sign, a label read the wrong way round). A metric flat over the
whole grid fails only if it does not move between δ = −:data:`PROBE` and +:data:`PROBE` either: a model whose
score gaps are all wider than the grid (no item flips by 2 nats) is reported (``note``), not failed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from biaslab.calibration.families import Change, detection_status
from biaslab.errors import EvaluationError
from biaslab.metrics.bootstrap import bootstrap_ci
from biaslab.metrics.paired import ItemStatistic
from biaslab.metrics.values import MetricValue

DEFAULT_DELTAS = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)
PROBE = 100.0
"""δ of the reading probe (nats): the metric at −PROBE and +PROBE tells a benchmark that ignores the spike from
a model whose score gaps are wider than the grid (a random-weight or a very confident model: no item flips by
2 nats). Between the two every item whose gap is under 100 nats changes sides, so a benchmark that reads the
spiked scores gives two different values; ``exp(100)`` is far from a float's limits."""
ZERO_TOLERANCE = 1e-9  # |metric at δ = 0 - stored metric|: float noise of one sum order, no more
STEP_TOLERANCE = 1e-12  # a step against the expected direction smaller than this is float noise

Spike = Callable[[Mapping[str, pd.DataFrame], float], Mapping[str, pd.DataFrame]]


class SpikeInError(EvaluationError):
    """The spike-in self-test failed: a benchmark family reads a known bias wrongly."""


@dataclass(frozen=True)
class DosePoint:
    delta: float
    value: MetricValue  # the metric on the spiked predictions, with its own unpaired CI
    status: str  # detection_status(spiked, unspiked, expected): "detected" = the two CIs apart


@dataclass(frozen=True)
class SpikeIn:
    """One family's dose-response on one model (``points`` empty and ``note`` set when it could not run)."""

    family: str
    metric: str
    expected: Change
    points: list[DosePoint] = field(default_factory=list)
    stored: MetricValue | None = None  # the unwrapped metric as evaluated (metrics/<variant>.json)
    note: str = ""
    probe: tuple[float, float] | None = None  # a metric flat over the grid at δ = −PROBE and +PROBE (see PROBE)

    @property
    def zero_difference(self) -> float | None:
        """|metric at δ = 0 − stored metric| (None without a δ = 0 point or a stored value)."""
        if not self.points or self.points[0].delta != 0 or self.stored is None:
            return None
        return abs(self.points[0].value.value - self.stored.value)

    @property
    def resolution(self) -> float | None:
        """δ*: the smallest δ whose spiked CI is apart from the unspiked one (None: not within the grid)."""
        return next((p.delta for p in self.points if p.status == "detected"), None)

    @property
    def resolution_between(self) -> float | None:
        """δ* read between grid points: where the gap between the two CIs crosses 0, linearly (None: not in the grid).

        The grid's δ* is only as fine as the grid; this says whether a δ* of 2 means "just above 1" or "2".
        """
        zero = self.points[0].value if self.points else None
        if zero is None or zero.ci_low is None or zero.ci_high is None:
            return None
        def gap(v: MetricValue) -> float | None:  # > 0: the CIs are apart in the expected direction
            if v.ci_low is None or v.ci_high is None:
                return None
            return v.ci_low - zero.ci_high if self.expected == "increase" else zero.ci_low - v.ci_high
        before = None
        for point in self.points:
            g = gap(point.value)
            if g is None:
                return None
            if point.status == "detected":
                if before is None:
                    return point.delta
                (d0, g0), d1 = before, point.delta
                return d0 + (d1 - d0) * (-g0) / (g - g0) if g > g0 else d1
            before = (point.delta, g)
        return None

    def shift(self, delta_index: int) -> float:
        return self.points[delta_index].value.value - self.points[0].value.value

    def equivalent_delta(self, effect: float | None) -> float | None:
        """The δ whose spike moves the metric by ``effect`` (linear between grid points; None beyond the grid).

        Puts an observed effect (planted − control) on the spike's scale of nats.
        """
        if effect is None or not self.points or not math.isfinite(effect):
            return None
        sign = 1 if self.expected == "increase" else -1
        target = sign * effect
        if target <= 0:
            return 0.0 if target == 0 else None
        previous = (self.points[0].delta, 0.0)
        for k, point in enumerate(self.points[1:], start=1):
            moved = sign * self.shift(k)
            if moved >= target:
                (d0, m0), (d1, m1) = previous, (point.delta, moved)
                return d0 + (d1 - d0) * (target - m0) / (m1 - m0) if m1 > m0 else d1
            previous = (point.delta, moved)
        return None


def metric_with_ci(statistic: ItemStatistic, table: pd.DataFrame, *, samples: int, seed: int,
                   confidence: float) -> MetricValue:
    """The metric of ``statistic`` on one model's table with its own unpaired bootstrap CI."""
    rows = statistic.rows(table)
    value = float(statistic.statistic(rows)) if len(rows) else float("nan")
    unit = list(statistic.unit) if statistic.unit else None
    low, high = bootstrap_ci(rows, statistic.statistic, samples=samples, seed=seed, confidence=confidence, unit=unit)
    return MetricValue(value, "target", None, low, high, int(len(rows)))


def dose_response(family: str, metric: str, expected: Change, statistic: ItemStatistic,
                  tables: Mapping[str, pd.DataFrame], spike: Spike, deltas: Sequence[float], *,
                  stored: MetricValue | None, samples: int, seed: int, confidence: float) -> SpikeIn:
    """The metric of ``statistic`` on ``spike(tables, δ)`` for every δ of ``deltas``, and each verdict vs δ = 0.

    ``tables``: one benchmark's stored prediction tables keyed by table name (``statistic.table`` among
    them); ``spike``: that benchmark's spike with its options bound. A spike that hands the statistic's
    table back as the same object has nothing to spike there (e.g. GBEM-UA with the embedding parser): a
    note, not a failure.
    """
    if statistic.table not in tables:
        return SpikeIn(family, metric, expected, stored=stored,
                       note=f"no stored predictions table {statistic.table!r}")
    if spike(tables, float(deltas[-1]))[statistic.table] is tables[statistic.table]:
        return SpikeIn(family, metric, expected, stored=stored,
                       note=f"the benchmark's spike leaves {statistic.table!r} as it is (no option to spike)")
    zero = metric_with_ci(statistic, spike(tables, 0.0)[statistic.table], samples=samples, seed=seed,
                          confidence=confidence)
    if not math.isfinite(zero.value) and (stored is None or not math.isfinite(stored.value)):
        # e.g. a sampled smoke run (data.sample) leaves too few items for the metric: nothing to read, and the
        # evaluation agrees (a finite stored value against a NaN here still fails in check())
        return SpikeIn(family, metric, expected, stored=stored,
                       note=f"the metric is not a number on the stored predictions ({zero.n} rows): no dose-response")
    values = []
    for delta in deltas:
        spiked = spike(tables, float(delta))
        values.append(metric_with_ci(statistic, spiked[statistic.table], samples=samples, seed=seed,
                                     confidence=confidence))
    zero = values[0]
    points = [DosePoint(float(d), v, detection_status(v, zero, expected)) for d, v in zip(deltas, values)]
    probe, note = None, ""
    if values[-1].value == zero.value:  # flat over the grid: does it read the spike at all? (check() asks)
        probe = tuple(float(statistic.statistic(statistic.rows(spike(tables, d)[statistic.table])))
                      for d in (-PROBE, PROBE))
    if probe is not None and probe[0] != probe[1]:
        note = (f"the metric moves only beyond the grid: no item's score gap is crossed by δ = {deltas[-1]:g} nats "
                f"(from δ = −{PROBE:g} to +{PROBE:g} nats it goes {probe[0]:.4g} → {probe[1]:.4g})")
    return SpikeIn(family, metric, expected, points, stored, note=note, probe=probe)


def check(results: Sequence[SpikeIn]) -> None:
    """Raise :class:`SpikeInError` for the first family whose instrument reads the spike wrongly (module docstring)."""
    for r in results:
        if not r.points:
            continue
        zero = r.zero_difference
        if zero is not None and not zero <= ZERO_TOLERANCE:
            raise SpikeInError(f"spike-in {r.family} ({r.metric}): at δ = 0 the metric is {r.points[0].value.value!r}, "
                               f"the evaluated one {r.stored.value!r} (differ by {zero:.3g}); the spike changes "
                               "an unspiked model")
        sign = 1 if r.expected == "increase" else -1
        for before, point in zip(r.points, r.points[1:]):
            step = sign * (point.value.value - before.value.value)
            if not math.isfinite(point.value.value) or step < -STEP_TOLERANCE:
                raise SpikeInError(
                    f"spike-in {r.family} ({r.metric}): the metric moves against the stereotyped direction "
                    f"({r.expected}) at δ = {point.delta:g} nats ({before.value.value:.6g} at δ = {before.delta:g} → "
                    f"{point.value.value:.6g}); the benchmark reads its stereotype labels the wrong way round")
        if len(r.points) > 1 and not sign * r.shift(len(r.points) - 1) > 0:
            low, high = r.probe if r.probe is not None else (math.nan, math.nan)
            if sign * (high - low) > 0:  # it reads the spike; this model's score gaps are wider than the grid
                continue
            if sign * (high - low) < 0:
                raise SpikeInError(
                    f"spike-in {r.family} ({r.metric}): the metric moves against the stereotyped direction "
                    f"({r.expected}) between δ = −{PROBE:g} and +{PROBE:g} nats ({low:.6g} → {high:.6g}); the "
                    "benchmark reads its stereotype labels the wrong way round")
            raise SpikeInError(f"spike-in {r.family} ({r.metric}): the metric does not move at all up to "
                               f"δ = {r.points[-1].delta:g} nats, nor between δ = −{PROBE:g} and +{PROBE:g}; the "
                               "benchmark does not read the spiked scores")


def _nats(x: float | None, above: float) -> str:
    return f"> {above:g} nats" if x is None else f"{x:.2g} nats"


def _resolution(r: SpikeIn, above: float) -> str:
    between = r.resolution_between
    if r.resolution is None or between is None or between == r.resolution:
        return _nats(r.resolution, above)
    return f"{_nats(r.resolution, above)} (≈ {between:.2g} between grid points)"


def aa_resolution(r: SpikeIn, spread: tuple[float | None, float, int] | None) -> float | None:
    """The spike δ that moves ``r``'s metric as far as the largest A/A effect (``spread``: sd, largest |effect|,
    count, of :class:`biaslab.calibration.draws.DrawsReport`): the smallest spike re-training cannot also
    produce (None: no draws, or beyond the grid)."""
    if spread is None or not r.points:
        return None
    return r.equivalent_delta(spread[1] * (1 if r.expected == "increase" else -1))


def render_markdown(results: Sequence[SpikeIn], variant: str, effects: Mapping[str, float | None] | None = None,
                    aa_spread: Mapping[str, tuple[float | None, float, int]] | None = None) -> str:
    """The spike-in section of ``reports/calibration.md``; ``effects``: planted − control per metric, if any;
    ``aa_spread``: per primary metric the A/A draws' spread (:class:`biaslab.calibration.draws.DrawsReport`),
    which adds the resolution against re-training (the CIs' δ* sees item noise only)."""
    given = aa_spread is not None
    effects, aa_spread = effects or {}, aa_spread or {}
    deltas = next((tuple(p.delta for p in r.points) for r in results if r.points), DEFAULT_DELTAS)
    top = deltas[-1] if deltas else 0.0
    lines = ["## Spike-in self-test: what can each family resolve on this model?", "",
             f"Every stereotype-consistent option of every request of `{variant}`'s stored predictions gets δ nats "
             "more (docs/spike_in.md): RuBia's pro sentence, CrowS' more-stereotypical sentence, GenderLex's "
             "human-bias pronoun, OccuGender's BLS-majority gender, GBEM-UA's «так» for a man and «ні» for a "
             "woman. The table gives each family's primary metric at each δ (its own unpaired 95 % CI), that "
             "δ = 0 is the evaluated metric exactly, and the **resolution δ\\***: the smallest δ at which the "
             "family's detection rule between two trained models (CIs apart) calls the spiked model biased "
             "against the unspiked one. A metric that does not move monotonically in the stereotyped direction "
             f"fails the stage; one flat over the whole grid fails unless it moves between δ = −{PROBE:g} and "
             f"+{PROBE:g} nats (a model whose score gaps are all wider than the grid).", ""]
    lines += ["| family | primary metric | " + " | ".join(f"δ = {d:g}" for d in deltas)
              + " | δ = 0 vs evaluated | resolution δ* |",
              "|---|---|" + "---:|" * len(deltas) + "---|---:|"]
    for r in results:
        if not r.points:
            lines.append(f"| {r.family} | `{r.metric}` | " + " | ".join("n/a" for _ in deltas)
                         + f" | not run: {r.note} | n/a |")
            continue
        cells = [f"{p.value.value:.3f}" + (f" [{p.value.ci_low:.3f}, {p.value.ci_high:.3f}]"
                                           if p.value.ci_low is not None else "") for p in r.points]
        zero = r.zero_difference
        same = "no evaluated value" if zero is None else ("identical" if zero == 0 else f"differs by {zero:.1e}")
        resolution = _resolution(r, top) + (f" ({r.note})" if r.note else "")
        lines.append(f"| {r.family} | `{r.metric}` | " + " | ".join(cells) + f" | {same} | {resolution} |")
    planted = [r for r in results if r.points and effects.get(r.metric) is not None]
    if planted:
        lines += ["", "### The planted bias against the resolution", "",
                  "The planted − control effect of each primary metric, the spike that moves the metric as much "
                  "(linear between grid points) and the family's resolution: a planted effect far below the "
                  "resolution is one no pair of trained models of this size could tell apart by CIs, not a blind "
                  "benchmark.", "",
                  "| family | planted − control | as a spike of | resolution δ* |", "|---|---:|---:|---:|"]
        for r in planted:
            effect = effects[r.metric]
            equivalent = r.equivalent_delta(effect)
            as_spike = ("against the stereotype" if equivalent is None and effect * (1 if r.expected == "increase" else -1) < 0
                        else _nats(equivalent, top))
            lines.append(f"| {r.family} | {effect:+.3f} | {as_spike} | {_resolution(r, top)} |")
    spread = [r for r in results if r.points and r.metric in aa_spread]
    if spread:
        lines += ["", "### The resolution against re-training (A/A draws)", "",
                  "δ\\* above sees only item noise (each model's own CI). Re-training the same recipe moves a "
                  "metric too: the A/A draws (a control against a re-seeded control) give that spread. The spike "
                  "that moves the metric as far as the largest A/A effect is the smallest one a single pair of "
                  "re-trained models could not also produce; below it, a difference between two checkpoints may "
                  "be the draw.", "",
                  "| family | A/A effects: sd (largest \\|effect\\|, draws) | spike of the largest A/A effect "
                  "| resolution δ* (item noise) |", "|---|---:|---:|---:|"]
        for r in spread:
            sd, largest, k = aa_spread[r.metric]
            sd_text = "n/a" if sd is None else f"{sd:.3f}"
            lines.append(f"| {r.family} | {sd_text} ({largest:.3f}, {k}) | {_nats(aa_resolution(r, aa_spread[r.metric]), top)} "
                         f"| {_resolution(r, top)} |")
    elif results and given:
        lines += ["", "Against re-training: no current A/A draws (the draws file is missing or stale), so δ\\* above "
                  "is against item noise only."]
    return "\n".join(lines) + "\n"


def table(results: Sequence[SpikeIn], effects: Mapping[str, float | None] | None = None) -> list[dict[str, object]]:
    """One row per family and δ (``reports/spike_in.csv``)."""
    effects = effects or {}
    rows = []
    for r in results:
        for p in r.points or [None]:
            rows.append({"family": r.family, "metric": r.metric, "expected": r.expected,
                         "delta": None if p is None else p.delta, "value": None if p is None else p.value.value,
                         "ci_low": None if p is None else p.value.ci_low, "ci_high": None if p is None else p.value.ci_high,
                         "verdict_vs_unspiked": None if p is None else p.status,
                         "evaluated": None if r.stored is None else r.stored.value, "resolution": r.resolution,
                         "resolution_between": r.resolution_between,
                         "planted_effect": effects.get(r.metric),
                         "planted_as_spike": r.equivalent_delta(effects.get(r.metric)), "note": r.note})
    return rows


def mlflow_metrics(results: Sequence[SpikeIn]) -> dict[str, float]:
    """``calibration/spike/...`` numbers for the calibrate run (resolution −1 = not within the grid)."""
    out: dict[str, float] = {}
    for r in results:
        if not r.points:
            continue
        for p in r.points:
            out[f"calibration/spike/{r.metric}/delta_{p.delta:g}"] = p.value.value
        out[f"calibration/spike_resolution/{r.metric}"] = -1.0 if r.resolution is None else r.resolution
        if r.resolution_between is not None:
            out[f"calibration/spike_resolution_between/{r.metric}"] = r.resolution_between
        if r.zero_difference is not None:
            out[f"calibration/spike_zero_difference/{r.metric}"] = r.zero_difference
    return out


__all__ = ["DEFAULT_DELTAS", "DosePoint", "SpikeIn", "SpikeInError", "check", "dose_response", "metric_with_ci",
           "mlflow_metrics", "render_markdown", "table"]
