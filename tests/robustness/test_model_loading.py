"""Model loading refuses what it cannot load safely, with a message that says what to do."""

from __future__ import annotations

import pytest
import torch

from biaslab.models.load import ModelLoadError, load_model, load_variant_model


def test_unknown_hub_id_offline_names_the_fix(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError) as err:
        load_model("no-such-org/no-such-model-biaslab")
    message = str(err.value)
    assert "no-such-org/no-such-model-biaslab" in message and "model.source" in message


def test_pickle_only_checkpoint_is_refused(tmp_path, tiny_causal_model, tiny_tokenizer):
    tiny_causal_model.config.save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    torch.save(tiny_causal_model.state_dict(), tmp_path / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match="pickle.*allow_pickle"):
        load_model(tmp_path)


def test_safetensors_checkpoint_loads_and_has_a_stable_fingerprint(tmp_path, tiny_causal_model, tiny_tokenizer):
    tiny_causal_model.save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    first, second = load_model(tmp_path), load_model(tmp_path)
    assert first.kind == "causal" and first.fingerprint == second.fingerprint


def test_directory_without_config_is_not_a_model(tmp_path):
    (tmp_path / "weights.safetensors").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_model(tmp_path)


def test_missing_variant_directory_says_how_to_build_it(tmp_path):
    with pytest.raises(ModelLoadError, match="dvc repro"):
        load_variant_model(tmp_path / "models" / "soft")


def test_tracking_refuses_credentials_in_tags():
    from biaslab.tracking.runs import _safe_tags

    with pytest.raises(ValueError, match="credential"):
        _safe_tags({"hf_token": "hf_abc"})
    assert _safe_tags({"variant": "base", "model_fingerprint": "abc"}) == {"variant": "base", "model_fingerprint": "abc"}


def test_lora_variant_loads_without_peft_deprecation_notice(tmp_path, tiny_causal_model, tiny_tokenizer):
    """PEFT's read of transformers' deprecated `is_gradient_checkpointing` stays out of every LoRA evaluation log."""
    import copy
    import warnings

    from peft import LoraConfig, PeftModel, get_peft_model

    from biaslab.outputs.variant_dir import write_manifest

    base, overlay = tmp_path / "base", tmp_path / "lora"
    tiny_causal_model.save_pretrained(base)
    tiny_tokenizer.save_pretrained(base)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        peft_model = get_peft_model(copy.deepcopy(tiny_causal_model), LoraConfig(r=2, target_modules=["q_proj"]))
    peft_model.save_pretrained(overlay)
    write_manifest(overlay, base=str(base), method="lora")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = load_variant_model(overlay)
    assert isinstance(loaded.model, PeftModel)
    assert not [w for w in caught if issubclass(w.category, FutureWarning)], [str(w.message) for w in caught]
