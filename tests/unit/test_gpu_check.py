"""bench/gpu_check.py: the device comparison it reports, and its answer on a machine without CUDA."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bench_scripts import load_bench_script

from biaslab.metrics.values import MetricValue

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_check.py"


def _module():
    return load_bench_script("gpu_check")


def _metric(value, low=None, high=None):
    return MetricValue(value=value, direction="lower", ci_low=low, ci_high=high)


def test_compare_reports_the_largest_difference_the_ones_beyond_tolerance_and_outside_the_ci():
    reference = {"a": _metric(0.50, 0.40, 0.60), "b": _metric(0.10, 0.05, 0.15), "c": _metric(1.0),
                 "gone": _metric(0.3)}
    other = {"a": _metric(0.505), "b": _metric(0.20), "c": _metric(1.0)}
    result = _module().compare(reference, other, tolerance=0.01)
    assert result["metrics"] == 3
    assert result["worst"] == "b" and result["max_abs_diff"] == pytest.approx(0.10)
    assert result["mean_abs_diff"] == pytest.approx((0.005 + 0.10 + 0.0) / 3, abs=1e-6)
    assert result["beyond_tolerance"] == ["b: 0.1000 vs 0.2000"]
    assert result["outside_reference_ci"] == ["b: 0.2000 outside [0.0500, 0.1500]"]
    assert result["missing"] == ["gone"]


def test_compare_treats_a_metric_undefined_on_both_devices_as_agreeing_and_on_one_as_missing():
    nan = float("nan")
    result = _module().compare({"x": _metric(nan), "y": _metric(nan)}, {"x": _metric(nan), "y": _metric(0.2)}, 0.01)
    assert result["metrics"] == 0 and result["missing"] == ["y"] and result["max_abs_diff"] is None


def test_quantization_auto_is_none_on_the_cpu_and_as_asked_otherwise():
    module = _module()
    assert module.resolve_quantization("auto", cpu=True) == "none"
    assert module.resolve_quantization("4bit", cpu=True) == "none"
    assert module.resolve_quantization("8bit", cpu=False) == "8bit"


def test_the_optimizer_is_auto_and_the_plan_takes_no_bitsandbytes_optimizer_without_bitsandbytes(monkeypatch):
    """The plan's auto on a GPU was paged_adamw_8bit even without bitsandbytes, and stopped (found on an H200);
    it now takes adamw_torch_fused there, so the check leaves the choice to it."""
    from biaslab.mitigation.lora import training_plan
    from biaslab.mitigation.lora.training_plan import Capabilities

    module = _module()
    assert module.resolve_optimizer(cpu=True) == "auto"
    for bnb, expected in ((None, "auto"), ("0.50.2", "auto")):
        caps = Capabilities(cuda=True, bf16=True, bitsandbytes=bnb, device_name="H200")
        monkeypatch.setattr(training_plan, "probe_capabilities", lambda caps=caps: caps)
        optimizer = module.resolve_optimizer(cpu=False)
        assert optimizer == expected
        settings = module.lora_settings(_params(), Path("."), "lora_clp", steps=2, quantization="none",
                                        optimizer=optimizer)
        assert training_plan.plan_training(settings, caps).optimizer == (
            "adamw_torch_fused" if bnb is None else "paged_adamw_8bit")


def _params():
    from biaslab.config import load_params

    return load_params(Path(__file__).resolve().parents[2] / "params.yaml")


def test_without_cuda_it_skips_with_a_message_and_exit_0(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the check runs for real here")
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "SKIPPED" in done.stdout and "nothing ran" in done.stdout
    assert not list(tmp_path.iterdir())  # nothing ran, nothing written


def test_lora_settings_train_the_named_variant_as_the_finetune_stage_resolves_it(tmp_path):
    """``--lora-variant lora_clp`` trains the logit-pairing objective with its own study's rate; ``lora`` the tune's."""
    from biaslab.config import load_params

    params = load_params(Path(__file__).resolve().parents[2] / "params.yaml")
    tuned = tmp_path / params.tune.output_dir / "best_params.json"
    tuned.parent.mkdir(parents=True)
    tuned.write_text('{"params": {"learning_rate": 0.000123, "r": 32}}', encoding="utf-8")
    module = _module()

    plain = module.lora_settings(params, tmp_path, "lora", steps=3, quantization="4bit")
    assert (plain.learning_rate, plain.r, plain.objective) == (0.000123, 32, params.lora.objective)
    assert (plain.max_steps, plain.quantization, plain.eval_steps) == (3, "4bit", 0)

    own = tmp_path / params.tune_for("lora_clp").output_dir / "best_params.json"  # tune_variant@lora_clp's study
    own.parent.mkdir(parents=True)
    own.write_text('{"params": {"learning_rate": 0.00077, "max_steps": 60}}', encoding="utf-8")
    clp = module.lora_settings(params, tmp_path, "lora_clp", steps=3, quantization="none")
    expected = params.lora_for("lora_clp")
    assert clp.objective == "logit_pairing" and expected.use_tuned
    assert (clp.learning_rate, clp.r, clp.pairing_pairs) == (0.00077, expected.r, expected.pairing_pairs)
    assert (clp.max_steps, clp.quantization) == (3, "none")
