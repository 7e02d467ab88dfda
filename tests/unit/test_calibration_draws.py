"""The across-draw reading of the planted bias: detection and A/A false-positive rates, the Mann-Whitney test,
the report's headline, and clean errors for a bad draws file."""

from __future__ import annotations

import json
from itertools import combinations

import pytest

from biaslab.calibration import draws as across
from biaslab.errors import ConfigError, MissingInputError

FAMILIES = {"gbem_ua": {"gbem_ua/qa_logodds_gap_fem": "increase"}, "rubia": {"rubia/pro_share/gender": "increase"}}


def _family(effect, status="overlap", paired="includes 0"):
    return {"metric": "m", "status": status, "effect": effect, "paired_status": paired}


def _draw(recipe, seed, gbem, rubia):
    return {"recipe": recipe, "seed": seed, "families": {"gbem_ua": gbem, "rubia": rubia}}


DRAWS = [
    _draw("committed", 0, _family(0.08, "detected", "detected"), _family(0.03, paired="detected")),
    _draw("committed", 1, _family(2.72, "detected", "detected"), _family(0.02)),
    _draw("committed", 2, _family(0.50, "detected", "detected"), _family(0.05, paired="detected")),
    _draw("committed", 3, _family(0.28, "detected", "detected"), _family(0.01)),
    _draw("committed/A-A", 0, _family(0.00), _family(0.05, paired="detected")),
    _draw("committed/A-A", 1, _family(-0.19, "wrong direction", "wrong direction"), _family(-0.01)),
    _draw("committed/A-A", 2, _family(-0.00), _family(0.03)),
    _draw("committed/A-A", 3, _family(-0.02), _family(0.01)),
    _draw("other", 0, _family(9.0, "detected", "detected"), _family(9.0, "detected", "detected")),
]


def _exact_mann_whitney_greater(x, y):
    """P(U >= u_observed) under H0 by enumerating every split of the pooled values (the definition)."""
    pooled = list(x) + list(y)

    def u(first):
        rest = [v for i, v in enumerate(pooled) if i not in first]
        return sum((pooled[i] > r) + 0.5 * (pooled[i] == r) for i in first for r in rest)

    observed = u(set(range(len(x))))
    splits = [set(c) for c in combinations(range(len(pooled)), len(x))]
    return sum(u(c) >= observed for c in splits) / len(splits)


def test_rates_and_the_across_draw_test_per_family():
    rows = {r.family: r for r in across.across_draws(DRAWS, FAMILIES)}
    gbem, rubia = rows["gbem_ua"], rows["rubia"]
    assert gbem.effects == (0.08, 2.72, 0.50, 0.28) and gbem.aa_effects == (0.00, -0.19, -0.00, -0.02)
    assert (gbem.detected, gbem.paired_detected, gbem.aa_detected, gbem.aa_paired_detected) == (4, 4, 0, 0)
    assert (rubia.detected, rubia.paired_detected, rubia.aa_detected, rubia.aa_paired_detected) == (0, 2, 0, 1)
    # complete separation of 4 + 4 values: the smallest one-sided exact p, 1 / C(8, 4)
    assert gbem.p_value == pytest.approx(1 / 70) and gbem.detected_across
    assert rubia.p_value == pytest.approx(_exact_mann_whitney_greater(rubia.effects, rubia.aa_effects))
    assert not rubia.detected_across  # planted effects no larger than re-drawing the model gives


def test_the_test_is_one_sided_and_needs_two_draws_a_side():
    assert across.mann_whitney_greater([0.0, 0.1], [1.0, 2.0]) == pytest.approx(1.0)
    assert across.mann_whitney_greater([1.0], [0.0, 0.1]) is None
    only_planted = across.across_draws([d for d in DRAWS if d["recipe"] == "committed"], FAMILIES)
    assert all(r.p_value is None and not r.detected_across for r in only_planted)


