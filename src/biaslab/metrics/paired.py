"""Two models scored on the same items: the difference of a metric with a *paired* bootstrap CI.

A benchmark's CI says how precisely one model's metric is known from the items drawn. When two models
(the planted default model and its control) answer the *same* items, most of that item-to-item noise is
shared: an item that is hard for one model is hard for the other. Whether the two CIs are apart ignores
that, and asks for a difference about twice the half-width of either CI. The paired reading resamples the
items once per bootstrap round and recomputes the metric on *both* models' rows of those items, so the
CI of the difference keeps what the items share out of it (on the default run 83 % of RuBia's gender
pairs get the same verdict from both models).

An :class:`ItemStatistic` is a metric written as a function of per-item prediction rows: the table it
reads (a benchmark's ``predictions``), the rows and columns (``rows``), what names an item in both models'
tables (``key``), the resampling unit of the metric's own CI (``unit``) and the statistic itself, which
must give the metric's value on the full rows (each benchmark's tests check that it does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from biaslab.metrics.bootstrap import Columns, bootstrap_ci


@dataclass(frozen=True)
class ItemStatistic:
    """One metric as a statistic of per-item rows of one prediction table (see the module docstring)."""

    table: str  # the benchmark's predictions key (file data/predictions/<variant>/<benchmark>__<table>.parquet)
    rows: Callable[[pd.DataFrame], pd.DataFrame]  # the rows and columns the statistic reads, from that table
    key: tuple[str, ...]  # columns of rows() naming an item; each key once per model
    statistic: Callable[[Columns], float]
    unit: tuple[str, ...] | None = None  # resampled whole, as in the metric's own CI; None = a row

    def value(self, table: pd.DataFrame) -> float:
        """The metric on one model's full prediction table."""
        return float(self.statistic(self.rows(table)))


@dataclass(frozen=True)
class PairedDifference:
    """``statistic(a) - statistic(b)`` on the same items, with its paired bootstrap CI."""

    value: float
    ci_low: float | None
    ci_high: float | None
    n: int  # items (rows) compared
    units: int  # resampling units

    def excludes_zero(self, sign: int) -> bool:
        """The CI lies entirely on the side of 0 that ``sign`` (+1 or -1) names."""
        if self.ci_low is None or self.ci_high is None:
            return False
        return self.ci_low > 0 if sign > 0 else self.ci_high < 0


class _Side:
    """One model's columns of a resample of the joined table (the statistic sees its own column names)."""

    __slots__ = ("_view", "_prefix")

    def __init__(self, view: Columns, prefix: str):
        self._view, self._prefix = view, prefix

    def __getitem__(self, column: Any) -> np.ndarray:
        return np.asarray(self._view[f"{self._prefix}{column}"])

    def __len__(self) -> int:
        return len(self._view)

    @property
    def empty(self) -> bool:
        return len(self._view) == 0

    @property
    def columns(self) -> list[Any]:
        n = len(self._prefix)
        return [c[n:] for c in self._view.columns if isinstance(c, str) and c.startswith(self._prefix)]


_A, _B = "a\x1f", "b\x1f"  # column prefixes of the two models in the joined table


def _item(key: Sequence[str], values: Any) -> str:
    """``{'pair_id': 3}``: an item's key as a reader of the error wants it (plain Python values)."""
    values = values if isinstance(values, tuple) else (values,)
    return str({k: (v.item() if hasattr(v, "item") else v) for k, v in zip(key, values)})


def aligned(a: pd.DataFrame, b: pd.DataFrame, key: Sequence[str], where: str = "") -> tuple[pd.DataFrame, pd.DataFrame]:
    """``a`` and ``b`` sorted by ``key``, row for row the same items; a clear error when they are not."""
    key = list(key)
    at = f"{where}: " if where else ""
    for name, frame in (("first", a), ("second", b)):
        missing = [c for c in key if c not in frame.columns]
        if missing:
            raise ValueError(f"{at}the {name} model's rows lack the key column(s) {missing}")
        duplicated = frame.duplicated(key)
        if duplicated.any():
            first = frame.loc[duplicated, key].iloc[0]
            raise ValueError(f"{at}the {name} model's rows repeat the item {_item(key, tuple(first))}; "
                             "a paired comparison needs each item once")
    a = a.sort_values(key, kind="stable").reset_index(drop=True)
    b = b.sort_values(key, kind="stable").reset_index(drop=True)
    keys_a = pd.MultiIndex.from_frame(a[key])
    keys_b = pd.MultiIndex.from_frame(b[key])
    if len(keys_a) != len(keys_b) or not keys_a.equals(keys_b):
        only_a = keys_a.difference(keys_b)
        only_b = keys_b.difference(keys_a)
        example = f"e.g. {_item(key, only_a[0])} only in the first" if len(only_a) else (
            f"e.g. {_item(key, only_b[0])} only in the second" if len(only_b) else "repeated keys")
        raise ValueError(f"{at}the two models were scored on different items ({len(a)} vs {len(b)} rows; "
                         f"{example}); a paired comparison needs the same items")
    return a, b


def paired_difference(
    a_table: pd.DataFrame,
    b_table: pd.DataFrame,
    item_statistic: ItemStatistic,
    *,
    samples: int,
    seed: int,
    confidence: float = 0.95,
    where: str = "",
) -> PairedDifference:
    """The metric of model ``a`` minus that of model ``b`` on the same items, with a paired percentile CI.

    Each bootstrap round draws the units (items, or the metric's own groups of items) once and evaluates the
    statistic on both models' rows of them. ``where`` names the table in errors.
    """
    a, b = aligned(item_statistic.rows(a_table), item_statistic.rows(b_table), item_statistic.key, where)
    statistic = item_statistic.statistic
    value = float(statistic(a)) - float(statistic(b))
    unit = list(item_statistic.unit) if item_statistic.unit else None
    joined = pd.concat([a.add_prefix(_A), b.add_prefix(_B)], axis=1)
    if unit:
        joined[unit] = a[unit]
    difference = lambda view: float(statistic(_Side(view, _A))) - float(statistic(_Side(view, _B)))  # noqa: E731
    low, high = bootstrap_ci(joined, difference, samples=samples, seed=seed, confidence=confidence, unit=unit)
    units = len(a.groupby(unit, sort=False)) if unit and len(a) else len(a)
    return PairedDifference(value, low, high, int(len(a)), int(units))


__all__ = ["ItemStatistic", "PairedDifference", "aligned", "paired_difference"]
