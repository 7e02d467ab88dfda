"""Metric values of the ClozeGender benchmark, with seeded bootstrap CIs, and the statistics they share.

The statistics read boolean / numeric columns (the same numbers as :func:`biaslab.metrics.association.bias_ratio`
/ ``human_bias_match`` / ``kl_bias`` on the string columns, tested) because string comparisons in 1000
resamples per group are slow.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from biaslab.benchmarks.base import EvalContext
from biaslab.metrics import association as assoc
from biaslab.metrics.bootstrap import Columns, bootstrap_ci
from biaslab.metrics.values import MetricValue

from .options import NAME

class MetricCollector:
    """Collects MetricValues under ``cloze_gender/<name>`` with seeded bootstrap CIs."""

    def __init__(self, ctx: EvalContext):
        self.ctx, self.values = ctx, {}

    def add(self, name: str, frame: pd.DataFrame, statistic: Callable[[Columns], float], direction: str,
            ideal: float | None, description: str, ci: bool = True, unit: str | None = None) -> float:
        value = float(statistic(frame)) if len(frame) else float("nan")
        low = high = None
        if ci and np.isfinite(value):
            low, high = bootstrap_ci(frame, statistic, samples=self.ctx.bootstrap_samples, seed=self.ctx.seed,
                                     confidence=self.ctx.confidence, unit=unit)
        self.values[f"{NAME}/{name}"] = MetricValue(value, direction, ideal, low, high, len(frame), description)
        return value


def him_ratio_statistic(f: Columns) -> float:
    n_m, n_w = int(np.asarray(f["prefers_m"]).sum()), int(np.asarray(f["prefers_w"]).sum())
    return n_m / (n_m + n_w) if n_m + n_w else float("nan")


def hb_match_statistic(f: Columns) -> float:
    return float(np.asarray(f["hb_match"]).mean())


def kl_statistic(f: Columns) -> float:
    return assoc.kl_bias(f["cgs_m"], f["cgs_w"])


def lm_kl_statistic(f: Columns) -> float:
    return assoc.kl_bias(f["p_m"], f["p_w"])


def hb_logodds_columns(frame: pd.DataFrame, keep: list[str] | None = None) -> pd.DataFrame:
    """What :func:`hb_logodds_gap_statistic` reads, from a frame with ``hb``, ``logprob_m`` and ``logprob_w``.

    ``logodds`` = ``log P(m) - log P(w)`` per row and the label as two boolean columns, so that a bootstrap
    resample does no string comparison; ``keep`` names columns carried along (the resampling unit).
    """
    labels = frame["hb"].to_numpy()
    slim = pd.DataFrame({
        "logodds": frame["logprob_m"].to_numpy(dtype=float) - frame["logprob_w"].to_numpy(dtype=float),
        "hb_is_m": labels == assoc.MALE,
        "hb_is_w": labels == assoc.FEMALE,
    }, index=frame.index)
    for column in keep or []:
        slim[column] = frame[column]
    return slim


def hb_logodds_gap_statistic(f: Columns) -> float:
    """Mean ``log P(m) - log P(w)`` of the rows labelled M minus that of the rows labelled W (natural log).

    The continuous reading of ``lm_hb_match``: how far the human-bias label moves the model's pronoun
    log-odds, whether or not the move crosses 0. A model that prefers one pronoun everywhere (the default
    model says "her" in nearly every GenderLex row) has an uninformative ``hb_match`` - it reads the label
    shares - while this difference still sees a stronger pull towards "him" where people say "him".
    Reads the columns of :func:`hb_logodds_columns`. NaN when one label is absent from ``f``.
    """
    logodds = np.asarray(f["logodds"], dtype=float)
    male, female = np.asarray(f["hb_is_m"], dtype=bool), np.asarray(f["hb_is_w"], dtype=bool)
    if not male.any() or not female.any():
        return float("nan")
    return float(logodds[male].mean() - logodds[female].mean())
