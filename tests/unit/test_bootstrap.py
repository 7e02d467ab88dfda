"""Bootstrap CIs: seeded, unit-aware, and equal to a naive resampling loop."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from biaslab.metrics.bootstrap import bootstrap_ci


def naive(frame, statistic, samples, seed, unit, confidence=0.95):
    rng = np.random.default_rng(seed)
    groups = list(frame.groupby(unit, sort=True).indices.values()) if unit else [np.array([i]) for i in range(len(frame))]
    stats = []
    for _ in range(samples):
        picks = rng.integers(0, len(groups), size=len(groups))
        stats.append(statistic(frame.iloc[np.concatenate([groups[p] for p in picks])]))
    a = (1 - confidence) / 2
    return tuple(np.quantile(stats, [a, 1 - a]))


@pytest.mark.parametrize("unit", [None, "group"])
def test_matches_naive_resampling(unit):
    frame = pd.DataFrame({"x": np.arange(30) % 7 / 7, "group": np.arange(30) // 4})
    stat = lambda f: float(f["x"].mean())  # noqa: E731
    got = bootstrap_ci(frame, stat, samples=200, seed=3, unit=unit)
    assert got == pytest.approx(naive(frame, stat, 200, 3, unit))


def test_ci_contains_the_estimate_and_is_seeded():
    frame = pd.DataFrame({"x": np.linspace(0, 1, 50)})
    stat = lambda f: float(f["x"].mean())  # noqa: E731
    low, high = bootstrap_ci(frame, stat, samples=300, seed=0)
    assert low < 0.5 < high
    assert bootstrap_ci(frame, stat, samples=300, seed=0) == (low, high)


def test_zero_samples_or_empty_frame_give_no_interval():
    assert bootstrap_ci(pd.DataFrame({"x": [1.0]}), lambda f: 1.0, samples=0, seed=0) == (None, None)
    assert bootstrap_ci(pd.DataFrame({"x": []}), lambda f: 1.0, samples=10, seed=0) == (None, None)
