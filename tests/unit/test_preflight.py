"""The preflight stage (pipelines/preflight.py): passes on the CPU default run, and each check fails with one line
saying what to change - a missing package, a CPU-only machine asked for CUDA, too little GPU memory, too little disk.

The machine is a :class:`pipelines.preflight.Machine` the test writes (CUDA, bitsandbytes, free GPU memory), and
free disk a monkeypatched ``shutil.disk_usage``: the checks are the real ones on the real params."""

from __future__ import annotations

import json
import shutil
from collections import namedtuple
from pathlib import Path

import pytest
import yaml

from biaslab.config import load_params
from pipelines import preflight
from pipelines.preflight import Machine, PreflightError, check

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3
CPU = Machine(cuda=False, bf16=False, bitsandbytes=None)
H100_NO_BNB = Machine(cuda=True, bf16=True, bitsandbytes=None, device_name="H100", gpu_free_bytes=79 * GIB)
H100 = Machine(cuda=True, bf16=True, bitsandbytes="0.50.2", device_name="H100", gpu_free_bytes=79 * GIB)
LLAMA_8B = dict(model_type="llama", architectures=["LlamaForCausalLM"], vocab_size=128256, hidden_size=4096,
                intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                tie_word_embeddings=False, torch_dtype="bfloat16")


USAGE = namedtuple("usage", "total used free")


@pytest.fixture(autouse=True)
def plenty_of_disk(monkeypatch):
    """10 TiB free unless a test says otherwise: the memory tests must not depend on this machine's disk."""
    monkeypatch.setattr(shutil, "disk_usage", lambda path: USAGE(10 * 1024 * GIB, 0, 10 * 1024 * GIB))


def params_with(tmp_path: Path, *, lora: dict | None = None, **sections):
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw["lora"].update(lora or {})
    for key, value in sections.items():
        raw[key] = {**raw[key], **value} if isinstance(raw.get(key), dict) else value
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return load_params(path)


def llama_dir(tmp_path: Path) -> Path:
    """An 8B-shaped model folder: its config only (the estimate reads no weights when there are none)."""
    folder = tmp_path / "llama8b"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA_8B))
    return folder


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_the_cpu_default_run_passes(tmp_path, monkeypatch, capsys):
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(preflight, "probe_machine", lambda: CPU)
    assert preflight.main([]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert line.startswith("preflight: ok: profile full (11 variants), device cpu, disk ")
    record = json.loads((tmp_path / "runs" / "preflight.json").read_text())
    assert record["lora"]["lora"]["optimizer"] == "adamw_torch_fused"
    assert "disk_free_bytes" not in record  # the record is the plan's, not the machine's state of the moment


def test_probe_machine_reads_this_machine():
    machine = preflight.probe_machine()
    import torch

    assert machine.cuda == torch.cuda.is_available()


def test_an_8bit_base_without_bitsandbytes_fails_naming_the_extra(tmp_path):
    params = params_with(tmp_path, lora={"quantization": "8bit"})
    with pytest.raises(PreflightError) as exc:
        check(params, H100_NO_BNB, tmp_path)
    message = one_line(exc)
    assert message.startswith("variant lora: params.yaml lora.quantization: 8bit needs the bitsandbytes package")
    assert "pip install -e '.[gpu]'" in message


def test_auto_optimizer_on_a_gpu_without_bitsandbytes_picks_one_that_is_there(tmp_path):
    """``lora.optimizer: auto`` never picks an optimizer whose package is absent (training_plan.py): on a GPU
    without bitsandbytes the plan is adamw_torch_fused, with it paged_adamw_8bit (GBEM-UA's)."""
    params = params_with(tmp_path)
    assert check(params, H100_NO_BNB, tmp_path).lora["lora"]["optimizer"] == "adamw_torch_fused"
    assert check(params, H100, tmp_path).lora["lora"]["optimizer"] == "paged_adamw_8bit"


def test_a_disabled_variant_is_not_checked(tmp_path):
    """quick runs lora only: an 8-bit setting of lora_clp (disabled) does not stop it."""
    raw_variant = {"lora_overrides": {"objective": "logit_pairing", "quantization": "8bit",
                                      "checkpoint_dir": "models/lora_clp_checkpoints"}}
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw["variants"]["lora_clp"]["lora_overrides"].update(raw_variant["lora_overrides"])
    raw["profile"] = "quick"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False))
    params = load_params(tmp_path / "params.yaml")
    report = check(params, CPU, tmp_path)
    assert list(report.lora) == ["lora"]
    with pytest.raises(PreflightError, match="^variant lora_clp: params.yaml lora.quantization: 8bit needs a CUDA GPU"):
        check(params.model_copy(update={"profile": "full"}), CPU, tmp_path)


def test_cuda_asked_for_on_a_cpu_machine(tmp_path):
    params = params_with(tmp_path, scoring={"device": "cuda"})
    with pytest.raises(PreflightError) as exc:
        check(params, CPU, tmp_path)
    assert one_line(exc).startswith("scoring.device is cuda but torch sees no CUDA GPU: set scoring.device: auto")


