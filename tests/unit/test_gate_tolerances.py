"""bench/gate_tolerances.py: a tolerance is the largest |A/A difference| on the selection items, rounded up;
the models are scored on the select split, never the test items the gate judges."""

from __future__ import annotations

import pytest
from bench_scripts import load_bench_script

from biaslab.metrics.values import MetricValue


def _mv(value):
    return MetricValue(value=value, direction="lower", ci_low=value - 0.01, ci_high=value + 0.01)


def test_the_tolerance_is_the_largest_absolute_a_a_difference_rounded_up():
    module = load_bench_script("gate_tolerances")
    planted = {"gbem_ua/qa_macro_f1": _mv(0.34), "lm_quality/bits_per_char": _mv(2.7748)}
    control = {"gbem_ua/qa_macro_f1": _mv(0.5315), "lm_quality/bits_per_char": _mv(2.7681)}
    reseeded = [{"gbem_ua/qa_macro_f1": _mv(0.3333), "lm_quality/bits_per_char": _mv(2.7932)},
                {"gbem_ua/qa_macro_f1": _mv(0.5069), "lm_quality/bits_per_char": _mv(2.7849)}]
    rows = module.tolerances(planted, control, reseeded)
    f1, bpc = rows["gbem_ua/qa_macro_f1"], rows["lm_quality/bits_per_char"]
    assert f1["aa_differences"] == pytest.approx([-0.1982, -0.0246])
    assert f1["tolerance"] == 0.199  # ceil(0.1982 * 1000) / 1000: never below what re-training moved it
    assert f1["planted_minus_control"] == pytest.approx(-0.1915)  # shown, not the tolerance
    assert bpc["tolerance"] == 0.026
    assert module.tolerances(planted, control, [])["gbem_ua/qa_macro_f1"]["tolerance"] is None


def test_models_are_scored_on_the_selection_items_with_only_the_harm_benchmarks(monkeypatch):
    from biaslab.config import load_params
    from biaslab.evaluation import suite

    module = load_bench_script("gate_tolerances")
    seen = {}

    class Loaded:
        ctx = suite.EvalContext()

    def fake_load(params, name, root):
        seen["model_dir"] = params.variant(name).model_dir
        return Loaded()

    def fake_run(params, under_test, root):
        seen["split"] = under_test.ctx.split
        seen["enabled"] = sorted(n for n, e in params.evaluation.benchmarks.items() if e.enabled)
        return suite.Evaluation({}, {}, {}, {}, "")

    monkeypatch.setattr(suite, "load_variant", fake_load)
    monkeypatch.setattr(suite, "run_benchmarks", fake_run)
    params = load_params("params.yaml")
    module.score_on_selection(params, "models/control", ".")
    harm = {"gbem_ua", "lm_quality", "occugender"} | ({"agreement"} & set(params.evaluation.benchmarks))
    assert seen == {"model_dir": "models/control", "split": "select", "enabled": sorted(harm)}


def test_spill_over_margins_are_the_prediction_bound_of_the_a_a_pairs_ci_highs(monkeypatch):
    """Per family with selection items: each re-seeded control's paired CI high of Δ |metric − ideal| against
    the control, then their 95 % prediction bound (biaslab.calibration.margins)."""
    from types import SimpleNamespace

    import numpy as np
    import pandas as pd

    from biaslab.benchmarks import registry
    from biaslab.calibration.margins import prediction_margin
    from biaslab.config import load_params
    from biaslab.metrics.paired import ItemStatistic, paired_difference

    module = load_bench_script("gate_tolerances")
    mean = lambda cols: float(np.asarray(cols["gap"], dtype=float).mean())  # noqa: E731
    stat = ItemStatistic("items", lambda t: t, ("job",), mean)
    monkeypatch.setattr(registry, "item_statistics_of", lambda benchmarks, metrics: {
        "occugender/implicit_group_gap": ("occugender", stat)})

    def model(shift, seed):
        rng = np.random.default_rng(seed)
        table = pd.DataFrame({"job": range(40), "gap": 0.05 + shift + rng.normal(0, 0.02, 40)})
        value = MetricValue(mean(table), "target", ideal=0.0)
        return SimpleNamespace(metrics={"occugender/implicit_group_gap": value},
                               predictions={"occugender__items": table})

    params = load_params("params.yaml")
    control, reseeded = model(0.0, 0), [model(0.01, 1), model(-0.01, 2), model(0.0, 3)]
    out = module.spill_over_margins(params, control, reseeded)["occugender"]
    boot = params.registry.bootstrap
    bad = ItemStatistic("items", lambda t: t, ("job",), lambda cols: abs(mean(cols)))
    expected = [paired_difference(r.predictions["occugender__items"], control.predictions["occugender__items"], bad,
                                  samples=boot.samples, seed=boot.seed, confidence=boot.confidence).ci_high
                for r in reseeded]
    assert out["aa_ci_highs"] == pytest.approx(expected, abs=1e-12)
    assert out["margin"] == prediction_margin(expected)


