"""Several processes log to one `mlflow server` on loopback at once; no run, metric or artifact is lost
and no run is left RUNNING.

Why a server: the bare SQLite file serialises writers and raises "database is locked" under
concurrent writes from several processes; a tracking server is the supported multi-writer setup. Run
against two backend stores: SQLite, and PostgreSQL (the production layout of docker-compose.yml, on a
throwaway cluster from conftest.py; skipped with an install hint when the server binaries are absent).
Artifacts go through the server's proxy (``--artifacts-destination``, the stand-in for s3://... or gs://...)
and must land there, not on the workers' disks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tracking_server import running_server

pytestmark = pytest.mark.slow

N_WORKERS, N_RUNS, N_STEPS = 3, 3, 5
WORKER = r"""
import sys
from biaslab.tracking import runs as tracking
from biaslab.config import TrackingConfig
from biaslab.metrics.values import MetricValue
worker = int(sys.argv[1])
tracking.configure(TrackingConfig(experiment="concurrency"))
for i in range(int(sys.argv[2])):
    with tracking.stage_run("evaluate", variant=f"w{worker}-{i}"):
        tracking.log_metric_values({"demo/score": MetricValue(worker + i / 10, "higher")})
        for step in range(int(sys.argv[3])):
            tracking.log_metric("loss", 1.0 / (step + 1), step=step)
        tracking.log_dict({"worker": worker, "i": i}, "result/summary.json")
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def backend_store(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'server.db'}"
    return request.getfixturevalue("postgres_db")("mlflow")  # skips when PostgreSQL is not installed


@pytest.fixture
def mlflow_server(backend_store, tmp_path):
    with running_server(tmp_path, backend_store) as url:
        yield url


def test_parallel_processes_log_to_one_server(mlflow_server, tmp_path):
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=mlflow_server)
    # No experiment yet: the workers race to create it through tracking.configure(), which must give it
    # the server's proxied artifact root (not a local path that remote artifacts would never leave).
    workdir = tmp_path / "workers"
    workdir.mkdir()
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_server}
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(w), str(N_RUNS), str(N_STEPS)],
                                env=env, cwd=workdir, stderr=subprocess.PIPE, text=True) for w in range(N_WORKERS)]
    for proc in workers:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]

    experiment = client.get_experiment_by_name("concurrency")
    assert experiment.artifact_location.startswith("mlflow-artifacts:"), experiment.artifact_location
    assert len(client.search_experiments()) == 2  # "Default" and ours: the race created exactly one
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    (tmp_path / "download").mkdir()
    assert len(runs) == N_WORKERS * N_RUNS
    expected = {f"w{w}-{i}" for w in range(N_WORKERS) for i in range(N_RUNS)}
    assert {r.data.tags["variant"] for r in runs} == expected
    assert all(r.info.status == "FINISHED" for r in runs)
    for run in runs:
        worker, i = (int(x) for x in run.data.tags["variant"][1:].split("-"))
        assert run.data.metrics["demo/score"] == pytest.approx(worker + i / 10)
        history = client.get_metric_history(run.info.run_id, "loss")
        assert sorted(m.step for m in history) == list(range(N_STEPS))
        # the artifact, read back through the server, and stored under its --artifacts-destination
        assert [f.path for f in client.list_artifacts(run.info.run_id, "result")] == ["result/summary.json"]
        local = client.download_artifacts(run.info.run_id, "result/summary.json", str(tmp_path / "download"))
        assert json.loads(Path(local).read_text()) == {"worker": worker, "i": i}
    stored = sorted((tmp_path / "artifacts").rglob("summary.json"))
    assert len(stored) == N_WORKERS * N_RUNS
    assert {p.relative_to(tmp_path / "artifacts").parts[1] for p in stored} == {r.info.run_id for r in runs}
    assert sorted(json.loads(p.read_text())["worker"] for p in stored) == sorted(
        w for w in range(N_WORKERS) for _ in range(N_RUNS))
    assert not [p for p in workdir.rglob("*") if p.is_file()]  # nothing written beside the workers
