"""DVC's experiment queue runs the pipeline offline in its temporary copy (issue 37).

``dvc exp run --queue`` + ``dvc queue start`` run a queued experiment in ``<workspace>/.dvc/tmp/exps/<tmp>``
and delete that copy afterwards. A tiny real pipeline (one stage, in a fresh git + DVC repository, using
biaslab's own params sections and tracking) checks that the queued stage finds the data mirror given
relative to the workspace (``../mirror``, as ``../shared/datasets``), logs its MLflow run into the
workspace's ``sqlite:///mlruns/mlflow.db``, and that its results come back with ``dvc exp show`` and
``dvc exp apply``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml
from workspace import init_repo, run_in

pytestmark = pytest.mark.slow
SRC = Path(__file__).resolve().parents[2] / "src"

STAGE = '''
import json
from pathlib import Path

import yaml

from biaslab.config import DataConfig, TrackingConfig
from biaslab.tracking import runs

params = yaml.safe_load(Path("params.yaml").read_text())
words = len((DataConfig(**params["data"]).resolved_mirror_dir() / "words.txt").read_text().split())
runs.configure(TrackingConfig(**params["tracking"]), ".")
with runs.stage_run("count", variant="tiny"):
    runs.log_metric("words", words * params["scale"])
Path("metrics.json").write_text(json.dumps({"words": words * params["scale"]}))
'''


def test_a_queued_experiment_finds_the_mirror_and_logs_to_the_workspaces_store(tmp_path):
    import mlflow

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "words.txt").write_text("one two three four five")
    work = tmp_path / "work"
    work.mkdir()
    (work / "stage.py").write_text(STAGE)
    (work / "params.yaml").write_text(yaml.safe_dump({
        "scale": 1, "data": {"mirror_dir": "../mirror"},
        "tracking": {"tracking_uri": "sqlite:///mlruns/mlflow.db", "artifact_location": "mlruns/artifacts",
                     "experiment": "tiny"}}))
    (work / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"count": {
        "cmd": "python stage.py", "deps": ["stage.py"], "params": ["scale", "data.mirror_dir"],
        "metrics": [{"metrics.json": {"cache": False}}]}}}))
    (work / ".gitignore").write_text("mlruns/\n")
    import sys

    env = {**os.environ, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1", "DVC_NO_ANALYTICS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for name in ("MLFLOW_TRACKING_URI", "BIASLAB_DATA_DIR"):
        env.pop(name, None)
    init_repo(work, env)
    run_in(work, env, "dvc", "repro", timeout=300)  # the baseline, in the workspace itself
    run_in(work, env, "git", "add", "dvc.lock", "metrics.json")
    run_in(work, env, "git", "-c", "user.email=t@b", "-c", "user.name=t", "commit", "-qm", "baseline")

    run_in(work, env, "dvc", "exp", "run", "--queue", "-n", "tripled", "-S", "scale=3", timeout=300)
    run_in(work, env, "dvc", "queue", "start", "-j", "1", timeout=300)
    deadline = time.time() + 600
    status = ""
    while time.time() < deadline:
        status = run_in(work, env, "dvc", "queue", "status", timeout=120)
        if "Success" in status or "Failed" in status:
            break
        time.sleep(2)
    logs = run_in(work, env, "dvc", "queue", "logs", "tripled", timeout=120)
    assert "Success" in status, f"{status}\n{logs}"
    assert not list((work / ".dvc" / "tmp" / "exps").glob("tmp*/mlruns"))  # no store left in a copy

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{work / 'mlruns' / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("tiny").experiment_id])
    assert sorted(r.data.metrics["words"] for r in runs) == [5.0, 15.0]  # the baseline's run and the queued one
    assert all(r.info.status == "FINISHED" for r in runs)
    queued = max(runs, key=lambda r: r.data.metrics["words"])
    assert queued.info.artifact_uri.startswith((work / "mlruns" / "artifacts").as_uri())

    shown = json.loads(run_in(work, env, "dvc", "exp", "show", "--json", timeout=120))
    text = json.dumps(shown)
    assert "tripled" in text and '"words": 15' in text
    run_in(work, env, "dvc", "exp", "apply", "tripled", timeout=120)
    assert json.loads((work / "metrics.json").read_text()) == {"words": 15}
    assert yaml.safe_load((work / "params.yaml").read_text())["scale"] == 3
    run_in(work, env, "dvc", "queue", "stop", timeout=120)
