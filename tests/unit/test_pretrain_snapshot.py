"""Snapshotting a configured model into models/base: local dirs work, pickle-only dirs and unknown ids are refused."""

from __future__ import annotations

import json

import pytest
import torch

from biaslab.config import ModelConfig
from biaslab.models.load import ModelLoadError, load_model
from biaslab.pretrain.snapshot import snapshot_model


@pytest.fixture()
def local_model(tmp_path, tiny_causal_model, tiny_tokenizer):
    src = tmp_path / "src_model"
    tiny_causal_model.save_pretrained(src)
    tiny_tokenizer.save_pretrained(src)
    return src


def test_snapshot_of_local_model_is_safetensors_and_identical(local_model, tmp_path, tiny_causal_model):
    out = tmp_path / "models" / "base"
    record = snapshot_model(ModelConfig(source=str(local_model)), out)
    assert (out / "model.safetensors").is_file()
    assert json.loads((out / "snapshot.json").read_text())["source"] == str(local_model)
    assert record["kind"] == "causal"
    reloaded = load_model(out)
    for name, tensor in tiny_causal_model.state_dict().items():
        assert torch.equal(reloaded.model.state_dict()[name], tensor), name
    assert reloaded.tokenizer.get_vocab() == load_model(local_model).tokenizer.get_vocab()


def test_pickle_only_model_is_refused_unless_allowed(local_model, tmp_path, tiny_causal_model):
    (local_model / "model.safetensors").unlink()
    torch.save(tiny_causal_model.state_dict(), local_model / "pytorch_model.bin")
    out = tmp_path / "base"
    with pytest.raises(ModelLoadError, match="only pickle checkpoints"):
        snapshot_model(ModelConfig(source=str(local_model)), out)
    assert not out.exists()  # nothing half-written


def test_unknown_hub_id_offline_is_a_clear_error(tmp_path, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # read at import time, so also patch the constant
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelLoadError, match="not in the local Hugging Face cache and HF_HUB_OFFLINE=1 is set"):
        snapshot_model(ModelConfig(source="no-such-org/no-such-model-xyz"), tmp_path / "base")
    assert not (tmp_path / "base").exists()


# ------------------------------------------------------------------ dtype end to end
def _sha(path):
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def bf16_model(tmp_path, tiny_tokenizer):
    from biaslab.pretrain.architecture import build_llama

    src = tmp_path / "bf16_model"
    build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64, seed=1).to(
        torch.bfloat16).save_pretrained(src)
    tiny_tokenizer.save_pretrained(src)
    (src / "training_summary.json").write_text("{}")  # a source's own records are not model files
    return src


def test_snapshot_of_a_bf16_checkpoint_is_a_byte_copy_in_bf16(bf16_model, tmp_path):
    out = tmp_path / "base"
    record = snapshot_model(ModelConfig(source=str(bf16_model)), out)
    assert (record["stored_dtype"], record["dtype"], record["method"]) == ("bfloat16", "bfloat16", "copy")
    assert _sha(out / "model.safetensors") == _sha(bf16_model / "model.safetensors")
    assert not (out / "training_summary.json").exists() and "training_summary.json" not in record["files"]
    reloaded = load_model(out)
    assert next(reloaded.model.parameters()).dtype == torch.bfloat16
    assert reloaded.model.dtype == torch.bfloat16


@pytest.mark.parametrize("target", ["bfloat16", "float16"])
def test_model_dtype_converts_the_stored_weights(local_model, tmp_path, tiny_causal_model, target):
    out = tmp_path / "base"
    record = snapshot_model(ModelConfig(source=str(local_model), dtype=target), out)
    assert (record["stored_dtype"], record["dtype"], record["method"]) == ("float32", target, "convert")
    assert json.loads((out / "config.json").read_text())["dtype"] == target
    reloaded = load_model(out)  # dtype "auto": what is stored
    for name, tensor in tiny_causal_model.state_dict().items():
        got = reloaded.model.state_dict()[name]
        assert got.dtype == getattr(torch, target) and torch.equal(got, tensor.to(got.dtype)), name


def test_config_is_corrected_to_the_stored_dtype(bf16_model, tmp_path):
    config = json.loads((bf16_model / "config.json").read_text())
    config["dtype"] = "float32"  # a config that misstates its weights
    (bf16_model / "config.json").write_text(json.dumps(config))
    snapshot_model(ModelConfig(source=str(bf16_model)), tmp_path / "base")
    assert load_model(tmp_path / "base").model.dtype == torch.bfloat16
