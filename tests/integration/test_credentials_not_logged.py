"""Nothing biaslab logs to MLflow carries a credential: params, tags and artifacts are redacted.

(The end-to-end check against an authenticated server, with the secret searched in every run, version and
artifact, is in test_team_server.py.)
"""

from __future__ import annotations

import pytest

from biaslab.config import TrackingConfig


@pytest.fixture(autouse=True)
def _leave_mlflow_as_found(monkeypatch):
    """Undo what ``tracking.configure`` sets process-wide - the tracking URI and the active experiment, which
    MLflow also writes to ``MLFLOW_EXPERIMENT_ID`` - so the next test module starts from a clean slate
    (left behind, test_evaluate_stage found no 'biaslab' experiment in its own store)."""
    import mlflow
    import mlflow.tracking.fluent as fluent

    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)
    monkeypatch.setattr(fluent, "_active_experiment_id", None)
    yield
    mlflow.set_tracking_uri(None)


def test_tags_params_and_logged_dicts_are_redacted(monkeypatch, tmp_path):
    import mlflow

    from biaslab.tracking import runs as tracking

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "very-secret-value")
    tracking.configure(TrackingConfig(tracking_uri="sqlite:///store/mlflow.db", artifact_location="store/a"),
                       root=tmp_path)
    with tracking.stage_run("demo", tags={"note": "uses very-secret-value"}) as run:
        tracking.log_params({"tune": {"storage": "postgresql+psycopg2://optuna:dbpass99@db:5432/optuna"}})
        tracking.log_dict({"nested": ["very-secret-value", {"url": "http://u:p4ss@h"}]}, "x.json")
        tracking.log_text("token very-secret-value", "x.txt")
    got = mlflow.get_run(run.info.run_id)
    assert got.data.tags["note"] == "uses ***"
    assert got.data.params["tune.storage"] == "postgresql+psycopg2://optuna:***@db:5432/optuna"
    local = mlflow.artifacts.download_artifacts(run_id=run.info.run_id, dst_path=str(tmp_path / "dl"))
    texts = [p.read_text() for p in (tmp_path / "dl").rglob("*") if p.is_file()]
    assert local and len(texts) == 2
    assert all("very-secret-value" not in t and "p4ss" not in t for t in texts)
    assert '"***"' in "".join(texts)
