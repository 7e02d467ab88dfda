"""LoRA precision on the hardware at hand: the resolved plan per machine, and clear errors where it cannot run.

The machines are injected (:class:`Capabilities`), so the GPU choices are tested on a CPU-only host;
the GPU path itself has not run here (see docs/lora_tuning.md).
"""

from __future__ import annotations

import pytest
import torch

from biaslab.config import LoraConfig
from biaslab.mitigation.lora import training_plan
from biaslab.mitigation.lora.training_plan import Capabilities, TrainingHardwareError, plan_training

CPU = Capabilities(cuda=False, bf16=False, bitsandbytes=None)
A100 = Capabilities(cuda=True, bf16=True, bitsandbytes="0.50.2", device_name="A100")
T4 = Capabilities(cuda=True, bf16=False, bitsandbytes="0.50.2", device_name="Tesla T4")
GPU_NO_BNB = Capabilities(cuda=True, bf16=True, bitsandbytes=None, device_name="L4")


def test_auto_on_the_cpu_is_float32_without_checkpointing_and_the_transformers_optimizer():
    plan = plan_training(LoraConfig(), CPU)
    assert plan.describe() == {"device": "cpu", "load_dtype": "float32", "mixed_precision": "none",
                               "gradient_checkpointing": False, "quantization": "none",
                               "optimizer": "adamw_torch_fused"}
    assert plan.sft_arguments() == {"bf16": False, "fp16": False, "activation_checkpointing": False,
                                    "activation_checkpointing_kwargs": None, "optim": "adamw_torch_fused"}
    assert plan.load_arguments() == {"dtype": torch.float32}


@pytest.mark.parametrize("caps, mixed, dtype", [(A100, "bf16", "bfloat16"), (T4, "fp16", "float16")])
def test_auto_on_a_gpu_takes_the_precision_the_hardware_has(caps, mixed, dtype):
    plan = plan_training(LoraConfig(), caps)
    assert (plan.device, plan.mixed_precision, plan.load_dtype) == ("cuda", mixed, dtype)
    assert plan.gradient_checkpointing and plan.optimizer == "paged_adamw_8bit"  # GBEM-UA's optimizer
    args = plan.sft_arguments()
    assert args[mixed] is True and args["activation_checkpointing"] is True
    assert args["activation_checkpointing_kwargs"] == {"use_reentrant": False}


