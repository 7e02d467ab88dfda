"""The calibrate / control_model stages' wiring: the control as an extra variant, and the no-planted-bias path."""

from __future__ import annotations

import json

import pytest

from biaslab.config import ConfigError, ModelConfig, Params, PretrainConfig, VariantConfig, load_params


def _params(**model) -> Params:
    return Params(model=ModelConfig(**model))


def test_the_control_is_evaluated_as_an_extra_method_none_variant():
    from biaslab.pretrain.control_variant import CONTROL, with_control

    params = load_params("params.yaml")
    with_ctrl = with_control(params)
    assert set(with_ctrl.variants) == set(params.variants) | {CONTROL}
    assert with_ctrl.variant(CONTROL).method == "none"
    assert with_ctrl.variant(CONTROL).model_dir == params.calibrate.control_dir
    taken = params.model_copy(update={"variants": {**params.variants, CONTROL: VariantConfig(method="none",
                                                                                             model_dir="x")}})
    with pytest.raises(ConfigError, match="reserved"):
        with_control(taken)


def test_the_default_params_plant_a_bias_with_a_lora_cda_variant_and_a_binding_step_budget():
    params = load_params("params.yaml")
    pb = params.model.pretrain.planted_bias
    assert pb.enabled and pb.direction == "planted" and 0 < pb.from_step < params.model.pretrain.max_steps
    assert params.lora_for("lora_cda").augmentation == "counterfactual"
    assert params.lora_for("lora_cda").checkpoint_dir != params.lora_for("lora").checkpoint_dir
    assert "lm_quality" in params.evaluation.benchmarks
    assert {g.metric for g in params.registry.gate} >= {params.tune.accuracy_metric, params.tune.gap_metric}
    for metrics in params.calibrate.families.values():  # every family names at least its primary metric
        assert metrics


def test_no_planted_bias_says_why():
    from biaslab.pretrain.control_variant import no_planted_bias

    planted = PretrainConfig.model_validate({"planted_bias": {"enabled": True}})
    assert no_planted_bias(_params(pretrain=planted)) is None
    assert "enabled is false" in no_planted_bias(_params())
    assert "snapshotted" in no_planted_bias(_params(source="org/model", pretrain=planted))


def test_calibrate_without_a_planted_bias_writes_every_output_with_the_reason(tmp_path):
    from pipelines.calibrate import REPORT, RUN_FILE, TABLE, run_calibrate
    from biaslab.evaluation.suite import EvaluationOutputs

    assert run_calibrate(_params(), tmp_path) == {}
    outputs = EvaluationOutputs.for_variant("control", tmp_path)
    assert json.loads(outputs.metrics.read_text())["metrics"] == {}
    assert outputs.predictions.is_dir() and outputs.tables.is_dir() and outputs.run_file.is_file()
    assert "Not run: model.pretrain.planted_bias.enabled is false" in (tmp_path / REPORT).read_text()
    assert (tmp_path / TABLE).is_file() and "skipped" in json.loads((tmp_path / RUN_FILE).read_text())


def test_control_model_without_a_planted_bias_leaves_a_marker_not_a_model(tmp_path):
    from biaslab.pretrain.control import SKIPPED_FILE
    from pipelines.control_model import CONTROL_RUN, run_control_model

    params = _params()
    summary = run_control_model(params, tmp_path, progress=False)
    assert "enabled is false" in summary["skipped"]
    control = tmp_path / params.calibrate.control_dir
    assert [p.name for p in control.iterdir()] == [SKIPPED_FILE]
    assert "skipped" in json.loads((tmp_path / CONTROL_RUN).read_text())


def test_every_default_calibration_metric_has_a_paired_reading(tmp_path):
    """Each metric calibrate lists can be recomputed per item, so the report's paired column is never n/a."""
    import pandas as pd

    from pipelines.calibrate import item_statistics, prediction_tables

    params = load_params("params.yaml")
    metrics = [m for family in params.calibrate.families.values() for m in family]
    statistics = item_statistics(params, metrics)
    assert set(statistics) == set(metrics)
    assert {bench for bench, _ in statistics.values()} == set(params.calibrate.families)  # family = benchmark here
    tables = sorted({f"{bench}__{stat.table}" for bench, stat in statistics.values()})
    assert "rubia__rubia_pairs" in tables and "gbem_ua__qa_pairs" in tables
    pd.DataFrame({"pair_id": [1]}).to_parquet(tmp_path / "rubia__rubia_pairs.parquet")
    assert list(prediction_tables(tmp_path, tables)) == ["rubia__rubia_pairs"]  # a skipped benchmark: no table
