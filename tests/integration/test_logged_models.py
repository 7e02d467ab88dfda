"""Variants as MLflow 3 logged models (a real SQLite store): the evaluate run's model carries the values
of the evaluation metrics (not their CI bounds), ``search_logged_models`` lists it, and a registered
version points at it (version tag + the model's ``mlflow.modelVersions``, which the UI's Models tab reads)."""

from __future__ import annotations

import json

import pytest

from biaslab.tracking import runs as tracking
from biaslab.config import TrackingConfig
from biaslab.metrics.values import MetricValue


@pytest.fixture
def store(tmp_path, monkeypatch):
    import mlflow

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    experiment_id = tracking.configure(TrackingConfig(experiment="models"), root=tmp_path)
    yield experiment_id
    mlflow.set_tracking_uri(None)


def test_variant_model_holds_its_metrics_and_is_the_runs_output(store):
    import mlflow

    metrics = {"gbem_ua/prob_diff_fem": MetricValue(0.25, "lower", ideal=0.0, ci_low=0.2, ci_high=0.3, n=10),
               "crows_pairs/pct_stereotype": MetricValue(0.55, "target", ideal=0.5, n=10)}
    with tracking.stage_run("evaluate", variant="soft") as run:
        model_id = tracking.variant_model("soft", tags={"model_fingerprint": "abc"},
                                          params={"variant": {"method": "embedding", "embedding_mode": "soft"}})
        tracking.log_metric_values(metrics, model_id=model_id)
    assert tracking.run_model_id(run.info.run_id) == model_id
    models = mlflow.search_logged_models(experiment_ids=[store], output_format="list")
    assert [(m.name, m.model_id) for m in models] == [("soft", model_id)]
    model = models[0]
    assert model.source_run_id == run.info.run_id and model.model_type == tracking.VARIANT_MODEL_TYPE
    assert model.tags["model_fingerprint"] == "abc" and model.params["variant.embedding_mode"] == "soft"
    assert {m.key: m.value for m in model.metrics} == {"gbem_ua/prob_diff_fem": 0.25, "crows_pairs/pct_stereotype": 0.55}
    logged = mlflow.get_run(run.info.run_id).data.metrics  # the run keeps everything, CIs included, once each
    assert logged["gbem_ua/prob_diff_fem.ci_low"] == 0.2 and logged["gbem_ua/prob_diff_fem"] == 0.25
    client = mlflow.MlflowClient()
    assert len(client.get_metric_history(run.info.run_id, "gbem_ua/prob_diff_fem")) == 1


def test_registered_version_points_at_the_logged_model(store):
    import mlflow

    with tracking.stage_run("evaluate", variant="base") as run:
        model_id = tracking.variant_model("base")
    client = mlflow.MlflowClient()
    client.create_registered_model("m")
    for _ in range(2):
        version = client.create_model_version("m", f"runs:/{run.info.run_id}/x", run_id=run.info.run_id).version
        tracking.link_version("m", version, model_id)
        tracking.link_version("m", version, model_id)  # idempotent
    assert client.get_model_version("m", "2").tags[tracking.VERSION_MODEL_TAG] == model_id
    listed = json.loads(client.get_logged_model(model_id).tags[tracking.MODEL_VERSIONS_TAG])
    assert listed == [{"name": "m", "version": "1"}, {"name": "m", "version": "2"}]


def test_a_run_without_a_logged_model(store):
    with tracking.stage_run("evaluate", variant="old") as run:
        pass
    assert tracking.run_model_id(run.info.run_id) is None
