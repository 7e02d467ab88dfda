"""Seeded percentile bootstrap confidence intervals over items (or groups of items).

Resampling is over the *units that are independent*: for paired benchmarks a unit is a pair, for
GBEM-UA a profession (its 8 variants move together), so the interval is not too narrow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd


def bootstrap_ci(
    frame: pd.DataFrame,
    statistic: Callable[[pd.DataFrame], float],
    *,
    samples: int,
    seed: int,
    confidence: float = 0.95,
    unit: str | Sequence[str] | None = None,
) -> tuple[float | None, float | None]:
    """Percentile CI of ``statistic(frame)`` resampling rows (or whole ``unit`` groups) with replacement.

    Returns ``(None, None)`` when ``samples == 0`` or the frame is empty; NaN statistics of a resample
    (e.g. an F1 with no positives) are dropped from the percentile computation.
    """
    if samples <= 0 or frame.empty:
        return None, None
    rng = np.random.default_rng(seed)
    if unit is None:
        n, flat, starts, sizes = len(frame), None, None, None
    else:
        groups = list(frame.groupby(unit, sort=True).indices.values())
        n = len(groups)
        sizes = np.array([len(g) for g in groups])
        flat = np.concatenate(groups)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    stats = []
    for _ in range(samples):
        picks = rng.integers(0, n, size=n)
        if flat is None:
            rows = picks
        else:
            # rows of every picked group, vectorised: start of each pick repeated over its size + 0..size-1
            lengths = sizes[picks]
            offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
            rows = flat[np.repeat(starts[picks], lengths) + np.arange(lengths.sum()) - offsets]
        value = statistic(frame.iloc[rows])
        if value is not None and np.isfinite(value):
            stats.append(value)
    if not stats:
        return None, None
    alpha = (1 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1 - alpha])
    return float(low), float(high)
