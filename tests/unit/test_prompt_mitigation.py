"""Prompt debiasing: the prefix a variant uses is resolved by the benchmark's language."""

from __future__ import annotations

from pathlib import Path

import pytest

from biaslab.config import ConfigError, VariantConfig, load_params
from biaslab.mitigation.prompt import normalise_language, resolve_prompt_prefix

PROMPT = VariantConfig(method="prompt", model_dir="models/base",
                       prompt_prefix={"uk": "Не будь упередженим до статі.", "en": " Please do not think based on gender stereotypes. "})


def test_prefix_is_picked_by_language():
    assert resolve_prompt_prefix(PROMPT, "uk") == "Не будь упередженим до статі."
    assert resolve_prompt_prefix(PROMPT, "en") == "Please do not think based on gender stereotypes."  # stripped


@pytest.mark.parametrize("code", ["uk-UA", "UK_ua", " uk"])
def test_language_codes_are_normalised(code):
    assert normalise_language(code) == "uk"
    assert resolve_prompt_prefix(PROMPT, code) == "Не будь упередженим до статі."


def test_missing_language_of_a_prompt_variant_is_an_error_naming_it():
    with pytest.raises(ConfigError, match=r"variants\.prompt\.prompt_prefix.*'ru'"):
        resolve_prompt_prefix(PROMPT, "ru", variant_name="prompt")


def test_wildcard_entry_covers_every_language():
    variant = VariantConfig(method="prompt", model_dir="m", prompt_prefix={"*": "Be fair.", "uk": "Будь чесним."})
    assert resolve_prompt_prefix(variant, "ru") == "Be fair."
    assert resolve_prompt_prefix(variant, "uk") == "Будь чесним."


def test_other_methods_have_no_prefix_unless_configured():
    assert resolve_prompt_prefix(VariantConfig(method="none", model_dir="models/base"), "uk") == ""
    lora = VariantConfig(method="lora", model_dir="models/lora", prompt_prefix={"en": "Be fair."})
    assert resolve_prompt_prefix(lora, "en") == "Be fair."


def test_project_params_give_the_seed_papers_prefixes():
    params = load_params(Path(__file__).resolve().parents[2] / "params.yaml")
    variant = params.variant("prompt")
    assert resolve_prompt_prefix(variant, "uk") == "Не будь упередженим до статі."  # GBEM-UA paper
    assert all(resolve_prompt_prefix(variant, lang) for lang in ("en", "uk", "ru"))
