"""Calibration of the benchmarks on a known answer: the planted model against its counterbalanced control.

The default model carries a planted gender bias (``model.pretrain.planted_bias``); the control is the same
training with the planted sentences' genders counterbalanced. A benchmark *detects* the planted bias on a
metric when the two 95 % CIs are apart in the expected direction (``increase``: planted CI low above the
control's CI high; ``decrease``: the mirror image). ``calibrate.families`` lists, per benchmark family, its
headline metrics and the expected change from control to planted; the first metric of a family is its
*primary* metric, and the family detects the bias when its primary metric does. Next to each effect the
report gives the effect these CIs *needed* to be apart (:attr:`Detection.needed`), so an overlap reads as
"sees little" or as "just missed".

The same two models answer the same items, so the report also gives the *paired* reading of every
metric a benchmark can recompute from its per-item rows (:mod:`biaslab.metrics.paired`): the planted −
control difference with a CI from resampling the items once for both models. Its verdict ("paired":
that CI apart from 0 in the expected direction) is reported next to the CIs-apart verdict, which stays
the rule the families are counted by; it says whether a benchmark sees the planted bias at all, where
the CIs-apart rule asks that each model's metric be known well enough on its own.

For every mitigation the share of the planted effect it removes is ``(base - variant) / (base - control)``
(1 = back to the control, 0 = no change, negative = worse), reported with whether the variant is better
than the base beyond both CIs, and - paired again, on the same held-out items - whether the CI of
variant − base lies on the control's side of 0. The share is only defined where the planted effect is
detected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from biaslab.metrics.paired import PairedDifference, paired_difference
from biaslab.metrics.values import MetricValue

Change = Literal["increase", "decrease"]


@dataclass(frozen=True)
class Detection:
    family: str
    metric: str
    expected: Change
    primary: bool
    planted: MetricValue | None
    control: MetricValue | None
    status: str  # detected | overlap | wrong direction | no CI | missing
    paired: PairedDifference | None = None  # planted − control on the same items (None: not recomputable)

    @property
    def detected(self) -> bool:
        return self.status == "detected"

    @property
    def paired_status(self) -> str:
        """``detected`` when the paired CI of planted − control is apart from 0 in the expected direction."""
        return paired_status(self.paired, self.expected)

    @property
    def paired_detected(self) -> bool:
        return self.paired_status == "detected"

    @property
    def effect(self) -> float | None:
        if self.planted is None or self.control is None:
            return None
        return self.planted.value - self.control.value

    @property
    def needed(self) -> float | None:
        """The planted − control difference at which these CIs would just be apart, in the expected direction.

        The planted CI's half-width towards the control plus the control CI's towards the planted model (CIs
        need not be symmetric). It says what a benchmark could have resolved: an ``overlap`` with an effect far
        below it is a benchmark that sees little, one near it a detection the CIs just missed.
        """
        p, c = _ci(self.planted), _ci(self.control)
        if p is None or c is None:  # no CI (or no value) on either side
            return None
        if self.expected == "increase":
            return (self.planted.value - p[0]) + (c[1] - self.control.value)
        return -((p[1] - self.planted.value) + (self.control.value - c[0]))


def _ci(mv: MetricValue | None) -> tuple[float, float] | None:
    if mv is None or mv.ci_low is None or mv.ci_high is None:
        return None
    if not (math.isfinite(mv.ci_low) and math.isfinite(mv.ci_high)):
        return None
    return mv.ci_low, mv.ci_high


def detection_status(planted: MetricValue | None, control: MetricValue | None, expected: Change) -> str:
    """``detected`` when the CIs are apart in the ``expected`` direction (see the module docstring)."""
    if planted is None or control is None or not math.isfinite(planted.value) or not math.isfinite(control.value):
        return "missing"
    p, c = _ci(planted), _ci(control)
    if p is None or c is None:
        return "no CI"
    if expected == "increase":
        if p[0] > c[1]:
            return "detected"
        return "wrong direction" if p[1] < c[0] else "overlap"
    if p[1] < c[0]:
        return "detected"
    return "wrong direction" if p[0] > c[1] else "overlap"


def paired_status(paired: PairedDifference | None, expected: Change) -> str:
    """``detected`` / ``wrong direction`` when the paired CI excludes 0 on that side, else ``includes 0``."""
    if paired is None or not math.isfinite(paired.value):
        return "n/a"
    if paired.ci_low is None or paired.ci_high is None:
        return "no CI"
    sign = 1 if expected == "increase" else -1
    if paired.excludes_zero(sign):
        return "detected"
    return "wrong direction" if paired.excludes_zero(-sign) else "includes 0"


def detect_all(families: Mapping[str, Mapping[str, Change]], planted: Mapping[str, MetricValue],
               control: Mapping[str, MetricValue],
               paired: Mapping[str, PairedDifference] | None = None) -> list[Detection]:
    """One :class:`Detection` per configured metric, families and metrics in configuration order.

    ``paired``: the planted − control paired differences of the metrics that have one.
    """
    paired = paired or {}
    out = []
    for family, metrics in families.items():
        for i, (metric, expected) in enumerate(metrics.items()):
            out.append(Detection(family, metric, expected, i == 0, planted.get(metric), control.get(metric),
                                 detection_status(planted.get(metric), control.get(metric), expected),
                                 paired.get(metric)))
    return out


@dataclass(frozen=True)
class Removal:
    variant: str
    metric: str
    expected: Change
    base: MetricValue | None
    variant_value: MetricValue | None
    control: MetricValue | None
    share: float | None  # (base - variant) / (base - control); None when undefined
    beyond_ci: bool  # variant better than base (towards the control) with disjoint CIs
    note: str
    paired: PairedDifference | None = None  # variant − base on the same items (None: not recomputable)

    @property
    def paired_beyond(self) -> bool:
        """The paired CI of variant − base lies on the control's side of 0 (below for an ``increase``)."""
        return self.paired is not None and self.paired.excludes_zero(-1 if self.expected == "increase" else 1)