def test_harm_tolerances_by_ci_bound_are_the_prediction_bound_of_the_a_a_pairs_harmful_ci_bounds(monkeypatch):
    """Per harm metric: each re-seeded control's paired CI bound of Δ on the harmful side against the control
    (CI high for lower-is-better, −CI low for higher-is-better), then their 95 % prediction bound; the harmful
    side follows the metric's direction (a fall of accuracy is harm, a fall of bits/char is not)."""
    from types import SimpleNamespace

    import numpy as np
    import pandas as pd

    from biaslab.benchmarks import registry
    from biaslab.calibration.margins import prediction_margin
    from biaslab.config import load_params
    from biaslab.metrics.paired import ItemStatistic, paired_difference

    module = load_bench_script("gate_tolerances")
    mean = lambda cols: float(np.asarray(cols["x"], dtype=float).mean())  # noqa: E731
    stat = ItemStatistic("t", lambda t: t, ("item",), mean)
    monkeypatch.setattr(registry, "item_statistics_of", lambda benchmarks, metrics: {
        "lm_quality/bits_per_char": ("lm_quality", stat), "agreement/accuracy": ("agreement", stat)})

    def model(shift, seed):
        rng = np.random.default_rng(seed)
        table = pd.DataFrame({"item": range(60), "x": 2.0 + shift + rng.normal(0, 0.05, 60)})
        values = {"lm_quality/bits_per_char": MetricValue(mean(table), "lower"),
                  "agreement/accuracy": MetricValue(mean(table), "higher")}
        return SimpleNamespace(metrics=values, predictions={"lm_quality__t": table, "agreement__t": table})

    params = load_params("params.yaml")
    control, reseeded = model(0.0, 0), [model(0.02, 1), model(0.01, 2), model(0.015, 3)]
    out = module.ci_tolerances(params, control, reseeded)
    boot = params.registry.bootstrap

    def bounds(sign):
        worse = ItemStatistic("t", lambda t: t, ("item",), lambda cols: sign * mean(cols))
        return [paired_difference(r.predictions["lm_quality__t"], control.predictions["lm_quality__t"], worse,
                                  samples=boot.samples, seed=boot.seed, confidence=boot.confidence).ci_high
                for r in reseeded]

    bpc, acc = out["lm_quality/bits_per_char"], out["agreement/accuracy"]
    assert bpc["aa_ci_bounds"] == pytest.approx(bounds(1.0), abs=1e-12)
    assert bpc["tolerance"] == prediction_margin(bounds(1.0))
    assert min(bpc["aa_ci_bounds"]) > max(abs(r.metrics["lm_quality/bits_per_char"].value
                                              - control.metrics["lm_quality/bits_per_char"].value)
                                          for r in reseeded[1:])  # above the point differences the old rule read
    assert acc["aa_ci_bounds"] == pytest.approx(bounds(-1.0), abs=1e-12)  # higher is better: the fall is harm
    assert "gbem_ua/qa_macro_f1" not in out  # no statistic for it here: skipped, not guessed