def test_the_headline_counts_families_by_the_across_draw_test_and_the_run_is_one_draw():
    from biaslab.calibration.families import render_markdown

    rows = across.across_draws(DRAWS, FAMILIES)
    section = across.render_markdown(rows, "metrics/draws/x.jsonl")
    assert section.startswith("**1 of 2 benchmark families detect the planted bias across draws** (4 planted/"
                              "control pairs against 4 A/A pairs")
    assert "| rubia | `rubia/pro_share/gender` | increase | 0 of 4 / 0 of 4 | 2 of 4 / 1 of 4 |" in section
    metrics = across.mlflow_metrics(rows)
    assert metrics["calibration/draws/families_detected"] == 1.0
    assert metrics["calibration/draws/rubia/paired_false_positive_rate"] == 0.25
    report = render_markdown([], [], {}, {"dose": 0.5}, section)
    assert section.strip() in report and "This run is one draw: in it 0 of 0 families" in report
    assert "**0 of 0 benchmark families detect" not in report  # one draw's count no longer headlines


def test_a_bad_draws_file_is_one_clear_error(tmp_path):
    with pytest.raises(MissingInputError, match="calibrate.draws names no file"):
        across.read_draws(tmp_path / "none.jsonl")
    path = tmp_path / "draws.jsonl"
    path.write_text(json.dumps(DRAWS[0]) + "\n\n" + json.dumps({"recipe": "x"}) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"draws.jsonl: line 3: not a draw of bench/planted_draws.py"):
        across.read_draws(path)


def test_the_committed_draws_file_reads_and_names_every_calibrate_family():
    from biaslab.config import load_params

    params = load_params("params.yaml")
    rows = across.across_draws(across.read_draws(params.calibrate.draws), params.calibrate.families,
                               params.calibrate.draws_recipe, params.calibrate.draws_alpha)
    assert [r.family for r in rows] == list(params.calibrate.families)
    assert all(len(r.effects) >= 4 and len(r.aa_effects) >= 4 for r in rows)  # issue 36: >= 4 + 4 draws


# ------------------------------------------------------------------ issue 43: direction, power, recipe stamp
def test_a_decrease_family_is_tested_in_its_own_direction():
    families = {"gbem_ua": {"gbem_ua/qa_logodds_gap_fem": "decrease"}, "rubia": {"rubia/pro_share/gender": "increase"}}
    # mirror gbem's effects: planted effects far *below* the A/A ones is what a decrease family expects
    mirrored = [{**d, "families": {**d["families"], "gbem_ua": {**d["families"]["gbem_ua"],
                                                                "effect": -d["families"]["gbem_ua"]["effect"]}}}
                for d in DRAWS]
    rows = {r.family: r for r in across.across_draws(mirrored, families)}
    assert rows["gbem_ua"].expected == "decrease"
    assert rows["gbem_ua"].p_value == pytest.approx(1 / 70) and rows["gbem_ua"].detected_across
    # the same effects read as an increase: the largest possible p
    as_increase = {r.family: r for r in across.across_draws(mirrored, FAMILIES)}
    assert as_increase["gbem_ua"].p_value == pytest.approx(1.0) and not as_increase["gbem_ua"].detected_across
    assert across.mann_whitney([0.0, -0.1], [1.0, 2.0], "decrease") == pytest.approx(1 / 6)
    assert rows["gbem_ua"].mde < 0  # the signed MDE of a decrease family points down


def test_power_and_minimal_detectable_effect_at_four_plus_four_draws():
    curve = dict(across.power_curve(4, 4))
    assert curve[0.0] == pytest.approx(2 / 70, abs=0.005)  # the exact test's size: U >= 15 of 16, 2 of 70 splits
    assert curve[1.0] == pytest.approx(0.24, abs=0.02)  # the "power ≈ 24 % at 1 SD"
    assert 2.2 <= across.mde_sd(4, 4) <= 2.6
    assert across.mde_sd(8, 8) < across.mde_sd(4, 4)
    assert across.mde_sd(1, 4) is None
    rows = {r.family: r for r in across.across_draws(DRAWS, FAMILIES)}
    rubia = rows["rubia"]
    assert rubia.verdict().startswith("not detected at this power (MDE +")
    assert rubia.mde == pytest.approx(rubia.mde_sd * rubia.sd)
    section = across.render_markdown(list(rows.values()), "x.jsonl")
    assert "not detected at this power (MDE" in section and "(1 SD: 2" in section
    assert across.mlflow_metrics(list(rows.values()))["calibration/draws/rubia/mde"] == pytest.approx(rubia.mde)


def _params():
    from biaslab.config import load_params

    return load_params("params.yaml").model_dump(mode="json")


