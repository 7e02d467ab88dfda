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


def test_error_rates_count_a_a_refusals_against_committed_and_left_out_margins():
    from biaslab.registry.error_rates import aa_false_refusals, render_markdown

    def pair(seed, high):
        return {"recipe": "committed/A-A", "seed": seed,
                "families": {"f": {"planted": [0.6], "control": [0.55], "effect": high / 2,
                                   "paired": [high / 2, 0.0, high]}}}

    draws = [pair(0, 0.02), pair(1, 0.03), pair(2, 0.025), pair(3, 0.2)]
    aa = aa_false_refusals(draws, {"f": 0.1}, {"f": ("m", 0.5)})
    assert [r["badness_ci_high"] for r in aa["rows"]] == [0.02, 0.03, 0.025, 0.2]  # both above 0.5: hi, exact
    assert aa["refused"] == 1 and aa["refused_pairs"] == 1  # 0.2 >= the committed 0.1
    assert [r["loo_refused"] for r in aa["rows"]] == [False, False, False, True]
    assert aa["rows"][3]["loo_margin"] == prediction_margin([0.02, 0.03, 0.025])
    assert aa["sized"]["f"] == prediction_margin([0.02, 0.03, 0.025, 0.2])
    text = render_markdown(aa, {"false_approvals": 0, "harmful": 3})
    assert "| 1 of 4 rule evaluations (1 of 4 pairs) |" in text and "| 0 of 3 |" in text
    assert "committed margins | the same pairs (in-sample for a margin they sized, out of sample for one sized on " \
           "selection items) | 1 of 4 (1 of 4 pairs; f) |" in text  # the family that refused is named
    # which file, and whether it sized the margins (calibrate.margins_draws), is said, not assumed
    other = render_markdown(aa, None, source="metrics/draws/new.jsonl", sized_on=False)
    assert "| 4 A/A pairs of `metrics/draws/new.jsonl` x 1 families" in other
    assert "the same pairs (out of sample: these pairs sized no margin) | 1 of 4" in other
    sizing = render_markdown(aa, None, source="metrics/draws/old.jsonl", sized_on=True)
    assert "the same pairs (in-sample for a margin sized on these pairs, out of sample for one sized on" in sizing
    two = aa_false_refusals(draws[:2], {"f": 0.1}, {"f": ("m", 0.5)})  # too few pairs for a left-out margin
    assert two["loo_evaluations"] == 0 and two["loo_largest_evaluations"] == 2  # each denominator its own rule's
    assert two["loo_largest_refused"] == 2  # 0.02 >= 0.015 and 0.03 >= 0.01: the other pair's |point Δ|


def test_a_negative_control_refused_only_by_the_bias_rule_is_a_false_approval_of_the_harm_rules():
    from biaslab.calibration.controls import ControlCheck
    from biaslab.registry.error_rates import render_markdown

    by_bias = ControlCheck("negative_control", "negative", approved=False, ok=True, deciding=(), message="",
                           harm_caught=False)
    by_harm = ControlCheck("noised_more", "negative", approved=False, ok=True, deciding=(), message="",
                           harm_caught=True)
    text = render_markdown(None, None, [by_bias, by_harm])
    assert "| false approval (whole gate) | negative controls | 0 of 2 |" in text
    assert "| false approval (harm rules) | negative controls: no harm rule refused it | 1 of 2 |" in text


def test_spike_ins_of_bias_beyond_the_margin_are_refused_by_the_spill_over_rule(tmp_path):
    """RuBia's stored base predictions (a fake scorer) spiked by δ: the spill-over rule approves δ = 0 and
    refuses every spike whose point Δ badness exceeds the margin; the count of false approvals is 0."""
    import yaml

    from biaslab.benchmarks.rubia import BENCHMARK
    from biaslab.config import load_params
    from biaslab.outputs import metrics_file, paths
    from biaslab.registry.error_rates import spike_in_approvals
    from tests.unit.test_spike_in import _rubia_predictions

    result = _rubia_predictions(tmp_path)
    folder = tmp_path / paths.predictions_dir("base")
    folder.mkdir(parents=True)
    for name, frame in result.predictions.items():
        frame.to_parquet(folder / f"rubia__{name}.parquet")
    metrics_file.write(tmp_path, "base", result.metrics)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "variants": {"base": {"method": "none", "model_dir": "models/base"}},
        "evaluation": {"benchmarks": {"rubia": {"module": "biaslab.benchmarks.rubia"}}},
        "calibrate": {"families": {"gbem_ua": {"gbem_ua/qa_logodds_gap_fem": "increase"},
                                   "rubia": {"rubia/pro_share/gender": "increase"}}},
        "registry": {"bootstrap": {"samples": 300}, "spill_over_margins": {"rubia": {"tolerance": 0.05}},
                     "gate": [{"metric": "gbem_ua/qa_logodds_gap_fem", "rule": "paired_bias_reduction"}]}}))
    params = load_params(tmp_path / "params.yaml")
    out = spike_in_approvals(params, tmp_path, [0.0, 0.5, 2.0])
    rows = {r["delta"]: r for r in out["rows"]}
    assert set(rows) == {0.0, 0.5, 2.0} and rows[0.0]["approved"] and rows[0.0]["estimate"] == 0.0
    base = BENCHMARK.item_statistics({})["rubia/pro_share/gender"]
    spiked = BENCHMARK.spike(result.predictions, 2.0, {})
    direct = abs(base.value(spiked[base.table]) - 0.5) - abs(base.value(result.predictions[base.table]) - 0.5)
    assert rows[2.0]["estimate"] == pytest.approx(direct, abs=1e-12) and direct > 0.05
    assert rows[2.0]["harm_beyond_margin"] and not rows[2.0]["approved"]
    assert out["false_approvals"] == 0 and out["harmful"] == sum(r["harm_beyond_margin"] for r in out["rows"])


def test_a_margin_sized_on_selection_items_reads_the_draws_select_entries_only():
    from biaslab.registry.error_rates import aa_false_refusals

    def pair(seed, test_high, select_high):
        entry = lambda high: {"planted": [0.06], "control": [0.05], "effect": high / 2,  # noqa: E731
                              "paired": [high / 2, 0.0, high]}
        return {"recipe": "committed/A-A", "seed": seed, "families": {"f": entry(test_high), "g": entry(test_high)},
                "select": {"f": entry(select_high)}}

    draws = [pair(4, 0.02, 0.01), pair(5, 0.03, 0.012), pair(6, 0.025, 0.02)]
    assert [h for _, h, _ in aa_highs(draws, "f", 0.0, items="select")] == [0.01, 0.012, 0.02]
    assert aa_highs(draws, "g", 0.0, items="select") == []  # a family not read on selection items
    with pytest.raises(ValueError, match="items must be"):
        aa_highs(draws, "f", 0.0, items="validation")
    aa = aa_false_refusals(draws, {"f": 0.1, "g": 0.1}, {"f": ("m", 0.0), "g": ("n", 0.0)})
    assert aa["sized_on_select"]["f"]["margin"] == prediction_margin([0.01, 0.012, 0.02])
    assert aa["sized"]["f"] == prediction_margin([0.02, 0.03, 0.025])  # the test-item reading, kept apart
    assert set(aa["sized_on_select"]) == {"f"}