def removal(variant: str, metric: str, expected: Change, base: MetricValue | None, value: MetricValue | None,
            control: MetricValue | None, planted_detected: bool, paired: PairedDifference | None = None) -> Removal:
    """The share of the planted effect ``variant`` removes on ``metric`` (``paired``: variant − base per item)."""
    if base is None or value is None or control is None:
        return Removal(variant, metric, expected, base, value, control, None, False, "metric missing", paired)
    b, v, c = _ci(base), _ci(value), _ci(control)
    beyond = bool(b and v and ((v[1] < b[0]) if expected == "increase" else (v[0] > b[1])))
    effect = base.value - control.value
    if not planted_detected:
        return Removal(variant, metric, expected, base, value, control, None, beyond,
                       "planted effect not detected on this metric: share undefined", paired)
    share = (base.value - value.value) / effect if effect else None
    return Removal(variant, metric, expected, base, value, control, share, beyond, "", paired)


def _fmt(mv: MetricValue | None) -> str:
    if mv is None or mv.value is None or not math.isfinite(mv.value):
        return "n/a"
    ci = _ci(mv)
    return f"{mv.value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{mv.value:.3f}"


def _num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.{digits}f}"


def _paired(p: PairedDifference | None) -> str:
    if p is None or not math.isfinite(p.value):
        return "n/a"
    if p.ci_low is None or p.ci_high is None:
        return _num(p.value)
    return f"{_num(p.value)} [{_num(p.ci_low)}, {_num(p.ci_high)}]"


