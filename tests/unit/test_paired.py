"""Paired differences of two models on the same items: a naive loop, unit resampling, alignment errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from biaslab.metrics.paired import ItemStatistic, paired_difference


def _mean_of_x(frame) -> float:
    return float(np.asarray(frame["x"], dtype=float).mean())


def _every(frame: pd.DataFrame) -> pd.DataFrame:
    return frame


def _naive(a: pd.DataFrame, b: pd.DataFrame, groups: list[list[int]], samples: int, seed: int) -> list[float]:
    """Draw groups with the seeded generator bootstrap_ci uses; each draw: mean x of a's rows minus b's."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(samples):
        picks = rng.integers(0, len(groups), size=len(groups))
        rows = [r for g in picks for r in groups[g]]
        out.append(a["x"].to_numpy()[rows].mean() - b["x"].to_numpy()[rows].mean())
    return out


def test_paired_difference_equals_a_naive_loop_over_items_and_over_units():
    rng = np.random.default_rng(1)
    a = pd.DataFrame({"item": np.arange(30), "group": np.arange(30) // 3, "x": rng.normal(1.0, 1.0, 30)})
    b = a.assign(x=a["x"] - 0.2 + rng.normal(0, 0.05, 30))  # b: a's items, shifted, little noise of its own
    shuffled = b.sample(frac=1.0, random_state=0)  # rows in another order: matched by key, not position
    for unit, groups in ((None, [[i] for i in range(30)]), (("group",), [list(range(3 * g, 3 * g + 3)) for g in range(10)])):
        stat = ItemStatistic("t", _every, ("item",), _mean_of_x, unit)
        got = paired_difference(a, shuffled, stat, samples=200, seed=7)
        diffs = _naive(a, b, groups, 200, 7)
        assert got.value == pytest.approx(a["x"].mean() - b["x"].mean())
        assert (got.ci_low, got.ci_high) == pytest.approx(tuple(np.quantile(diffs, [0.025, 0.975])))
        assert got.n == 30 and got.units == len(groups)
    # what pairing buys: b's CI alone is as wide as a's, the paired one is narrow and excludes 0
    assert got.excludes_zero(+1) and not got.excludes_zero(-1)
    assert got.ci_high - got.ci_low < 0.1


def test_a_model_against_itself_differs_by_exactly_zero():
    a = pd.DataFrame({"item": range(5), "x": [0.1, 0.5, 0.2, 0.9, 0.3]})
    got = paired_difference(a, a.copy(), ItemStatistic("t", _every, ("item",), _mean_of_x), samples=50, seed=0)
    assert (got.value, got.ci_low, got.ci_high) == (0, 0, 0)
    assert not got.excludes_zero(+1) and not got.excludes_zero(-1)


def test_different_or_repeated_items_are_errors_naming_the_table():
    stat = ItemStatistic("t", _every, ("item",), _mean_of_x)
    a = pd.DataFrame({"item": [1, 2, 3], "x": [0.0, 1.0, 2.0]})
    with pytest.raises(ValueError, match=r"rubia__rubia_pairs: the two models were scored on different items \(3 vs 3 rows; e.g. \{'item': 3\} only in the first\)"):
        paired_difference(a, a.assign(item=[1, 2, 4]), stat, samples=10, seed=0, where="rubia__rubia_pairs")
    with pytest.raises(ValueError, match=r"second model's rows repeat the item \{'item': 2\}"):
        paired_difference(a, a.assign(item=[1, 2, 2]), stat, samples=10, seed=0)
    with pytest.raises(ValueError, match=r"lack the key column\(s\) \['item'\]"):
        paired_difference(a, a.drop(columns="item"), stat, samples=10, seed=0)


def test_the_statistic_reads_only_the_rows_it_selects():
    """A filter (RuBia's in_aggregates, a GBEM-UA pairing) is applied to both models before pairing."""
    a = pd.DataFrame({"item": range(4), "keep": [True, True, False, False], "x": [1.0, 1.0, 9.0, 9.0]})
    b = a.assign(x=[0.0, 0.0, -9.0, -9.0])
    stat = ItemStatistic("t", lambda t: t[t["keep"]], ("item",), _mean_of_x)
    got = paired_difference(a, b, stat, samples=20, seed=0)
    assert got.value == 1.0 and got.n == 2 and (got.ci_low, got.ci_high) == (1.0, 1.0)
