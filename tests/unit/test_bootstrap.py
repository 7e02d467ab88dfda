"""Bootstrap CIs: seeded, unit-aware, and equal to a naive resampling loop (tests/bootstrap_reference.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bootstrap_reference import BOOTSTRAP_USERS, dataframe_bootstrap_ci

import biaslab
from biaslab.metrics.bootstrap import ResampledColumns, bootstrap_ci


@pytest.mark.parametrize("unit", [None, "group"])
def test_matches_naive_resampling(unit):
    frame = pd.DataFrame({"x": np.arange(30) % 7 / 7, "group": np.arange(30) // 4})
    stat = lambda f: float(f["x"].mean())  # noqa: E731
    got = bootstrap_ci(frame, stat, samples=200, seed=3, unit=unit)
    assert got == pytest.approx(dataframe_bootstrap_ci(frame, stat, samples=200, seed=3, unit=unit), rel=1e-12)


def test_ci_contains_the_estimate_and_is_seeded():
    frame = pd.DataFrame({"x": np.linspace(0, 1, 50)})
    stat = lambda f: float(f["x"].mean())  # noqa: E731
    low, high = bootstrap_ci(frame, stat, samples=300, seed=0)
    assert low < 0.5 < high
    assert bootstrap_ci(frame, stat, samples=300, seed=0) == (low, high)


def test_zero_samples_or_empty_frame_give_no_interval():
    assert bootstrap_ci(pd.DataFrame({"x": [1.0]}), lambda f: 1.0, samples=0, seed=0) == (None, None)
    assert bootstrap_ci(pd.DataFrame({"x": []}), lambda f: 1.0, samples=10, seed=0) == (None, None)


def test_a_resample_is_a_column_view_of_the_picked_rows():
    frame = pd.DataFrame({"x": [10.0, 20.0, 30.0], "label": ["a", "b", "c"]})
    view = ResampledColumns.of(frame, np.array([2, 0, 2]))
    assert view["x"].tolist() == [30.0, 10.0, 30.0] and view["label"].tolist() == ["c", "a", "c"]
    assert len(view) == 3 and not view.empty and view.columns == ["x", "label"]
    assert view["x"] is view["x"]  # taken once
    assert ResampledColumns.of(frame.iloc[0:0]).empty
    with pytest.raises(KeyError, match="'y' is not in the resampled frame"):
        view["y"]


def test_duplicate_column_names_are_refused():
    frame = pd.DataFrame([[1.0, 2.0]], columns=["x", "x"])
    with pytest.raises(ValueError, match="unique column names"):
        bootstrap_ci(frame, lambda f: 1.0, samples=5, seed=0)


def test_the_reference_lists_every_module_that_bootstraps():
    """tests/bootstrap_reference.py patches these modules; a new caller must be added there (and compared)."""
    src = Path(biaslab.__file__).parent
    callers = {
        "biaslab." + ".".join(path.relative_to(src).with_suffix("").parts)
        for path in src.rglob("*.py")
        if "bootstrap_ci(" in path.read_text(encoding="utf-8") and path.name != "bootstrap.py"
    }
    assert callers == set(BOOTSTRAP_USERS)

