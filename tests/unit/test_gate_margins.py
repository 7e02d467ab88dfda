"""Spill-over margins from A/A pairs (biaslab.calibration.margins), checked against direct computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from biaslab.calibration.margins import aa_highs, badness_ci_high, leave_one_out, prediction_margin


def test_ci_high_of_the_badness_difference_from_a_stored_pair():
    assert badness_ci_high(0.60, 0.55, 0.01, 0.09, 0.5) == (0.09, True)  # both above the ideal: Δ badness = Δ
    assert badness_ci_high(0.40, 0.45, -0.09, -0.01, 0.5) == (0.09, True)  # both below: Δ badness = −Δ
    assert badness_ci_high(0.52, 0.49, -0.01, 0.07, 0.5) == (0.07, False)  # straddling: max(|lo|, |hi|) bounds it


def test_the_margin_is_the_prediction_bound_of_the_next_pair():
    highs = [0.0084, 0.0185, 0.0137, 0.0202]
    x = np.array(highs)
    bound = x.mean() + stats.t.ppf(0.95, 3) * x.std(ddof=1) * math.sqrt(1 + 1 / 4)
    assert prediction_margin(highs) == math.ceil(bound * 1000) / 1000 == 0.030
    assert prediction_margin(highs, 0.99) > prediction_margin(highs)
    with pytest.raises(ValueError, match="at least two A/A pairs"):
        prediction_margin([0.01])


def test_under_its_own_assumptions_a_harmless_pair_is_refused_about_one_time_in_twenty():
    rng = np.random.default_rng(0)
    refused = sum(h >= prediction_margin(list(sizing))
                  for sizing, h in ((rng.normal(0.03, 0.01, 3), rng.normal(0.03, 0.01)) for _ in range(2000)))
    assert 0.03 < refused / 2000 < 0.07


def test_leave_one_out_never_judges_a_pair_by_its_own_margin():
    highs = [0.01, 0.02, 0.015, 0.2]
    out = leave_one_out(highs)
    assert out[3] == (prediction_margin(highs[:3]), True)
    assert out[0][0] == prediction_margin(highs[1:])


def test_highs_are_read_from_the_a_a_rows_only():
    draws = [{"recipe": "committed", "seed": 0, "families": {"f": {"planted": [0.6], "control": [0.5],
                                                                    "paired": [0.1, 0.05, 0.15]}}},
             {"recipe": "committed/A-A", "seed": 0, "families": {"f": {"planted": [0.52], "control": [0.55],
                                                                        "paired": [-0.03, -0.06, 0.01]}}}]
    assert aa_highs(draws, "f", 0.5) == [("committed/A-A seed 0", 0.01, True)]
