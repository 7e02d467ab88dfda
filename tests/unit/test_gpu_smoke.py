"""`make gpu-smoke` on a machine without CUDA: says it did not run and exits 0; its params overlay is valid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bench_scripts import load_bench_script

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_smoke.py"


def _module():
    return load_bench_script("gpu_smoke")


def test_without_cuda_it_skips_with_a_message_and_exit_0():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: make gpu-smoke runs for real here")
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "SKIPPED" in done.stdout and "nothing ran" in done.stdout and "no CUDA device" in done.stdout


@pytest.mark.parametrize("cpu", [False, True])
def test_the_overlay_is_valid_params_for_bf16_and_4bit(tmp_path, cpu):
    from biaslab.config import Params

    params = Params.model_validate(_module().smoke_params(tmp_path / "model", tmp_path / "mirror", cpu))
    assert params.model.source == str(tmp_path / "model") and params.model.dtype == "auto"
    assert params.data.sample is not None and params.data.sample.per_group == 4
    assert (params.lora.quantization, params.scoring.device) == (("none", "cpu") if cpu else ("4bit", "cuda"))
    assert params.tune.n_trials == 2
    studies = {name: params.tune_for(name) for name, v in params.variants.items() if v.tune_overrides}
    assert studies, "params.yaml has variants with their own study: the smoke must shrink them too"
    for name, study in studies.items():  # each variant's own study runs the smoke's budget, not 4 x 90 steps
        assert (study.n_trials, study.trial_max_steps) == (2, 2), name
        assert study.search_space.get("max_steps", [2]) == [2], name


def test_overlay_keys_must_exist():
    with pytest.raises(KeyError):
        _module().overlay_params({"lora": {}}, {"nope.key": 1})