@pytest.mark.parametrize("bits", ["4bit", "8bit"])
def test_kbit_base_gets_a_bitsandbytes_config_on_one_gpu(bits, monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    plan = plan_training(LoraConfig(quantization=bits, gradient_checkpointing=False), A100)
    args = plan.load_arguments()
    quant = args["quantization_config"]
    assert args["device_map"] == {"": 0} and args["dtype"] == torch.bfloat16 and not plan.gradient_checkpointing
    if bits == "4bit":
        assert quant.load_in_4bit and quant.bnb_4bit_quant_type == "nf4" and quant.bnb_4bit_use_double_quant
        assert quant.bnb_4bit_compute_dtype == torch.bfloat16
    else:
        assert quant.load_in_8bit and not quant.load_in_4bit


@pytest.mark.parametrize("overrides, caps, message", [
    ({"quantization": "4bit"}, CPU, r"lora\.quantization: 4bit needs a CUDA GPU.*quantization: none"),
    ({"quantization": "8bit"}, GPU_NO_BNB,
     r"lora\.quantization: 8bit needs the bitsandbytes package.*pip install -e '\.\[gpu\]'.*make run` on a CUDA host"),
    ({"optimizer": "paged_adamw_8bit"}, CPU, r"lora\.optimizer: paged_adamw_8bit is a bitsandbytes optimizer"),
    ({"optimizer": "paged_adamw_8bit"}, GPU_NO_BNB,
     r"lora\.optimizer: paged_adamw_8bit needs the bitsandbytes package.*\.\[gpu\].*adamw_torch_fused"),
    ({"optimizer": "adamw_8bit"}, GPU_NO_BNB, r"lora\.optimizer: adamw_8bit needs the bitsandbytes package"),
    ({"mixed_precision": "fp16"}, CPU, r"lora\.mixed_precision: fp16 needs a CUDA GPU"),
    ({"mixed_precision": "bf16"}, T4, r"lora\.mixed_precision: bf16 needs a GPU with bfloat16; Tesla T4"),
    ({"optimizer": "adamw_typo"}, CPU, r"lora\.optimizer: adamw_typo is not a transformers optimizer name"),
])
def test_what_the_machine_cannot_run_is_an_error_naming_option_and_fix(overrides, caps, message):
    with pytest.raises(TrainingHardwareError, match=message) as raised:
        plan_training(LoraConfig(**overrides), caps)
    assert "\n" not in str(raised.value)  # one line


def test_auto_never_picks_an_optimizer_whose_package_is_absent():
    """A GPU without bitsandbytes gets transformers' fused AdamW, not GBEM-UA's paged 8-bit one."""
    plan = plan_training(LoraConfig(), GPU_NO_BNB)
    assert (plan.device, plan.optimizer, plan.quantization) == ("cuda", "adamw_torch_fused", "none")
    assert training_plan.required_packages(plan) == {}
    assert plan_training(LoraConfig(), A100).optimizer == "paged_adamw_8bit"


@pytest.mark.parametrize("cuda, bnb_found, optimizer", [
    (True, True, "paged_adamw_8bit"), (True, False, "adamw_torch_fused"), (False, True, "adamw_torch_fused"),
    (False, False, "adamw_torch_fused")])
def test_the_probe_sees_cuda_and_bitsandbytes_as_the_machine_has_them(cuda, bnb_found, optimizer, monkeypatch):
    """The probe itself (not an injected Capabilities) with torch's and importlib's answers patched."""
    import importlib.metadata
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "H100")
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (object() if bnb_found else None) if name == "bitsandbytes" else real(name, *a))
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.50.2")
    caps = training_plan.probe_capabilities()
    assert (caps.cuda, caps.bitsandbytes) == (cuda, "0.50.2" if bnb_found else None)
    assert plan_training(LoraConfig(), caps).optimizer == optimizer


@pytest.mark.parametrize("overrides, needs", [
    ({}, {"bitsandbytes": "lora.optimizer: paged_adamw_8bit"}),
    ({"optimizer": "adamw_torch"}, {}),
    ({"quantization": "8bit"}, {"bitsandbytes": "lora.quantization: 8bit"}),
    ({"quantization": "4bit", "optimizer": "adamw_torch"}, {"bitsandbytes": "lora.quantization: 4bit"}),
])
def test_required_packages_name_the_key_that_needs_them(overrides, needs):
    plan = plan_training(LoraConfig(**overrides), A100)
    assert training_plan.required_packages(plan) == needs
    assert training_plan.required_packages(plan_training(LoraConfig(), CPU)) == {}
    missing = training_plan.missing_packages(plan, find_spec=lambda name: None)
    assert len(missing) == len(needs)
    for line, key in zip(missing, needs.values()):
        assert key in line and "pip install -e '.[gpu]'" in line and "\n" not in line
    assert training_plan.missing_packages(plan, find_spec=lambda name: object()) == []


def test_missing_packages_asks_importlib_by_default(monkeypatch):
    import importlib.util

    plan = plan_training(LoraConfig(quantization="8bit"), A100)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert len(training_plan.missing_packages(plan)) == 1
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    assert training_plan.missing_packages(plan) == []


