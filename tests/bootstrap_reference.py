"""The bootstrap as it was before resamples became column views: every resample a DataFrame (``iloc``).

Benchmark tests run their metrics once with :func:`biaslab.metrics.bootstrap.bootstrap_ci` and once with
this reference patched in, and compare every value and CI: a statistic that reads a resample differently
from a DataFrame (a pandas-only method, NaN skipping) shows up as a different interval.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

# every module that calls bootstrap_ci (tests/unit/test_bootstrap.py checks the list against the source)
BOOTSTRAP_USERS = (
    "biaslab.benchmarks.cloze_gender.collector",
    "biaslab.benchmarks.gbem_ua.metrics",
    "biaslab.benchmarks.lm_quality",
    "biaslab.benchmarks.occugender.metrics",
    "biaslab.benchmarks.pair_preference",
    "biaslab.calibration.spike_in",
    "biaslab.metrics.paired",
    "biaslab.registry.paired_rules",
)


def dataframe_bootstrap_ci(frame, statistic, *, samples, seed, confidence=0.95, unit=None):
    """The same seeded draws as ``bootstrap_ci``; each resample handed over as ``frame.iloc[rows]``."""
    if samples <= 0 or frame.empty:
        return None, None
    rng = np.random.default_rng(seed)
    groups = (list(frame.groupby(unit, sort=True).indices.values()) if unit is not None
              else [np.array([i]) for i in range(len(frame))])
    stats = []
    for _ in range(samples):
        picks = rng.integers(0, len(groups), size=len(groups))
        value = statistic(frame.iloc[np.concatenate([groups[p] for p in picks])])
        if value is not None and np.isfinite(value):
            stats.append(value)
    if not stats:
        return None, None
    alpha = (1 - confidence) / 2
    low, high = np.quantile(stats, [alpha, 1 - alpha])
    return float(low), float(high)


@contextmanager
def resampling_dataframes(monkeypatch) -> Iterator[None]:
    """Within the block, every benchmark bootstraps with :func:`dataframe_bootstrap_ci`."""
    with monkeypatch.context() as patch:
        for name in BOOTSTRAP_USERS:
            patch.setattr(importlib.import_module(name), "bootstrap_ci", dataframe_bootstrap_ci)
        yield


def assert_same_metrics(got: dict, reference: dict, rel: float = 1e-12) -> None:
    """Equal metric names, values and CI bounds (to rounding: a resample's sums may run in another order)."""
    assert set(got) == set(reference)
    checked = 0
    for name, value in reference.items():
        for field in ("value", "ci_low", "ci_high"):
            a, b = getattr(got[name], field), getattr(value, field)
            if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
                assert (a is None and b is None) or (math.isnan(a) and math.isnan(b)), (name, field, a, b)
                continue
            assert math.isclose(a, b, rel_tol=rel, abs_tol=1e-15), (name, field, a, b)
            checked += field != "value"
    assert checked, "no metric had a CI: the comparison checked nothing"


def metrics_both_ways(monkeypatch, compute) -> tuple[dict, dict]:
    """``compute()`` with the column-view bootstrap, then with :func:`dataframe_bootstrap_ci`."""
    got = compute()
    with resampling_dataframes(monkeypatch):
        reference = compute()
    return got, reference
