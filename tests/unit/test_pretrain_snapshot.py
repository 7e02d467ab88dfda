"""Snapshotting a configured model into models/base: local dirs work, pickle-only dirs and unknown ids are refused."""

from __future__ import annotations

import json

import pytest
import torch

from biaslab.config import ModelConfig
from biaslab.models import ModelLoadError, load_model
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