def test_an_unquantised_base_on_a_gpu_is_loaded_onto_the_gpu_in_the_training_dtype(monkeypatch):
    """quantization none on CUDA: straight onto the GPU in bf16 (it was left on the CPU: the study baseline was
    scored there)."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    plan = plan_training(LoraConfig(), GPU_NO_BNB)
    assert plan.load_arguments() == {"dtype": torch.bfloat16, "device_map": {"": 0}}
    assert plan_training(LoraConfig(), CPU).load_arguments() == {"dtype": torch.float32}


def test_load_for_training_asks_for_the_plans_device_and_refuses_a_base_left_elsewhere(
        tmp_path, tiny_causal_model, tiny_tokenizer, monkeypatch):
    import transformers

    tiny_causal_model.save_pretrained(tmp_path / "base")
    tiny_tokenizer.save_pretrained(tmp_path / "base")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    seen, real = {}, transformers.AutoModelForCausalLM.from_pretrained

    def from_pretrained(source, **kwargs):  # no GPU here: record the arguments, load on the CPU
        seen.update(kwargs)
        return real(source, dtype=kwargs["dtype"])

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    with pytest.raises(TrainingHardwareError, match="weights loaded on cpu, but LoRA trains and scores on cuda"):
        training_plan.load_for_training(tmp_path / "base", plan_training(LoraConfig(), GPU_NO_BNB))
    assert seen["device_map"] == {"": 0} and seen["dtype"] == torch.bfloat16
    seen.clear()
    loaded = training_plan.load_for_training(tmp_path / "base", plan_training(LoraConfig(), CPU))
    assert "device_map" not in seen and next(loaded.model.parameters()).device.type == "cpu"


def test_explicit_choices_win_over_auto():
    plan = plan_training(LoraConfig(mixed_precision="none", gradient_checkpointing=True, optimizer="adamw_torch"),
                         A100)
    assert (plan.mixed_precision, plan.load_dtype, plan.gradient_checkpointing, plan.optimizer) == (
        "none", "float32", True, "adamw_torch")


def test_finetune_on_a_cpu_host_refuses_4bit_before_loading_anything(tmp_path, monkeypatch):
    from biaslab.mitigation.lora import train as lora

    monkeypatch.setattr(training_plan, "probe_capabilities", lambda: CPU)
    monkeypatch.setattr(lora, "load_for_training", lambda *a, **k: pytest.fail("loaded a model"))
    with pytest.raises(TrainingHardwareError, match="lora.quantization: 4bit"):
        lora.finetune(tmp_path / "no-model-needed", None, LoraConfig(quantization="4bit"), tmp_path / "lora")
    assert not (tmp_path / "lora").exists()


@pytest.mark.parametrize("bits", ["4bit", "8bit"])
def test_a_kbit_plan_loads_its_base_with_the_bitsandbytes_config(bits, tmp_path, tiny_tokenizer, monkeypatch):
    """load_for_training hands the plan's quantization_config and device map to from_pretrained, then
    prepares the k-bit base (found by bench/gpu_check.py on an H200: load_model refused quantization_config)."""
    import peft
    import transformers

    from biaslab.pretrain.architecture import build_llama

    base = tmp_path / "base"
    build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64).save_pretrained(base)
    tiny_tokenizer.save_pretrained(base)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    plan = plan_training(LoraConfig(quantization=bits, gradient_checkpointing=False), A100)
    seen, real = {}, transformers.AutoModelForCausalLM.from_pretrained

    def from_pretrained(source, **kwargs):  # no GPU here: record the arguments, load plainly
        seen.update(kwargs)
        return real(source, dtype=kwargs["dtype"])

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    prepared = []
    monkeypatch.setattr(peft, "prepare_model_for_kbit_training", lambda model, **kw: prepared.append(kw) or model)
    with pytest.raises(TrainingHardwareError, match="loaded on cpu"):  # no GPU here: the plan's device is refused
        training_plan.load_for_training(base, plan)
    quant = seen["quantization_config"]
    assert (quant.load_in_4bit, quant.load_in_8bit) == ((True, False) if bits == "4bit" else (False, True))
    assert seen["device_map"] == {"": 0} and seen["dtype"] == torch.bfloat16
    assert prepared == [{"use_gradient_checkpointing": False, "gradient_checkpointing_kwargs": {"use_reentrant": False}}]


@pytest.mark.slow
def test_finetune_of_a_bf16_base_on_the_cpu_trains_in_float32_and_stores_only_the_adapter(
        tmp_path, mirror, tiny_tokenizer):
    import hashlib
    import json

    import pandas as pd

    from biaslab.mitigation.lora.train import finetune
    from biaslab.pretrain.architecture import build_llama

    base = tmp_path / "base"
    build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64).to(
        torch.bfloat16).save_pretrained(base)
    tiny_tokenizer.save_pretrained(base)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in base.iterdir()}
    raw = pd.read_csv(mirror / "gbem_ua" / "acc_dataset" / "train_dataset_acc.csv")
    frame = raw[raw["profession"].isin(sorted(raw["profession"].unique())[:2])].rename(
        columns={"sentence": "qa_sentence"}).reset_index(drop=True)
    frame["split"], frame["item_id"] = "finetune", [f"train:{i}" for i in range(len(frame))]
    cfg = LoraConfig(max_steps=1, per_device_batch_size=2, gradient_accumulation_steps=1, eval_steps=0,
                     checkpoint_dir=str(tmp_path / "ckpt"))
    result = finetune(base, frame, cfg, tmp_path / "lora")
    manifest = json.loads((tmp_path / "lora" / "variant.json").read_text())
    assert manifest["training"] == result.training == plan_training(cfg, CPU).describe()
    assert manifest["training"]["load_dtype"] == "float32" and manifest["hyperparameters"]["quantization"] == "none"
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in base.iterdir()} == before  # base untouched
    assert {p.name for p in (tmp_path / "lora").iterdir()} >= {"adapter_model.safetensors", "adapter_config.json"}
    assert not any(p.name == "model.safetensors" for p in (tmp_path / "lora").iterdir())


def test_checkpointing_uses_the_current_training_arguments_name_and_does_not_warn():
    """transformers 5.2x renamed gradient_checkpointing(_kwargs) to activation_checkpointing(_kwargs); the old
    names warn (FutureWarning) and go in v6. The plan's arguments must build an SFTConfig silently, with the
    setting taken."""
    import warnings

    from trl import SFTConfig

    args = plan_training(LoraConfig(), A100).sft_arguments()
    args.update(bf16=False, fp16=False, optim="adamw_torch")  # buildable on a CPU-only test machine
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*checkpointing.*deprecated", category=FutureWarning)
        config = SFTConfig(output_dir="unused", report_to=[], **args)
    assert config.activation_checkpointing is True
    assert config.activation_checkpointing_kwargs == {"use_reentrant": False}


def test_checkpointing_falls_back_to_the_old_name_on_a_transformers_without_the_new_one(monkeypatch):
    """transformers 5.17 (seen on a borrowed GPU machine) has only gradient_checkpointing(_kwargs)."""
    import dataclasses

    import transformers

    @dataclasses.dataclass
    class OlderTrainingArguments:
        gradient_checkpointing: bool = False
        gradient_checkpointing_kwargs: dict | None = None

    monkeypatch.setattr(transformers, "TrainingArguments", OlderTrainingArguments)
    args = plan_training(LoraConfig(), A100).sft_arguments()
    assert args["gradient_checkpointing"] is True and args["gradient_checkpointing_kwargs"] == {"use_reentrant": False}
    assert "activation_checkpointing" not in args


def test_finetune_on_an_injected_gpu_asks_for_its_base_on_the_gpu_for_quantization_none(
        tmp_path, mirror, tiny_causal_model, tiny_tokenizer, monkeypatch):
    """The finetune stage's load follows the plan of the machine it is given: bf16 onto CUDA device 0, and a base
    that stays on the CPU (no GPU here) is refused before any training."""
    import transformers
    from gbem_frames import gbem_frame

    from biaslab.mitigation.lora.train import finetune

    tiny_causal_model.save_pretrained(tmp_path / "base")
    tiny_tokenizer.save_pretrained(tmp_path / "base")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    seen, real = {}, transformers.AutoModelForCausalLM.from_pretrained

    def from_pretrained(source, **kwargs):
        seen.update(kwargs)
        return real(source, dtype=kwargs["dtype"])

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    frame = gbem_frame(mirror, 2, lambda i: "finetune")
    with pytest.raises(TrainingHardwareError, match="LoRA trains and scores on cuda"):
        finetune(tmp_path / "base", frame, LoraConfig(checkpoint_dir=str(tmp_path / "ckpt")), tmp_path / "lora",
                 caps=GPU_NO_BNB)
    assert seen["device_map"] == {"": 0} and seen["dtype"] == torch.bfloat16
    assert not (tmp_path / "lora").exists()
