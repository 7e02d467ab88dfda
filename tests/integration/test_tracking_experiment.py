"""``tracking.configure`` marks the experiment as model development (new and existing experiments), and the
UI address it hands out opens MLflow's runs table in the model-training view."""

from __future__ import annotations

import pytest

from biaslab import tracking
from biaslab.config import TrackingConfig


@pytest.fixture
def store(tmp_path, monkeypatch):
    import mlflow

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    yield tmp_path
    mlflow.set_tracking_uri(None)


def test_new_experiment_is_tagged_model_development(store):
    import mlflow

    experiment_id = tracking.configure(TrackingConfig(experiment="fresh"), root=store)
    tags = mlflow.MlflowClient().get_experiment(experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"


def test_existing_untagged_experiment_gets_the_tag(store):
    import mlflow

    db = store / "mlruns" / "mlflow.db"
    db.parent.mkdir(parents=True)
    mlflow.set_tracking_uri(f"sqlite:///{db}")
    old_id = mlflow.create_experiment("old", artifact_location=(store / "art").as_uri())
    assert "mlflow.experimentKind" not in mlflow.MlflowClient().get_experiment(old_id).tags

    assert tracking.configure(TrackingConfig(experiment="old"), root=store) == old_id
    assert mlflow.MlflowClient().get_experiment(old_id).tags["mlflow.experimentKind"] == "custom_model_development"


def test_genai_tag_is_replaced(store):
    """An experiment someone switched to the GenAI view in the UI is put back (this project trains models)."""
    import mlflow

    experiment_id = tracking.configure(TrackingConfig(experiment="switched"), root=store)
    mlflow.MlflowClient().set_experiment_tag(experiment_id, "mlflow.experimentKind", "genai_development")
    tracking.configure(TrackingConfig(experiment="switched"), root=store)
    assert mlflow.MlflowClient().get_experiment(experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"


def test_ui_address_and_command(store):
    experiment_id = tracking.configure(TrackingConfig(experiment="ui"), root=store)
    assert tracking.ui_url("http://127.0.0.1:5000/", experiment_id) == (
        f"http://127.0.0.1:5000/#/experiments/{experiment_id}/runs?workflowType=machine_learning")
    command = tracking.ui_command(TrackingConfig(experiment="ui"), store, port=5123)
    assert command[1:4] == ["-m", "mlflow", "ui"]
    assert command[command.index("--backend-store-uri") + 1] == f"sqlite:///{store / 'mlruns' / 'mlflow.db'}"
    assert command[command.index("--port") + 1] == "5123"
    assert command[command.index("--default-artifact-root") + 1] == (store / "mlruns" / "artifacts").as_uri()