def render_markdown(detections: list[Detection], removals: list[Removal], quality: Mapping[str, Mapping[str, MetricValue]],
                    planted_info: Mapping[str, object], across_draws: str = "") -> str:
    """``reports/calibration.md``; ``across_draws``: the draws' section (:mod:`.draws`), which then leads, and
    this run's count is labelled as one draw."""
    families = list(dict.fromkeys(d.family for d in detections))
    primary = {d.family: d for d in detections if d.primary}
    n_detected = sum(primary[f].detected for f in families)
    n_paired = sum(primary[f].paired_detected for f in families)
    lines = [
        "# Calibration: does every benchmark see the planted bias?",
        "",
        "The default model is a **known-answer fixture**: a synthetic gender bias was planted into its training "
        "batches (`model.pretrain.planted_bias`; a property of this toy model, not a finding about language). "
        "The *control* model is the same training with the planted sentences' genders counterbalanced. "
        "A benchmark **detects** the bias on a metric when the 95 % CIs of planted and control are apart in the "
        "expected direction; a family detects it when its primary metric (first row of the family) does.",
        "",
        "Planted bias: " + ", ".join(f"{k} = {v}" for k, v in planted_info.items()),
        "",
        *([across_draws] if across_draws else []),
        (f"This run is one draw: in it {n_detected} of {len(families)} families detect the planted bias (CIs "
         f"apart), {n_paired} of {len(families)} by the paired reading." if across_draws else
         f"**{n_detected} of {len(families)} benchmark families detect the planted bias** (CIs apart). "
         f"By the paired reading, {n_paired} of {len(families)}."),
        "",
        "## Verdict per family",
        "",
        "*Needed*: the planted − control difference at which these two CIs would just be apart (the planted "
        "CI's half-width towards the control plus the control's towards the planted model): an overlap far below "
        "it means the benchmark sees little of the planted bias, one near it a detection the CIs just missed.",
        "",
        "*Paired*: the same difference with a CI from resampling the items once for both models (both "
        "answered the same items, so what the items share drops out); *paired verdict* `detected` when that "
        "CI is apart from 0 in the expected direction. A benchmark detected only by the paired reading sees "
        "the planted bias, but too faintly for each model's own CI to show it.",
        "",
        "| family | primary metric | expected | planted [95% CI] | control [95% CI] | effect | needed | verdict "
        "| paired effect [95% CI] | paired verdict |",
        "|---|---|---|---|---|---:|---:|---|---:|---|",
    ]
    for f in families:
        d = primary[f]
        lines.append(f"| {f} | `{d.metric}` | {d.expected} | {_fmt(d.planted)} | {_fmt(d.control)} | "
                     f"{_num(d.effect)} | {_num(d.needed)} | {'**detected**' if d.detected else d.status} | "
                     f"{_paired(d.paired)} | {'**detected**' if d.paired_detected else d.paired_status} |")
    lines += ["", "## Every headline metric", "",
              "| family | metric | expected | planted [95% CI] | control [95% CI] | effect | needed | verdict "
              "| paired effect [95% CI] | paired verdict |",
              "|---|---|---|---|---|---:|---:|---|---:|---|"]
    for d in detections:
        lines.append(f"| {d.family} | `{d.metric}` | {d.expected} | {_fmt(d.planted)} | {_fmt(d.control)} | "
                     f"{_num(d.effect)} | {_num(d.needed)} | {'detected' if d.detected else d.status} | "
                     f"{_paired(d.paired)} | {d.paired_status} |")
    if removals:
        lines += ["", "## Mitigations on the planted model (held-out items)", "",
                  "Share of the planted effect removed = (base − variant) / (base − control): 1 = back to the "
                  "control, 0 = unchanged, < 0 = more bias. *Beyond CI*: the variant's CI is apart from the "
                  "base's, towards the control. *Paired change*: variant − base on the same items with a paired "
                  "CI; *paired beyond*: that CI on the control's side of 0. Every item scored here is held out "
                  "from every mitigation (LoRA trains on the GBEM-UA fine-tune professions and on occupations "
                  "no benchmark uses; the embedding edits take their target words from train and selection items "
                  "only, never a test profession or job).", "",
                  "| variant | metric | base [95% CI] | variant [95% CI] | control | removed | beyond CI "
                  "| paired change [95% CI] | paired beyond |",
                  "|---|---|---|---|---|---:|---|---:|---|"]
        for r in removals:
            share = "n/a" if r.share is None else f"{100 * r.share:.0f} %"
            note = f" ({r.note})" if r.note else ""
            lines.append(f"| {r.variant} | `{r.metric}` | {_fmt(r.base)} | {_fmt(r.variant_value)} | "
                         f"{_fmt(r.control)} | {share}{note} | {'yes' if r.beyond_ci else 'no'} | "
                         f"{_paired(r.paired)} | {'n/a' if r.paired is None else ('yes' if r.paired_beyond else 'no')} |")
    if quality:
        metrics = sorted({m for q in quality.values() for m in q})
        lines += ["", "## Language-modelling quality (do no harm)", "",
                  "Held-out text (`lm_quality`, lower is better); the gate refuses a variant that raises it "
                  "beyond its tolerance.", "",
                  "| variant | " + " | ".join(f"`{m}`" for m in metrics) + " |",
                  "|---|" + "---:|" * len(metrics)]
        for variant, q in quality.items():
            lines.append(f"| {variant} | " + " | ".join(_fmt(q.get(m)) for m in metrics) + " |")
    return "\n".join(lines) + "\n"


