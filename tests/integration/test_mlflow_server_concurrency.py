"""Several processes log to one `mlflow server` on loopback at once; no run is lost or left RUNNING.

Why a server: the bare SQLite file serialises writers and raises "database is locked" under
concurrent writes from several processes; a tracking server (backed by PostgreSQL in production, see
docker-compose.yml) is the supported multi-writer setup.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

WORKER = r"""
import sys
from biaslab import tracking
from biaslab.config import TrackingConfig
from biaslab.metrics.values import MetricValue
worker = int(sys.argv[1])
tracking.configure(TrackingConfig(experiment="concurrency"))
for i in range(3):
    with tracking.stage_run("evaluate", variant=f"w{worker}-{i}"):
        tracking.log_metric_values({"demo/score": MetricValue(worker + i / 10, "higher")})
        for step in range(5):
            tracking.log_metric("loss", 1.0 / (step + 1), step=step)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path):
    port = free_port()
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    proc = subprocess.Popen(
        [str(mlflow_bin), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--artifacts-destination", str(tmp_path / "artifacts")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300  # slow to start on a loaded 2-core machine
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                pytest.fail("mlflow server exited at start-up")
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("mlflow server did not become healthy in 300 s")
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_parallel_processes_log_to_one_server(mlflow_server, tmp_path):
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_server}
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(w)], env=env, cwd=tmp_path) for w in range(3)]
    assert [p.wait(timeout=300) for p in workers] == [0, 0, 0]

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name("concurrency")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    assert len(runs) == 9
    assert {r.data.tags["variant"] for r in runs} == {f"w{w}-{i}" for w in range(3) for i in range(3)}
    assert all(r.info.status == "FINISHED" for r in runs)
    assert all(len(client.get_metric_history(r.info.run_id, "loss")) == 5 for r in runs)
