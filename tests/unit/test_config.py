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