def _stamped(path, params, **extra):
    stamp = {"commit": "abc123", "params_hash": across.recipe_hash(params), **extra}
    path.write_text("".join(json.dumps({**d, **stamp}) + "\n" for d in DRAWS), encoding="utf-8")
    return path


def test_draws_of_this_recipe_are_counted_and_another_recipe_is_stale(tmp_path):
    params = {**_params(), "calibrate": {**_params()["calibrate"], "families": FAMILIES}}
    report = across.draws_report(_stamped(tmp_path / "d.jsonl", params), params)
    assert report.markdown.startswith("**1 of 2 benchmark families detect") and "params hash sha256:" in report.markdown
    assert report.metrics["calibration/draws/stale"] == 0.0 and report.metrics["calibration/draws/families_detected"] == 1
    assert report.aa_spread["gbem_ua/qa_logodds_gap_fem"][1:] == (0.19, 4)
    # another recipe: a changed planted strength
    other = json.loads(json.dumps(params))
    other["model"]["pretrain"]["planted_bias"]["strength"] += 1
    assert across.recipe_hash(other) != across.recipe_hash(params)
    stale = across.draws_report(_stamped(tmp_path / "o.jsonl", other), params)
    assert stale.markdown.startswith("**Across draws: not counted") and "another recipe" in stale.markdown
    assert stale.metrics == {"calibration/draws/stale": 1.0} and not stale.aa_spread
    assert "**1 of 2 benchmark families detect" not in stale.markdown  # the table is shown, not counted


def test_the_recipe_hash_ignores_what_varies_per_draw_and_what_no_family_reads():
    params = _params()
    varied = json.loads(json.dumps(params))
    varied["model"]["pretrain"]["seed"] = 7
    varied["data"]["prepared_dir"] = "elsewhere"
    varied["scoring"]["device"] = "cuda"
    varied["evaluation"]["benchmarks"].pop("agreement", None)  # not a calibrated family's benchmark
    assert across.recipe_hash(varied) == across.recipe_hash(params)
    varied["evaluation"]["bootstrap_samples"] = 10
    assert across.recipe_hash(varied) != across.recipe_hash(params)


def test_the_first_draws_file_records_no_recipe_and_is_reported_stale():
    """The draws committed before issue 43 carry no params hash: "unknown recipe", not counted."""
    from biaslab.config import load_params

    params = load_params("params.yaml")
    first = "metrics/draws/planted_draws.jsonl"
    report = across.draws_report(first, params.model_dump(mode="json"))
    assert report.markdown.startswith("**Across draws: not counted") and "no params hash" in report.markdown
    assert report.metrics["calibration/draws/stale"] == 1.0
    # its numbers, recomputed: the p-values docs/planted_bias.md quotes
    rows = {r.family: r for r in across.across_draws(across.read_draws(first), params.calibrate.families)}
    assert rows["rubia"].p_value == pytest.approx(0.471, abs=5e-4)
    assert rows["crows_pairs"].p_value == pytest.approx(0.714, abs=5e-4)


def test_the_committed_draws_are_this_recipes_and_give_the_numbers_the_docs_quote():
    """``calibrate.draws`` (4 planted + 4 A/A pairs drawn on a CPU, 2026-11-29) carries this params.yaml's recipe
    hash, so calibrate counts it; its headline and p-values are the ones docs/planted_bias.md quotes."""
    from biaslab.config import load_params

    params = load_params("params.yaml")
    report = across.draws_report(params.calibrate.draws, params.model_dump(mode="json"))
    assert report.metrics["calibration/draws/stale"] == 0.0
    assert report.markdown.startswith("**2 of 5 benchmark families detect the planted bias across draws**")
    rows = {r.family: r for r in across.across_draws(across.read_draws(params.calibrate.draws),
                                                     params.calibrate.families)}
    assert all(len(r.effects) == 4 and len(r.aa_effects) == 4 for r in rows.values())
    expected = {"gbem_ua": 0.014, "occugender": 0.014, "rubia": 0.171, "crows_pairs": 0.986, "cloze_gender": 0.443}
    assert {f: round(r.p_value, 3) for f, r in rows.items()} == expected
    assert [f for f, r in rows.items() if r.detected_across] == ["gbem_ua", "occugender"]
