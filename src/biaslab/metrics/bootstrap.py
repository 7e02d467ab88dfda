"""Seeded percentile bootstrap confidence intervals over items (or groups of items).

Resampling is over the *units that are independent*: for paired benchmarks a unit is a pair, for
GBEM-UA a profession (its 8 variants move together), so the interval is not too narrow.

A resample is handed to the statistic as :class:`ResampledColumns` - the picked rows, column by column as
NumPy arrays - not as a DataFrame: building 1000 DataFrames per metric cost more than half of an
evaluation (28 s of 71 s on the default model, 2 cores). A statistic therefore reads its columns with
``np.asarray(frame[column])`` (or NumPy methods such as ``.mean()``), which works on both a DataFrame (the
point value) and a resample; ``len(frame)`` and ``frame.empty`` work on both too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd


class ResampledColumns:
    """The rows ``rows`` of a frame as a read-only mapping column name -> NumPy array (taken on first read).

    Only what statistics need: ``view[column]``, ``len(view)`` (rows), ``view.empty`` and ``view.columns``.
    Columns a statistic never reads are never copied, so a wide frame costs no more than a narrow one.
    """

    __slots__ = ("_arrays", "_rows", "_taken")

    def __init__(self, arrays: dict[Any, np.ndarray], rows: np.ndarray):
        self._arrays, self._rows, self._taken = arrays, rows, {}

    @classmethod
    def of(cls, frame: pd.DataFrame, rows: np.ndarray | None = None) -> ResampledColumns:
        """A view of ``frame``'s rows ``rows`` (positions; every row, in order, when None)."""
        return cls(column_arrays(frame), np.arange(len(frame)) if rows is None else np.asarray(rows))

    def __getitem__(self, column: Any) -> np.ndarray:
        taken = self._taken.get(column)
        if taken is None:
            if column not in self._arrays:
                raise KeyError(f"column {column!r} is not in the resampled frame (columns: {list(self._arrays)})")
            taken = self._taken[column] = self._arrays[column][self._rows]
        return taken

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def empty(self) -> bool:
        return len(self._rows) == 0

    @property
    def columns(self) -> list[Any]:
        return list(self._arrays)


Columns = pd.DataFrame | ResampledColumns  # what a bootstrapped statistic reads: the whole frame or one resample


def column_mean(column: str) -> Callable[[Columns], float]:
    """The mean of one column as a float (a share, for a boolean column), as a bootstrap statistic."""
    return lambda frame: float(np.asarray(frame[column], dtype=float).mean())


def column_arrays(frame: pd.DataFrame) -> dict[Any, np.ndarray]:
    """Every column of ``frame`` as a NumPy array (no copy where pandas can avoid one)."""
    if frame.columns.has_duplicates:
        raise ValueError(f"bootstrap needs unique column names, got {list(frame.columns)}")
    return {column: frame[column].to_numpy() for column in frame.columns}


def bootstrap_ci(
    frame: pd.DataFrame,
    statistic: Callable[[Columns], float],
    *,
    samples: int,
    seed: int,
    confidence: float = 0.95,
    unit: str | Sequence[str] | None = None,
) -> tuple[float | None, float | None]:
    """Percentile CI of ``statistic(frame)`` resampling rows (or whole ``unit`` groups) with replacement.

    ``statistic`` receives each resample as :class:`ResampledColumns`. Returns ``(None, None)`` when
    ``samples == 0`` or the frame is empty; NaN statistics of a resample (e.g. an F1 with no positives)
    are dropped from the percentile computation.
    """
    if samples <= 0 or frame.empty:
        return None, None
    rng = np.random.default_rng(seed)
    arrays = column_arrays(frame)
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
        value = statistic(ResampledColumns(arrays, rows))
        if value is not None and np.isfinite(value):
            stats.append(value)
    if not stats:
        return None, None
    alpha = (1 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1 - alpha])
    return float(low), float(high)