def test_too_little_gpu_memory_names_the_stage_and_the_fix(tmp_path):
    params = params_with(tmp_path, model={"source": str(llama_dir(tmp_path))})
    small = Machine(cuda=True, bf16=True, bitsandbytes="0.50.2", device_name="RTX 4090", gpu_free_bytes=12 * GIB)
    with pytest.raises(PreflightError) as exc:
        check(params, small, tmp_path)
    message = one_line(exc)
    # the 8B model's weights alone are 15 GiB in bf16: scoring does not fit, nor does LoRA with logit pairing
    assert message.startswith("GPU memory: LoRA lora_clp needs about ") and "12.0 GiB are free on RTX 4090" in message
    assert "lora.quantization: 4bit" in message
    report = check(params, H100, tmp_path)  # 79 GiB free: every estimate fits
    assert 15 < report.memory_bytes["evaluate"] / GIB < 18
    assert report.memory_bytes["LoRA lora_clp"] > report.memory_bytes["LoRA lora"]  # the anchor pass


def test_quick_fits_where_full_does_not(tmp_path):
    """On a 24 GiB card the 8B model's logit-pairing variants do not fit; quick (no logit pairing) does."""
    params = params_with(tmp_path, model={"source": str(llama_dir(tmp_path))})
    card = Machine(cuda=True, bf16=True, bitsandbytes="0.50.2", device_name="L4", gpu_free_bytes=22 * GIB)
    with pytest.raises(PreflightError, match="LoRA lora_clp"):
        check(params, card, tmp_path)
    report = check(params.model_copy(update={"profile": "quick"}), card, tmp_path)
    assert max(report.memory_bytes.values()) < 22 * GIB


def test_too_little_disk(tmp_path, monkeypatch):
    params = params_with(tmp_path, model={"source": str(llama_dir(tmp_path))})
    monkeypatch.setattr(shutil, "disk_usage", lambda path: USAGE(500 * GIB, 450 * GIB, 50 * GIB))
    with pytest.raises(PreflightError) as exc:
        check(params, H100, tmp_path)
    message = one_line(exc)
    # full on an 8B model: the base + the negative control as full copies (the embedding edits store their
    # edited rows, embedding_apply: rows; a local model has no planted bias for the positive control)
    assert message.startswith("disk: the plan writes about 89.7 GiB (6 copies of the 15.0 GiB checkpoint: 2 in models/")
    assert "50.0 GiB are free" in message and "profile=quick" in message
    quick = params.model_copy(update={"profile": "quick"})  # the base alone: 3 copies, 44.9 GiB
    assert check(quick, H100, tmp_path).disk_bytes == pytest.approx(3 * 15.0 * GIB, rel=0.01)
    checkpoints = params.model_copy(update={"variants": {
        n: v.model_copy(update={"embedding_apply": "checkpoint"}) if v.method == "embedding" else v
        for n, v in params.variants.items()}})  # soft, hard, hard_k16 as edited copies: 5 in models/
    with pytest.raises(PreflightError, match=r"^disk: the plan writes about 224\.4 GiB \(15 copies"):
        check(checkpoints, H100, tmp_path)


def test_the_disk_estimate_counts_the_index_shards_not_a_stray_consolidated_file(tmp_path):
    folder = llama_dir(tmp_path)
    (folder / "model-00001-of-00002.safetensors").write_bytes(b"\0" * 1000)
    (folder / "model-00002-of-00002.safetensors").write_bytes(b"\0" * 500)
    (folder / "consolidated.safetensors").write_bytes(b"\0" * 1500)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    assert preflight.local_size(folder).checkpoint_bytes == 1500


def test_a_hub_model_not_in_the_cache_is_not_estimated(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    params = params_with(tmp_path, model={"source": "meta-llama/Llama-3.1-8B"})
    report = check(params, H100, tmp_path)
    assert report.memory_bytes == {} and report.disk_bytes is None
    assert "memory and disk not estimated (hub model not in the local cache)" in report.summary()


def test_the_estimate_is_the_library_estimate_for_llama_3_8b(tmp_path):
    """One estimate (biaslab.mitigation.lora.memory_estimate, as bench/preset_memory.py and docs/presets.md print
    it): 8.03 B parameters, scoring a 1024-token batch in bf16 16.2 GiB, and each LoRA variant's number is
    ``estimate_lora`` of its own section and plan."""
    from biaslab.mitigation.lora.memory_estimate import estimate_lora
    from biaslab.mitigation.lora.training_plan import Capabilities, plan_training

    size = preflight.size_from_config(LLAMA_8B)
    assert size.parameters == 8_030_261_248
    assert size.checkpoint_bytes == 2 * 8_030_261_248
    params = params_with(tmp_path, model={"source": str(llama_dir(tmp_path))})
    report = check(params, H100, tmp_path)
    assert round(report.memory_bytes["evaluate"] / GIB, 1) == 16.2
    caps = Capabilities(H100.cuda, H100.bf16, H100.bitsandbytes, H100.device_name)
    config = preflight.transformers_config(LLAMA_8B)
    for name in ("lora", "lora_clp"):
        cfg = params.lora_for(name)
        assert report.memory_bytes[f"LoRA {name}"] == estimate_lora(config, cfg, plan_training(cfg, caps)).total
