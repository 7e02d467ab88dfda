"""Spill-over margins from A/A pairs: how far re-training the same recipe moves what the rule reads.

The spill-over rule (``paired_no_spill_over``, docs/gate.md) refuses a variant when the paired CI high of
Δ badness (|variant − ideal| − |base − ideal| of another family's primary metric) reaches the family's
margin. A margin sized as the largest |A/A point difference| of N re-seeded pairs is below what the rule
reads (a CI bound, wider than the point) and, even on the same statistic, a new harmless pair exceeds the
largest of N exchangeable ones with probability 1/(N+1) - 1 in 4 for three pairs. So the margin here is
the upper one-sided ``level`` **prediction bound** for the next A/A pair's CI high of Δ badness, from the
sizing pairs (normal, Student t with N − 1 degrees of freedom):

    margin = mean(h) + t(level, N − 1) · sd(h) · sqrt(1 + 1/N),   rounded up to 3 decimals,

so a harmless re-training is refused with probability about 1 − ``level`` per family.

From a stored A/A pair (``metrics/draws/planted_draws.jsonl``: both models' values and the paired CI
[lo, hi] of Δ metric) the CI high of Δ badness is exact where both models lie on the same side of the ideal
(Δ badness = ±Δ metric item by item: ``hi`` above it, ``−lo`` below) and bounded by max(|lo|, |hi|) where they
straddle it (|Δ badness| ≤ |Δ metric| in every resample).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from biaslab.calibration.draws import AA_SUFFIX


def badness_ci_high(variant: float, base: float, lo: float, hi: float, ideal: float) -> tuple[float, bool]:
    """``(CI high of Δ badness, exact)`` from both models' values and the paired CI of Δ metric."""
    if variant >= ideal and base >= ideal:
        return hi, True
    if variant <= ideal and base <= ideal:
        return -lo, True
    return max(abs(lo), abs(hi)), False


def prediction_margin(highs: Sequence[float], level: float = 0.95) -> float:
    """The upper one-sided ``level`` prediction bound of the next value of ``highs``, rounded up to 3 decimals."""
    from scipy import stats

    n = len(highs)
    if n < 2:
        raise ValueError(f"a prediction bound needs at least two A/A pairs, got {n}")
    mean = sum(highs) / n
    sd = math.sqrt(sum((h - mean) ** 2 for h in highs) / (n - 1))
    bound = mean + float(stats.t.ppf(level, n - 1)) * sd * math.sqrt(1 + 1 / n)
    return math.ceil(round(bound * 1000, 9)) / 1000


def aa_highs(draws: Sequence[Mapping[str, Any]], family: str, ideal: float,
             items: str = "test") -> list[tuple[str, float, bool]]:
    """``(pair, CI high of Δ badness, exact)`` of every A/A pair of ``draws`` holding ``family`` (re-seeded
    control as the variant, the control as the base), read on the test items (a draw's ``families``) or, with
    ``items="select"``, on the selection items (its ``select``: ``bench/planted_draws.py --select``)."""
    if items not in ("test", "select"):
        raise ValueError(f"items must be 'test' or 'select', got {items!r}")
    out = []
    for d in draws:
        entry = d.get("families" if items == "test" else "select", {}).get(family)
        if not d["recipe"].endswith(AA_SUFFIX) or entry is None or not entry.get("paired"):
            continue
        _, lo, hi = entry["paired"]
        high, exact = badness_ci_high(entry["planted"][0], entry["control"][0], lo, hi, ideal)
        out.append((f"{d['recipe']} seed {d['seed']}", high, exact))
    return out


def leave_one_out(highs: Sequence[float], level: float = 0.95) -> list[tuple[float, bool]]:
    """Each pair against the margin the other pairs size: ``(margin, refused)`` - a pair never judges its own."""
    out = []
    for k, h in enumerate(highs):
        margin = prediction_margin([x for j, x in enumerate(highs) if j != k], level)
        out.append((margin, h >= margin))
    return out
