"""Two worker processes sharing one study complete exactly ``n_trials`` trials between them:
unique numbers and parameters, none lost, none run twice. Run against the storages workers can share:
the journal file (default), an RDB URL in params (SQLite), and PostgreSQL given as docker-compose.yml
gives it, through ``BIASLAB_OPTUNA_STORAGE`` over params' journal (a throwaway cluster from conftest.py;
skipped with an install hint when the PostgreSQL server binaries are absent)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from workspace import write_workspace

pytestmark = pytest.mark.slow

N_TRIALS = 4
WORKER = r"""
import json, sys, time
from pathlib import Path
import pandas as pd
from biaslab.config import LoraConfig, TuneConfig
from biaslab.mitigation.lora.tune import tune

root, worker = Path(sys.argv[1]), sys.argv[2]
frame = pd.read_parquet(root / "gbem.parquet")
(root / f"ready-{worker}").touch()
while len(list(root.glob("ready-*"))) < 2:  # start together, so the workers really compete
    time.sleep(0.05)
cfg = TuneConfig(n_trials=int(sys.argv[3]), storage=sys.argv[4], trial_max_steps=1,
                 objective="logprob", output_dir="tune")
result = tune(root / "base", frame, cfg, LoraConfig(per_device_batch_size=4, gradient_accumulation_steps=1), root=root)
print("RESULT " + json.dumps({"ran": result.ran_here, "study": result.study_name}))
"""


@pytest.fixture()
def workspace(tmp_path, mirror, tiny_causal_model, tiny_tokenizer) -> Path:
    splits = ["validation"] + ["finetune"] * 3
    return write_workspace(tmp_path, mirror, tiny_causal_model, tiny_tokenizer, splits)


@pytest.mark.parametrize("storage", ["journal:tune/study.journal", "sqlite:///{root}/study.db", "postgresql"])
def test_two_workers_complete_exactly_n_trials(request, workspace, storage):
    import optuna
    from optuna.trial import TrialState

    from biaslab.mitigation.lora.study import make_storage

    env = {k: v for k, v in os.environ.items() if k != "BIASLAB_OPTUNA_STORAGE"}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    params_storage = storage = storage.format(root=workspace)
    if storage == "postgresql":  # skips when PostgreSQL is not installed
        storage = env["BIASLAB_OPTUNA_STORAGE"] = request.getfixturevalue("postgres_db")("optuna")
        params_storage = "journal:tune/unused.journal"  # the environment must win over params
    if not storage.startswith("journal:"):
        # an RDB schema is created once before workers start (as `optuna create-study` does in production);
        # two processes creating it at the same instant race on alembic's version row
        make_storage(storage, workspace)
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(workspace), str(i), str(N_TRIALS), params_storage],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (1, 2)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT "))[7:]))

    assert results[0]["study"] == results[1]["study"]
    ran = results[0]["ran"] + results[1]["ran"]
    study = optuna.load_study(study_name=results[0]["study"], storage=make_storage(storage, workspace))
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(complete) == N_TRIALS  # exactly the target: none lost, none extra
    assert sorted(ran) == sorted(t.number for t in complete)  # each trial run by exactly one worker
    assert len({t.number for t in complete}) == N_TRIALS
    assert len({json.dumps(t.params, sort_keys=True) for t in complete}) == N_TRIALS  # no duplicated draws
    leftovers = [t for t in study.trials if t.state != TrialState.COMPLETE]
    assert all(t.state == TrialState.FAIL and t.user_attrs.get("surplus") for t in leftovers)
    assert not study.get_trials(states=(TrialState.RUNNING,))
    assert not (workspace / "tune" / "unused.journal").exists()


VICTIM = r"""
import sys, time
from pathlib import Path
import biaslab.mitigation.lora.tune as tune_module

root = Path(sys.argv[1])


def blocking_objective(*args, **kwargs):  # a trial that is still training when its worker is SIGKILLed
    def objective(trial):
        trial.suggest_float("dropout", 0.0, 0.3)
        (root / "victim-trial").write_text(str(trial.number))
        time.sleep(600)
    return objective


tune_module.make_objective = blocking_objective
sys.argv = [sys.argv[0], sys.argv[1], "victim", *sys.argv[3:]]
exec(compile(sys.argv.pop(), "worker", "exec"))
"""


@pytest.mark.parametrize("storage", ["journal:tune/study.journal", "sqlite:///{root}/study.db"])
def test_a_killed_workers_trial_is_retried_by_the_survivor(workspace, storage):
    """Two workers; one is SIGKILLed mid-trial. The survivor fails that trial (RDB: Optuna's heartbeat went
    silent; journal: its process is gone), runs Optuna's retry of it with the same params, and returns with
    exactly ``n_trials`` complete."""
    import signal
    import time

    import optuna
    from optuna.trial import TrialState

    from biaslab.mitigation.lora.study import make_storage

    env = {k: v for k, v in os.environ.items() if k != "BIASLAB_OPTUNA_STORAGE"}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    storage = storage.format(root=workspace)
    if not storage.startswith("journal:"):
        make_storage(storage, workspace)
    worker = WORKER.replace("trial_max_steps=1,", "trial_max_steps=1, heartbeat_seconds=1, heartbeat_grace_seconds=3,")
    victim = subprocess.Popen([sys.executable, "-c", VICTIM, str(workspace), "victim", str(N_TRIALS), storage, worker],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    survivor = subprocess.Popen([sys.executable, "-c", worker, str(workspace), "survivor", str(N_TRIALS), storage],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    marker = workspace / "victim-trial"  # created, then written: wait for the number, not only the file
    while time.time() < deadline and victim.poll() is None and not (marker.exists() and marker.read_text().strip()):
        time.sleep(0.1)
    assert victim.poll() is None, victim.communicate()[1][-3000:]
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    out, err = survivor.communicate(timeout=300)
    assert survivor.returncode == 0, err[-3000:]
    result = json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT "))[7:])

    killed = int((workspace / "victim-trial").read_text())
    study = optuna.load_study(study_name=result["study"], storage=make_storage(storage, workspace))
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(complete) == N_TRIALS and sorted(result["ran"]) == sorted(t.number for t in complete)
    assert study.trials[killed].state == TrialState.FAIL
    retry = [t for t in complete if t.system_attrs.get("failed_trial") == killed]
    assert len(retry) == 1 and retry[0].params["dropout"] == study.trials[killed].params["dropout"]
    assert not study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