def test_margins_from_kept_draws_pair_each_re_seeded_control_with_its_own_control(monkeypatch, tmp_path):
    """``--from-draws OUT MODELS``: the A/A pairs ``bench/planted_draws.py --aa --select`` kept, each of its own
    shared phase, read on their selection tables; each pair's CI high is against that pair's control."""
    import json

    import numpy as np
    import pandas as pd

    from biaslab.benchmarks import registry
    from biaslab.calibration.margins import prediction_margin
    from biaslab.config import load_params
    from biaslab.metrics.paired import ItemStatistic, paired_difference

    module = load_bench_script("gate_tolerances")
    mean = lambda cols: float(np.asarray(cols["gap"], dtype=float).mean())  # noqa: E731
    monkeypatch.setattr(registry, "item_statistics_of", lambda benchmarks, metrics: {
        "occugender/implicit_group_gap": ("occugender", ItemStatistic("items", lambda t: t, ("job",), mean))})
    out, models = tmp_path / "out", tmp_path / "models"
    out.mkdir()
    lines, tables = [], {}
    for seed, shift in ((4, 0.0), (5, 0.03), (6, -0.02)):
        for role, extra in (("balanced", 0.0), ("balanced-reseeded", 0.005 * seed)):
            rng = np.random.default_rng(10 * seed + len(role))
            table = pd.DataFrame({"job": range(30), "gap": 0.04 + shift + extra + rng.normal(0, 0.02, 30)})
            folder = models / f"committed-seed{seed}" / role / "predictions" / "select"
            folder.mkdir(parents=True)
            table.to_parquet(folder / "occugender__items.parquet", index=False)
            tables[(seed, role)] = table
            value = {"value": float(table["gap"].mean()), "direction": "target", "ideal": 0.0}
            lines.append({"recipe": "committed", "seed": seed, "role": role,
                          "select_metrics": {"occugender/implicit_group_gap": value}})
    lines.append({"recipe": "committed", "seed": 7, "role": "balanced", "select_metrics": {}})  # no pair: left out
    (out / "models.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n", encoding="utf-8")
    controls, reseeded, names = module.kept_draw_pairs(out, models)
    assert names == ["committed seed 4", "committed seed 5", "committed seed 6"]
    params = load_params("params.yaml")
    row = module.spill_over_margins(params, controls, reseeded)["occugender"]
    boot = params.registry.bootstrap
    bad = ItemStatistic("items", lambda t: t, ("job",), lambda cols: abs(mean(cols)))
    expected = [paired_difference(tables[(s, "balanced-reseeded")], tables[(s, "balanced")], bad, samples=boot.samples,
                                  seed=boot.seed, confidence=boot.confidence).ci_high for s in (4, 5, 6)]
    assert row["aa_ci_highs"] == pytest.approx(expected, abs=1e-12)
    assert row["margin"] == prediction_margin(expected)
    with pytest.raises(SystemExit, match="was not scored"):  # the test reading needs each model's test metrics
        module.kept_draw_pairs(out, models, items="test")
    for line in lines[:-1]:  # the test items: the selection table doubled, under predictions/
        folder = models / f"committed-seed{line['seed']}" / line["role"] / "predictions"
        pd.concat([tables[(line["seed"], line["role"])]] * 2, ignore_index=True).assign(
            job=range(60)).to_parquet(folder / "occugender__items.parquet", index=False)
        line["metrics"] = line["select_metrics"]
    (out / "models.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n", encoding="utf-8")
    controls, reseeded, _ = module.kept_draw_pairs(out, models, items="test")
    assert all(len(c.predictions["occugender__items"]) == 60 for c in controls)
    on_test = module.spill_over_margins(params, controls, reseeded)["occugender"]["aa_ci_highs"]
    assert on_test != pytest.approx(expected, abs=1e-6)  # other items, other highs
    with pytest.raises(ValueError, match="items must be"):
        module.kept_draw_pairs(out, models, items="validation")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "models.jsonl").write_text(json.dumps({"recipe": "committed", "seed": 0, "role": "balanced"}) + "\n"
                                       + json.dumps({"recipe": "committed", "seed": 0, "role": "balanced-reseeded"})
                                       + "\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="was not scored on selection items"):
        module.kept_draw_pairs(bare, models)


def test_pooled_draw_pairs_keep_each_batchs_pairs_in_order_and_refuse_one_pair_twice(monkeypatch, tmp_path):
    """``--from-draws`` repeated: one margin on the pairs of several batches, in the order given; a recipe and
    seed in two batches would count one shared phase twice, so it stops naming the pair."""
    module = load_bench_script("gate_tolerances")
    batches = {tmp_path / "a": ["committed seed 4", "committed seed 5"], tmp_path / "b": ["committed seed 8"],
               tmp_path / "c": ["committed seed 5"]}
    seen = []

    def kept(out, models, items="select"):
        seen.append((out.name, models.name, items))
        names = batches[out]
        return [f"control {n}" for n in names], [f"reseeded {n}" for n in names], list(names)

    monkeypatch.setattr(module, "kept_draw_pairs", kept)
    controls, reseeded, names = module.pooled_draw_pairs([(tmp_path / "a", tmp_path / "ma"),
                                                         (tmp_path / "b", tmp_path / "mb")], items="test")
    assert names == ["committed seed 4", "committed seed 5", "committed seed 8"]
    assert controls == [f"control {n}" for n in names] and reseeded == [f"reseeded {n}" for n in names]
    assert seen == [("a", "ma", "test"), ("b", "mb", "test")]
    with pytest.raises(SystemExit, match="committed seed 5 is already in an earlier --from-draws batch"):
        module.pooled_draw_pairs([(tmp_path / "a", tmp_path / "ma"), (tmp_path / "c", tmp_path / "mc")])


def test_the_test_item_check_reads_every_family_the_gate_holds_to_a_spill_over_margin():
    """``--items test`` checks every ``paired_no_spill_over`` rule of the committed gate, not only the families
    with selection items: each family maps to the metric its rule reads."""
    from biaslab.config import load_params
    from biaslab.registry.gate import gate_conditions

    module = load_bench_script("gate_tolerances")
    params = load_params("params.yaml")
    gated = module.gated_spill_over(params)
    rules = sorted(c.metric for c in gate_conditions(params) if c.rule == "paired_no_spill_over")
    assert sorted(gated.values()) == rules and set(gated) <= set(params.registry.spill_over_margins)
    assert gated["occugender"] == module.SPILL_OVER["occugender"] and len(gated) == 4
    for family, metric in gated.items():
        assert next(iter(params.calibrate.families[family])) == metric  # the family's primary