@dataclass
class CalibrationReport:
    detections: list[Detection]
    removals: list[Removal]
    markdown: str

    def families_detected(self) -> tuple[int, int]:
        primary = [d for d in self.detections if d.primary]
        return sum(d.detected for d in primary), len(primary)

    def families_detected_paired(self) -> int:
        return sum(d.paired_detected for d in self.detections if d.primary)

    def mlflow_metrics(self) -> dict[str, float]:
        """``calibration/...`` numbers for the stage's MLflow run."""
        out: dict[str, float] = {}
        detected, total = self.families_detected()
        out["calibration/families_detected"] = float(detected)
        out["calibration/families"] = float(total)
        out["calibration/families_detected_paired"] = float(self.families_detected_paired())
        for d in self.detections:
            out[f"calibration/detected/{d.metric}"] = float(d.detected)
            if d.effect is not None and math.isfinite(d.effect):
                out[f"calibration/effect/{d.metric}"] = d.effect
            if d.needed is not None and math.isfinite(d.needed):
                out[f"calibration/needed/{d.metric}"] = d.needed
            if d.paired is not None:
                out[f"calibration/paired_detected/{d.metric}"] = float(d.paired_detected)
                for part, x in (("effect", d.paired.value), ("ci_low", d.paired.ci_low), ("ci_high", d.paired.ci_high)):
                    if x is not None and math.isfinite(x):
                        out[f"calibration/paired_{part}/{d.metric}"] = x
        for r in self.removals:
            if r.share is not None and math.isfinite(r.share):
                out[f"calibration/removed/{r.variant}/{r.metric}"] = r.share
            if r.paired is not None:
                out[f"calibration/paired_beyond/{r.variant}/{r.metric}"] = float(r.paired_beyond)
        return out

    def table(self) -> list[dict[str, object]]:
        """One row per headline metric (``reports/calibration.csv``)."""
        rows = []
        for d in self.detections:
            row: dict[str, object] = {"family": d.family, "metric": d.metric, "expected": d.expected,
                                      "primary": d.primary, "verdict": d.status}
            for side, mv in (("planted", d.planted), ("control", d.control)):
                row[side] = None if mv is None else mv.value
                row[f"{side}_ci_low"] = None if mv is None else mv.ci_low
                row[f"{side}_ci_high"] = None if mv is None else mv.ci_high
            row["effect"] = d.effect
            row["needed"] = d.needed
            row["paired_effect"] = None if d.paired is None else d.paired.value
            row["paired_ci_low"] = None if d.paired is None else d.paired.ci_low
            row["paired_ci_high"] = None if d.paired is None else d.paired.ci_high
            row["paired_verdict"] = d.paired_status
            rows.append(row)
        return rows


def calibrate(families: Mapping[str, Mapping[str, Change]], mitigation_metrics: list[str],
              quality_metrics: list[str], base: Mapping[str, MetricValue], control: Mapping[str, MetricValue],
              variants: Mapping[str, Mapping[str, MetricValue]], planted_info: Mapping[str, object],
              paired: Mapping[str, PairedDifference] | None = None,
              paired_changes: Mapping[str, Mapping[str, PairedDifference]] | None = None,
              across_draws: str = "") -> CalibrationReport:
    """Detections, removed shares of every mitigation variant and the markdown report.

    ``base`` holds the planted (default) model's metrics, ``variants`` every other evaluated variant's;
    ``paired`` the planted − control paired differences, ``paired_changes`` per variant its variant − base
    ones (:func:`paired_differences`).
    """
    paired_changes = paired_changes or {}
    detections = detect_all(families, base, control, paired)
    by_metric = {d.metric: d for d in detections}
    removals = []
    for variant, metrics in variants.items():
        for metric in mitigation_metrics:
            d = by_metric.get(metric)
            expected = d.expected if d else "increase"
            removals.append(removal(variant, metric, expected, base.get(metric), metrics.get(metric),
                                    control.get(metric), bool(d and d.detected),
                                    paired_changes.get(variant, {}).get(metric)))
    quality = {name: {m: ms[m] for m in quality_metrics if m in ms}
               for name, ms in {"base": base, **variants, "control": control}.items()}
    quality = {k: v for k, v in quality.items() if v}
    return CalibrationReport(detections, removals,
                             render_markdown(detections, removals, quality, planted_info, across_draws))


def paired_differences(statistics: Mapping[str, Any], first: Mapping[str, Any], second: Mapping[str, Any], *,
                       samples: int, seed: int, confidence: float,
                       label: str = "planted vs control") -> dict[str, PairedDifference]:
    """``first`` − ``second`` on the same items for every metric in ``statistics`` both models have rows for.

    ``statistics``: metric name -> ``(benchmark, ItemStatistic)``; ``first`` / ``second``: each model's
    prediction tables keyed ``<benchmark>__<table>`` (as ``data/predictions/<variant>/`` names its files).
    A metric whose table either model lacks (a benchmark skipped on this model) is left out; ``label``
    names the two models in errors.
    """
    out = {}
    for metric, (benchmark, statistic) in statistics.items():
        table = f"{benchmark}__{statistic.table}"
        if table not in first or table not in second:
            continue
        out[metric] = paired_difference(first[table], second[table], statistic, samples=samples, seed=seed,
                                        confidence=confidence, where=f"{table} ({label}, {metric})")
    return out
