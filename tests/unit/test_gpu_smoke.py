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


@pytest.mark.parametrize("cpu, quantization, want", [(False, "8bit", ("8bit", "cuda")), (False, "none", ("none", "cuda")),
                                                   (False, "4bit", ("4bit", "cuda")), (True, "8bit", ("none", "cpu"))])
def test_the_overlay_is_valid_params_for_bf16_and_each_quantization(tmp_path, cpu, quantization, want):
    from biaslab.config import Params

    params = Params.model_validate(_module().smoke_params(tmp_path / "model", tmp_path / "mirror", cpu, quantization))
    assert params.model.source == str(tmp_path / "model") and params.model.dtype == "auto"
    assert params.data.sample is not None and params.data.sample.per_group == 4
    assert (params.lora.quantization, params.scoring.device) == want
    assert params.tune.n_trials == 2
    studies = {name: params.tune_for(name) for name, v in params.variants.items() if v.tune_overrides}
    assert studies, "params.yaml has variants with their own study: the smoke must shrink them too"
    for name, study in studies.items():  # each variant's own study runs the smoke's budget, not 4 x 90 steps
        assert (study.n_trials, study.trial_max_steps) == (2, 2), name
        assert study.search_space.get("max_steps", [2]) == [2], name


def test_overlay_keys_must_exist():
    with pytest.raises(KeyError):
        _module().overlay_params({"lora": {}}, {"nope.key": 1})


def _plan(keep):
    import yaml

    smoke = _module()
    root = Path(__file__).resolve().parents[2]
    every = list(yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))["variants"])
    params = smoke.smoke_params(Path("model"), Path("mirror"), False, "8bit", keep)
    dvc = smoke.prune_variants(yaml.safe_load((root / "dvc.yaml").read_text(encoding="utf-8")), every, keep)
    return smoke, params, dvc, smoke.planned_stages(dvc, params)


def test_the_smoke_reaches_finetune_evaluate_and_register_within_its_start_up_budget():
    """The last H200 lease ran every variant and was killed in tune_variant@lora_clp_cda: the smoke's subset and
    target must lead through finetune and evaluate to register, with the start-up floor inside 8 minutes."""
    smoke, params, dvc, stages = _plan(tuple(_module().SMOKE_VARIANTS))
    assert set(params["variants"]) == {"base", "lora", "lora_clp"}
    for needed in ("tune", "tune_variant@lora_clp", "finetune@lora", "finetune@lora_clp", "evaluate@base",
                   "evaluate@lora", "evaluate@lora_clp", "register", "base_model", "prepare", "raw_data"):
        assert needed in stages, needed
    assert not {s for s in stages if s.split("@")[0] in ("calibrate", "control_model", "report", "edit_embeddings")}
    assert not any("lora_cda" in s or "soft" in s for s in stages)
    assert smoke.predicted_startup(stages) <= smoke.BUDGET_SECONDS
    assert "edit_embeddings" not in dvc["stages"] and set(dvc["stages"]["finetune"]["foreach"]) == {"lora", "lora_clp"}
    register_deps = dvc["stages"]["register"]["deps"]
    assert "models/lora" in register_deps and "metrics/lora_clp.json" in register_deps
    assert not any(d in register_deps for d in ("models/soft", "metrics/lora_cda.json", "models/lora_clp_cda"))
    compile(smoke.SERVE, "serve", "exec")  # the pyfunc child's code at least parses


def test_every_variant_is_over_the_start_up_budget_and_an_unknown_variant_is_named():
    smoke, params, dvc, stages = _plan(tuple(_module().SMOKE_VARIANTS))
    import yaml

    root = Path(__file__).resolve().parents[2]
    every = tuple(yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))["variants"])
    _, _, _, all_stages = _plan(every)
    assert set(stages) < set(all_stages) and "tune_variant@lora_clp_cda" in all_stages
    assert smoke.predicted_startup(all_stages) > smoke.BUDGET_SECONDS  # why the smoke runs a subset
    with pytest.raises(KeyError, match="nope"):
        smoke.smoke_params(Path("model"), Path("mirror"), False, "8bit", ("base", "nope"))


def test_the_device_environment_script_parses():
    script = Path(__file__).resolve().parents[2] / "bench" / "gpu_env.sh"
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_checks_read_every_lora_variants_training_plan(tmp_path):
    """check_outputs on a hand-made workspace: lora_clp trained on the CPU in an 8-bit run is a problem by name."""
    import json

    import torch
    import yaml
    from safetensors.torch import save_file

    work = tmp_path
    variants = {"base": {"method": "none"}, "lora": {"method": "lora"}, "lora_clp": {"method": "lora"}}
    (work / "params.yaml").write_text(yaml.safe_dump({"variants": variants}))
    for name in variants:
        (work / "metrics").mkdir(exist_ok=True)
        (work / "metrics" / f"{name}.json").write_text(json.dumps({"metrics": {"m": {"value": 0.5}}}))
    (work / "models" / "base").mkdir(parents=True)
    save_file({"w": torch.zeros(2, dtype=torch.bfloat16)}, str(work / "models" / "base" / "model.safetensors"))
    planned = {"device": "cuda", "quantization": "8bit", "mixed_precision": "bf16"}
    for name, training in (("lora", planned), ("lora_clp", {**planned, "device": "cpu"})):
        (work / "models" / name).mkdir(parents=True)
        (work / "models" / name / "variant.json").write_text(json.dumps({"training": training}))
    (work / "runs").mkdir()
    (work / "runs" / "register.json").write_text(json.dumps({"versions": {n: "1" for n in variants}}))
    summary = _module().check_outputs(work, cpu=False, quantization="8bit")
    assert summary["problems"] == ["lora_clp trained with device='cpu', expected 'cuda'"]
    assert summary["lora_training"] == planned and summary["dtypes"] == {"models/base": ["bfloat16"]}
