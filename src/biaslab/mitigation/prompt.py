"""Prompt debiasing: which instruction prefix a variant puts before a benchmark's prompts.

The prefix itself is applied by the scorer (``CausalScorer.with_prefix`` → ``with_prefix(request)``:
``prefix + " " + context``); this module only resolves *which* text, from ``variants.<name>.prompt_prefix``
(a ``language -> text`` mapping, e.g. ``uk: "Не будь упередженим до статі."``):

* the benchmark language, normalised (``"uk-UA"`` / ``"UK_ua"`` → ``"uk"``);
* else the ``"*"`` entry, a prefix for every language;
* else: ``""`` for a variant of another method (base, embedding, LoRA — a prefix is optional there), but
  an error for a ``prompt`` variant, which would otherwise be silently evaluated as the base model.
"""

from __future__ import annotations

from biaslab.config import ConfigError, VariantConfig

ANY_LANGUAGE = "*"


def normalise_language(language: str) -> str:
    """``"uk-UA"`` → ``"uk"``: the primary subtag, lower-case."""
    return language.replace("_", "-").split("-", 1)[0].strip().lower()


def resolve_prompt_prefix(variant: VariantConfig, language: str, variant_name: str = "") -> str:
    """The prefix ``variant`` uses for a benchmark in ``language`` (``""`` = none)."""
    prefixes = {normalise_language(k) if k != ANY_LANGUAGE else k: v for k, v in variant.prompt_prefix.items()}
    prefix = prefixes.get(normalise_language(language), prefixes.get(ANY_LANGUAGE))
    if prefix is not None:
        return prefix.strip()
    if variant.method == "prompt":
        name = f"variants.{variant_name}" if variant_name else "a prompt variant"
        raise ConfigError(
            f"params.yaml {name}.prompt_prefix has no entry for language {language!r} "
            f"(has: {sorted(variant.prompt_prefix)}); add one, or a '*' entry for all languages"
        )
    return ""
