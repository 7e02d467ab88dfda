"""ClozeGender association measures against numbers worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from biaslab.metrics import association as assoc


def test_cgs_is_probability_to_the_power_one_minus_similarity():
    # 0.25^(1-0.5) = 0.5 ; 0.25^(1-0) = 0.25 ; OOV (NaN) counts as sim 0 (authors' code) ; sim<0 sharpens
    got = assoc.cgs([0.25, 0.25, 0.25, 0.25], [0.5, 0.0, np.nan, -1.0])
    assert got == pytest.approx([0.5, 0.25, 0.25, 0.0625])


def test_bias_ratio_excludes_ties_and_hb_match_counts_them_as_misses():
    pref = assoc.preferred_gender([0.3, 0.1, 0.2, 0.5], [0.1, 0.3, 0.2, 0.4])
    assert list(pref) == ["M", "W", "equal", "M"]
    assert assoc.bias_ratio(pref) == pytest.approx(2 / 3)  # 2 M of 3 decided rows
    # row 0 matches; row 1 (W vs M) and row 3 (M vs W) do not; the tie (row 2) never matches
    assert assoc.human_bias_match(pref, ["M", "M", "W", "W"]) == pytest.approx(1 / 4)
    assert math.isnan(assoc.bias_ratio(["equal"]))


def test_kl_forms():
    assert assoc.kl_binary(0.5, 0.5) == 0.0
    assert assoc.kl_binary(1.0, 0.5) == pytest.approx(math.log(2))
    assert assoc.kl_binary(0.75, 0.5) == pytest.approx(0.75 * math.log(1.5) + 0.25 * math.log(0.5))
    assert assoc.kl_binary(0.5, 0.0) == math.inf
    assert assoc.kl_ratio_uniform(["M", "M", "M", "W"]) == pytest.approx(assoc.kl_binary(0.75, 0.5))
    # rows (3, 1) -> q = 0.75 ; (1, 1) -> q = 0.5 (KL 0)
    expected = (0.75 * math.log(1.5) + 0.25 * math.log(0.5)) / 2
    assert assoc.kl_row_uniform([3.0, 1.0], [1.0, 1.0]) == pytest.approx(expected)
    assert assoc.kl_row_uniform([1.0, 0.0], [0.0, 1.0]) == pytest.approx(math.log(2))
    # model 3/4 him vs humans 1/2 M
    assert assoc.kl_ratio_human(["M", "M", "M", "W"], ["M", "W", "M", "W"]) == pytest.approx(assoc.kl_binary(0.75, 0.5))


def test_weat_association_and_effect_size_by_hand():
    a = [np.array([1.0, 0.0])]  # male attribute direction
    b = [np.array([0.0, 1.0])]  # female attribute direction
    assert assoc.weat_association(np.array([2.0, 0.0]), a, b) == pytest.approx(1.0)
    assert assoc.weat_association(np.array([1.0, 1.0]), a, b) == pytest.approx(0.0)
    # s_x = [1, 0], s_y = [-1]: mean diff 0.5 - (-1) = 1.5 ; std([1, 0, -1], ddof=1) = 1
    assert assoc.weat_effect_size([1.0, 0.0], [-1.0]) == pytest.approx(1.5)
    assert math.isnan(assoc.weat_effect_size([1.0], []))
    s = {"crafted": 1.0, "made": 0.0, "cooked": -1.0}
    d = assoc.weat_context_words(["crafted", "made", "cooked", "crafted", "unknown"], ["M", "M", "W", "M", "W"], s)
    assert d == pytest.approx(1.5)  # X = {crafted, made} (unique), Y = {cooked}; OOV word dropped
    flipped = assoc.weat_context_words(["crafted", "made", "cooked"], ["W", "W", "M"], s)
    assert flipped == pytest.approx(-1.5)


def test_pearson():
    assert assoc.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert math.isnan(assoc.pearson([1, 2], [1, 2]))
    assert math.isnan(assoc.pearson([1, 1, 1], [1, 2, 3]))
