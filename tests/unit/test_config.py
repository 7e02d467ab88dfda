"""params.yaml is validated: unknown or mistyped keys fail with the key named."""

from __future__ import annotations

from pathlib import Path

import pytest

from biaslab.config import ConfigError, load_params

ROOT = Path(__file__).resolve().parents[2]


def test_project_params_load():
    params = load_params(ROOT / "params.yaml")
    assert {"base", "prompt", "soft", "hard", "lora"} <= set(params.variants)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("lora:\n  lerning_rate: 0.1\n", "lora.lerning_rate"),
        ("lora:\n  r: sixteen\n", "lora.r"),
        ("bogus_section: 1\n", "bogus_section"),
        ("- a list\n", "top level must be a mapping"),
        ("lora: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_params_name_the_key(tmp_path, text, needle):
    path = tmp_path / "params.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_params(path)
    assert needle in str(err.value) and str(path) in str(err.value)


def test_missing_params_file(tmp_path):
    with pytest.raises(ConfigError, match="params file not found"):
        load_params(tmp_path / "nope.yaml")


def test_unknown_variant_lists_known_ones():
    params = load_params(ROOT / "params.yaml")
    with pytest.raises(ConfigError, match="unknown variant 'nope'.*base"):
        params.variant("nope")


def test_lora_overrides_of_a_variant_are_validated():
    from biaslab.config import ConfigError, Params

    params = Params.model_validate({"variants": {
        "lora": {"method": "lora", "model_dir": "models/lora"},
        "lora_cda": {"method": "lora", "model_dir": "models/lora_cda",
                     "lora_overrides": {"augmentation": "counterfactual", "checkpoint_dir": "models/cda_ckpt"}},
        "bad": {"method": "lora", "model_dir": "m", "lora_overrides": {"augmentaton": "counterfactual"}}}})
    assert params.lora_for("lora") == params.lora
    cda = params.lora_for("lora_cda")
    assert cda.augmentation == "counterfactual" and cda.checkpoint_dir == "models/cda_ckpt" and cda.r == params.lora.r
    with pytest.raises(ConfigError, match="variants.bad.lora_overrides: augmentaton"):
        params.lora_for("bad")


def test_embedding_overrides_of_a_variant_are_validated():
    from biaslab.config import ConfigError, Params

    params = Params.model_validate({"variants": {
        "hard": {"method": "embedding", "model_dir": "models/hard", "embedding_mode": "hard"},
        "wide": {"method": "embedding", "model_dir": "models/wide", "embedding_mode": "hard",
                 "embedding_overrides": {"n_components": 16, "profession_sources": ["occugender"]}},
        "bad": {"method": "embedding", "model_dir": "m", "embedding_mode": "hard",
                "embedding_overrides": {"n_components": 0}}}})
    assert params.embedding_debias_for("hard") == params.embedding_debias
    wide = params.embedding_debias_for("wide")
    assert (wide.n_components, wide.profession_sources) == (16, ("occugender",))
    assert wide.languages == params.embedding_debias.languages  # keys not overridden stay the section's
    with pytest.raises(ConfigError, match="variants.bad.embedding_overrides: n_components: Input should be"):
        params.embedding_debias_for("bad")


def test_the_default_model_recipe_in_code_is_the_one_in_params_yaml():
    """model.pretrain (planted bias included) defaults to what params.yaml sets, so `planted_bias: {enabled: true}`
    alone plants the documented bias; only `enabled` itself defaults off."""
    from biaslab.config import PretrainConfig

    configured = load_params("params.yaml").model.pretrain.model_dump()
    defaults = PretrainConfig().model_dump()
    assert configured["planted_bias"].pop("enabled") and not defaults["planted_bias"].pop("enabled")
    assert configured == defaults
