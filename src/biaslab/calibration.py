"""Calibration of the benchmarks on a known answer: the planted model against its counterbalanced control.

The default model carries a planted gender bias (``model.pretrain.planted_bias``); the control is the same
training with the planted sentences' genders counterbalanced. A benchmark *detects* the planted bias on a
metric when the two 95 % CIs are apart in the expected direction (``increase``: planted CI low above the
control's CI high; ``decrease``: the mirror image). ``calibrate.families`` lists, per benchmark family, its
headline metrics and the expected change from control to planted; the first metric of a family is its
*primary* metric, and the family detects the bias when its primary metric does. Next to each effect the
report gives the effect these CIs *needed* to be apart (:attr:`Detection.needed`), so an overlap reads as
"sees little" or as "just missed".

For every mitigation the share of the planted effect it removes is ``(base - variant) / (base - control)``
(1 = back to the control, 0 = no change, negative = worse), reported with whether the variant is better
than the base beyond both CIs. It is only defined where the planted effect is detected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

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

    @property
    def detected(self) -> bool:
        return self.status == "detected"

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


def detect_all(families: Mapping[str, Mapping[str, Change]], planted: Mapping[str, MetricValue],
               control: Mapping[str, MetricValue]) -> list[Detection]:
    """One :class:`Detection` per configured metric, families and metrics in configuration order."""
    out = []
    for family, metrics in families.items():
        for i, (metric, expected) in enumerate(metrics.items()):
            out.append(Detection(family, metric, expected, i == 0, planted.get(metric), control.get(metric),
                                 detection_status(planted.get(metric), control.get(metric), expected)))
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


def removal(variant: str, metric: str, expected: Change, base: MetricValue | None, value: MetricValue | None,
            control: MetricValue | None, planted_detected: bool) -> Removal:
    """The share of the planted effect ``variant`` removes on ``metric``."""
    if base is None or value is None or control is None:
        return Removal(variant, metric, expected, base, value, control, None, False, "metric missing")
    b, v, c = _ci(base), _ci(value), _ci(control)
    beyond = bool(b and v and ((v[1] < b[0]) if expected == "increase" else (v[0] > b[1])))
    effect = base.value - control.value
    if not planted_detected:
        return Removal(variant, metric, expected, base, value, control, None, beyond,
                       "planted effect not detected on this metric: share undefined")
    share = (base.value - value.value) / effect if effect else None
    return Removal(variant, metric, expected, base, value, control, share, beyond, "")


def _fmt(mv: MetricValue | None) -> str:
    if mv is None or mv.value is None or not math.isfinite(mv.value):
        return "n/a"
    ci = _ci(mv)
    return f"{mv.value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{mv.value:.3f}"


def _num(x: float | None, digits: int = 3) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:+.{digits}f}"


def render_markdown(detections: list[Detection], removals: list[Removal], quality: Mapping[str, Mapping[str, MetricValue]],
                    planted_info: Mapping[str, object]) -> str:
    """``reports/calibration.md``."""
    families = list(dict.fromkeys(d.family for d in detections))
    primary = {d.family: d for d in detections if d.primary}
    n_detected = sum(primary[f].detected for f in families)
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
        f"**{n_detected} of {len(families)} benchmark families detect the planted bias.**",
        "",
        "## Verdict per family",
        "",
        "*Needed*: the planted − control difference at which these two CIs would just be apart (the planted "
        "CI's half-width towards the control plus the control's towards the planted model): an overlap far below "
        "it means the benchmark sees little of the planted bias, one near it a detection the CIs just missed.",
        "",
        "| family | primary metric | expected | planted [95% CI] | control [95% CI] | effect | needed | verdict |",
        "|---|---|---|---|---|---:|---:|---|",
    ]
    for f in families:
        d = primary[f]
        lines.append(f"| {f} | `{d.metric}` | {d.expected} | {_fmt(d.planted)} | {_fmt(d.control)} | "
                     f"{_num(d.effect)} | {_num(d.needed)} | {'**detected**' if d.detected else d.status} |")
    lines += ["", "## Every headline metric", "",
              "| family | metric | expected | planted [95% CI] | control [95% CI] | effect | needed | verdict |",
              "|---|---|---|---|---|---:|---:|---|"]
    for d in detections:
        lines.append(f"| {d.family} | `{d.metric}` | {d.expected} | {_fmt(d.planted)} | {_fmt(d.control)} | "
                     f"{_num(d.effect)} | {_num(d.needed)} | {'detected' if d.detected else d.status} |")
    if removals:
        lines += ["", "## Mitigations on the planted model (held-out items)", "",
                  "Share of the planted effect removed = (base − variant) / (base − control): 1 = back to the "
                  "control, 0 = unchanged, < 0 = more bias. *Beyond CI*: the variant's CI is apart from the "
                  "base's, towards the control. Every item scored here is held out from every mitigation (LoRA "
                  "trains on the GBEM-UA fine-tune professions and on occupations no benchmark uses; the "
                  "embedding edits use word lists, no items).", "",
                  "| variant | metric | base [95% CI] | variant [95% CI] | control | removed | beyond CI |",
                  "|---|---|---|---|---|---:|---|"]
        for r in removals:
            share = "n/a" if r.share is None else f"{100 * r.share:.0f} %"
            note = f" ({r.note})" if r.note else ""
            lines.append(f"| {r.variant} | `{r.metric}` | {_fmt(r.base)} | {_fmt(r.variant_value)} | "
                         f"{_fmt(r.control)} | {share}{note} | {'yes' if r.beyond_ci else 'no'} |")
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

    def mlflow_metrics(self) -> dict[str, float]:
        """``calibration/...`` numbers for the stage's MLflow run."""
        out: dict[str, float] = {}
        detected, total = self.families_detected()
        out["calibration/families_detected"] = float(detected)
        out["calibration/families"] = float(total)
        for d in self.detections:
            out[f"calibration/detected/{d.metric}"] = float(d.detected)
            if d.effect is not None and math.isfinite(d.effect):
                out[f"calibration/effect/{d.metric}"] = d.effect
            if d.needed is not None and math.isfinite(d.needed):
                out[f"calibration/needed/{d.metric}"] = d.needed
        for r in self.removals:
            if r.share is not None and math.isfinite(r.share):
                out[f"calibration/removed/{r.variant}/{r.metric}"] = r.share
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
            rows.append(row)
        return rows


def calibrate(families: Mapping[str, Mapping[str, Change]], mitigation_metrics: list[str],
              quality_metrics: list[str], base: Mapping[str, MetricValue], control: Mapping[str, MetricValue],
              variants: Mapping[str, Mapping[str, MetricValue]], planted_info: Mapping[str, object]) -> CalibrationReport:
    """Detections, removed shares of every mitigation variant and the markdown report.

    ``base`` holds the planted (default) model's metrics, ``variants`` every other evaluated variant's.
    """
    detections = detect_all(families, base, control)
    by_metric = {d.metric: d for d in detections}
    removals = []
    for variant, metrics in variants.items():
        for metric in mitigation_metrics:
            d = by_metric.get(metric)
            expected = d.expected if d else "increase"
            removals.append(removal(variant, metric, expected, base.get(metric), metrics.get(metric),
                                    control.get(metric), bool(d and d.detected)))
    quality = {name: {m: ms[m] for m in quality_metrics if m in ms}
               for name, ms in {"base": base, **variants, "control": control}.items()}
    quality = {k: v for k, v in quality.items() if v}
    return CalibrationReport(detections, removals, render_markdown(detections, removals, quality, planted_info))
