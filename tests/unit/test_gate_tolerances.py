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
