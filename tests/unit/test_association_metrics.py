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


def test_bernoulli_kl_and_the_papers_kl_by_hand():
    # KL([0.2, 0.8] || [0.1, 0.9]) = 0.2 ln 2 + 0.8 ln(8/9)
    kl = 0.2 * math.log(2) + 0.8 * math.log(0.8 / 0.9)
    assert assoc.bernoulli_kl([0.2, 0.5], [0.1, 0.5]) == pytest.approx([kl, 0.0])
    assert assoc.bernoulli_kl([0.0], [0.5]) == pytest.approx([math.log(2)])  # 0 ln 0 = 0
    assert assoc.bernoulli_kl([0.5], [0.0]) == [math.inf]
    # two rows prefer M (0.2 > 0.1, 0.3 > 0.25), one W: majority M, KL from the M scores to the W scores
    m, w = [0.2, 0.3, 0.1], [0.1, 0.25, 0.4]
    by_hand = np.mean([0.2 * math.log(0.2 / 0.1) + 0.8 * math.log(0.8 / 0.9),
                       0.3 * math.log(0.3 / 0.25) + 0.7 * math.log(0.7 / 0.75),
                       0.1 * math.log(0.1 / 0.4) + 0.9 * math.log(0.9 / 0.6)])
    assert assoc.majority_gender(m, w) == "M"
    assert assoc.kl_bias(m, w) == pytest.approx(by_hand)
    # swapping the genders swaps the majority, so the number is the same (the KL follows the majority side)
    assert assoc.majority_gender(w, m) == "W"
    assert assoc.kl_bias(w, m) == pytest.approx(by_hand)
    assert assoc.majority_gender([0.2, 0.1], [0.1, 0.2]) == "M"  # 0.5 counts as M
    assert math.isnan(assoc.kl_bias([], []))


def test_combined_scores_multiply_aligned_columns():
    assert assoc.combined_scores([[0.5, 0.2], [0.5, 1.0], [0.4, 0.5]]) == pytest.approx([0.1, 0.1])
    with pytest.raises(ValueError, match="same length"):
        assoc.combined_scores([[0.5, 0.2], [0.5]])


def test_weat_statistic_of_the_paper_by_hand():
    he, she = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    diag = np.array([1.0, 1.0])
    # s(he, A={he-like}, B={diag}) = 1 - 1/sqrt2 ; s(she, ...) = 0 - 1/sqrt2 ; S = 1
    assert assoc.weat_statistic([he], [she], [np.array([3.0, 0.0])], [diag]) == pytest.approx(1.0)
    assert math.isnan(assoc.weat_statistic([he], [], [he], [she]))
    vectors = {"him": he, "her": she, "crafted": np.array([2.0, 0.0]), "cooked": np.array([0.0, 5.0]),
               "made": diag}
    # A = {crafted, made} (HB=M rows, unique), B = {cooked, made}; "unknown" is out of vocabulary
    # s(him) = (1 + 1/sqrt2)/2 - (0 + 1/sqrt2)/2 = 1/2 ; s(her) = (0 + 1/sqrt2)/2 - (1 + 1/sqrt2)/2 = -1/2
    got = assoc.weat_paper(["him"], ["her"], ["crafted", "made", "crafted", "cooked", "made", "unknown"],
                           ["M", "M", "M", "W", "W", "W"], vectors.get)
    assert got == pytest.approx(1.0)
    # the same words labelled the other way round flip the sign
    flipped = assoc.weat_paper(["him"], ["her"], ["crafted", "cooked"], ["W", "M"], vectors.get)
    assert flipped == pytest.approx(-2.0)


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
