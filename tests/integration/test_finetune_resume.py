"""A LoRA fine-tune killed (SIGKILL) right after its first checkpoint resumes from it and ends where an
uninterrupted run ends: same global step, same adapter weights. A rerun of a finished one trains nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from workspace import write_workspace

pytestmark = pytest.mark.slow

SCRIPT = r"""
import json, os, signal, sys
import pandas as pd
from transformers import TrainerCallback
from biaslab.config import LoraConfig
from biaslab.mitigation.lora.train import finetune

base, data, out, ckpt, kill_at = sys.argv[1:6]
steps, points = [], []

class Curves:  # the RunLog calls training makes: every curve point it sends to the stage's MLflow run
    def active_run_id(self):
        return "run"

    def log_metric(self, name, value, step=None):
        points.append([name, step, value])

class Record(TrainerCallback):
    def on_step_end(self, args, state, control, **kw):
        steps.append(state.global_step)

    def on_save(self, args, state, control, **kw):  # called after checkpoint-N is fully written
        if int(kill_at) and state.global_step >= int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)

cfg = LoraConfig(max_steps=6, save_steps=2, per_device_batch_size=2, gradient_accumulation_steps=2,
                 logging_steps=1, eval_steps=0, learning_rate=1e-2, dropout=0.1, checkpoint_dir=ckpt)
result = finetune(base, pd.read_parquet(data), cfg, out, base_ref="models/base", callbacks=[Record()], log=Curves())
print("RESULT " + json.dumps({"global_step": result.global_step, "resumed_from": result.resumed_from,
                              "steps": steps, "points": points}))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _start(tmp: Path, name: str, kill_at: int) -> subprocess.Popen:
    args = [sys.executable, "-c", SCRIPT, str(tmp / "base"), str(tmp / "gbem.parquet"), str(tmp / f"{name}_out"),
            str(tmp / f"{name}_ckpt"), str(kill_at)]
    return subprocess.Popen(args, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(proc: subprocess.Popen) -> dict:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    result = json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])
    return {**result, "stderr": err}


def _adapter(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "adapter_model.safetensors"))


@pytest.fixture()
def workspace(tmp_path, mirror, tiny_causal_model, tiny_tokenizer) -> Path:
    splits = ["finetune"] * 4 + ["validation"] * 2
    return write_workspace(tmp_path, mirror, tiny_causal_model, tiny_tokenizer, splits)


def test_killed_finetune_resumes_from_its_checkpoint_and_matches_an_uninterrupted_run(workspace):
    killed, reference = _start(workspace, "run", kill_at=2), _start(workspace, "ref", kill_at=0)
    killed.communicate(timeout=240)
    assert killed.returncode == -9  # SIGKILL: no cleanup code ran
    assert (workspace / "run_ckpt" / "checkpoint-2" / "trainer_state.json").is_file()
    assert not (workspace / "run_out").exists()  # nothing half-written as the variant

    resumed = _result(_start(workspace, "run", kill_at=0))
    uninterrupted = _result(reference)
    assert resumed["resumed_from"] == "checkpoint-2"
    assert resumed["steps"] == [3, 4, 5, 6]  # continued from the checkpoint, did not restart
    assert resumed["global_step"] == uninterrupted["global_step"] == 6
    assert uninterrupted["resumed_from"] is None
    # stderr is a pipe, not a terminal: training progress is plain lines (no \r redraws, no per-log dicts),
    # ending with one line at the final step; the resumed run's bar starts from its checkpoint
    for run in (resumed, uninterrupted):
        assert "\r" not in run["stderr"] and "{'loss'" not in run["stderr"]
        assert "FutureWarning" not in run["stderr"], run["stderr"][-2000:]  # PEFT's read of a deprecated property
        assert [line for line in run["stderr"].splitlines() if line.startswith("train:") and line.endswith(" done")
                and "6/6" in line], run["stderr"][-2000:]

    got, want = _adapter(workspace / "run_out"), _adapter(workspace / "ref_out")
    assert got.keys() == want.keys() and any("lora_B" in k for k in got)
    for key in want:
        assert float((got[key] - want[key]).abs().max()) < 1e-5, key
    assert max(float(t.abs().max()) for k, t in want.items() if "lora_B" in k) > 1e-4  # training moved B off 0

    manifest = json.loads((workspace / "run_out" / "variant.json").read_text())
    assert manifest["base"] == "models/base" and manifest["method"] == "lora"
    assert manifest["hyperparameters"]["r"] == 16 and manifest["global_step"] == 6

    # the stage rerun with the finished run's checkpoints (persisted by DVC): its last checkpoint is the result.
    # Resuming the Trainer from it would take a 7th step (at learning rate 0) and record global_step 7
    again = _result(_start(workspace, "ref", kill_at=0))
    assert again["resumed_from"] == "checkpoint-6" and again["steps"] == [] and again["global_step"] == 6
    assert not (workspace / "ref_ckpt" / "checkpoint-7").exists()
    rerun = _adapter(workspace / "ref_out")
    assert all(bool((rerun[key] == want[key]).all()) for key in want)
    assert json.loads((workspace / "ref_out" / "variant.json").read_text())["global_step"] == 6

    # the curves: a resumed run sends the points up to its checkpoint from the checkpoint's log history, so its
    # MLflow run (and reports/curves) has every step; the rerun's are the uninterrupted run's, value for value,
    # less the end-of-training summary, which no checkpoint holds
    summary = {"train/train_runtime", "train/train_samples_per_second", "train/train_steps_per_second",
               "train/total_flos", "train/train_loss"}
    curve = {(name, step): value for name, step, value in uninterrupted["points"] if name not in summary}
    assert {("train/loss", step) for step in range(1, 7)} <= curve.keys()
    assert {(name, step) for name, step, _ in resumed["points"] if name not in summary} == curve.keys()
    assert {(name, step): value for name, step, value in again["points"]} == curve


def test_finetune_runs_under_accelerate_launch(workspace):
    """The multi-GPU path: the same training code under `accelerate launch` (1 CPU process here)."""
    launcher = Path(sys.executable).with_name("accelerate")
    script = workspace / "train_script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    args = [str(launcher), "launch", "--cpu", "--num_processes", "1", "--num_machines", "1",
            "--mixed_precision", "no", "--dynamo_backend", "no", str(script), str(workspace / "base"),
            str(workspace / "gbem.parquet"), str(workspace / "acc_out"), str(workspace / "acc_ckpt"), "0"]
    proc = subprocess.Popen(args, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    result = _result(proc)
    assert result["global_step"] == 6 and result["resumed_from"] is None
    assert (workspace / "acc_out" / "adapter_model.safetensors").is_file()
