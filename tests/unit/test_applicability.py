"""Which mitigations apply to which model kind: LoRA is skipped for a masked LM, with files that say why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from biaslab.config import load_params
from biaslab.mitigation.applicability import (
    LORA_ON_MASKED_LM,
    lora_skip_reason,
    model_kind,
    write_skipped_tune,
    write_skipped_variant,
)
from biaslab.mitigation.lora.train import tuned_overrides
from biaslab.outputs import run_file, variant_dir
from biaslab.registry import RegistryError, find_variant_version, skipped_variants, write_register_json


def save_config(directory, config) -> None:
    directory.mkdir(parents=True)
    config.save_pretrained(directory)


@pytest.fixture
def masked_dir(tmp_path):
    from transformers import XLMRobertaConfig

    save_config(tmp_path / "xlmr", XLMRobertaConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1,
                                                    num_attention_heads=2, intermediate_size=16))
    return tmp_path / "xlmr"


def test_lora_applies_to_a_causal_lm_not_to_a_masked_lm(tmp_path, masked_dir):
    from transformers import LlamaConfig

    save_config(tmp_path / "llama", LlamaConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1,
                                                num_attention_heads=2, intermediate_size=16))
    assert model_kind(tmp_path / "llama") == "causal" and lora_skip_reason(tmp_path / "llama") is None
    assert model_kind(masked_dir) == "masked" and lora_skip_reason(masked_dir) == LORA_ON_MASKED_LM
    assert lora_skip_reason(masked_dir, "causal") is None  # model.kind overrides the detection
    assert lora_skip_reason(tmp_path / "llama", "masked") == LORA_ON_MASKED_LM


def test_skipped_tune_gives_finetune_no_overrides(tmp_path):
    path = write_skipped_tune(tmp_path / "tune", LORA_ON_MASKED_LM)
    assert json.loads(path.read_text()) == {"skipped": LORA_ON_MASKED_LM, "params": {}}
    assert tuned_overrides(path) == {}


def test_skipped_variants_are_not_registered_and_the_register_file_says_why(tmp_path):
    params = load_params(Path(__file__).resolve().parents[2] / "params.yaml")  # variants lora, lora_cda
    write_skipped_variant(tmp_path / params.variant("lora").model_dir, base="models/base", method="lora",
                          reason=LORA_ON_MASKED_LM)
    lora = tmp_path / params.variant("lora").model_dir
    assert variant_dir.read_manifest(lora) == {"base": "models/base", "method": "lora", "skipped": LORA_ON_MASKED_LM}
    assert skipped_variants(params, tmp_path) == {"lora": LORA_ON_MASKED_LM}
    assert skipped_variants(params, tmp_path, ["base", "soft"]) == {}
    out = tmp_path / "runs" / "register.json"
    write_register_json({}, "m", out, skipped={"lora": LORA_ON_MASKED_LM})
    assert json.loads(out.read_text())["skipped"] == {"lora": LORA_ON_MASKED_LM}
    assert run_file.registered_skips(out) == {"lora": LORA_ON_MASKED_LM}
    with pytest.raises(RegistryError, match="variant 'lora' was not registered .*LoRA skipped: the model is a masked"):
        find_variant_version(None, "m", "lora", out)  # biaslab promote lora: the reason, before any registry call
    write_register_json({}, "m", out)  # a run without skipped variants: the file has no such key
    assert "skipped" not in json.loads(out.read_text()) and run_file.registered_skips(out) == {}


def test_a_prompt_variant_is_never_skipped_even_when_its_base_directory_says_skipped(tmp_path):
    """The prompt variant shares models/base: a manifest there speaks for the base, not for the prompt."""
    params = load_params(Path(__file__).resolve().parents[2] / "params.yaml")
    write_skipped_variant(tmp_path / params.variant("base").model_dir, base="models/base", method="lora",
                          reason=LORA_ON_MASKED_LM)
    assert params.variant("prompt").model_dir == params.variant("base").model_dir
    assert variant_dir.variant_skip_reason(params.variant("base"), tmp_path) == LORA_ON_MASKED_LM
    assert variant_dir.variant_skip_reason(params.variant("prompt"), tmp_path) is None
    assert skipped_variants(params, tmp_path, ["prompt"]) == {}
