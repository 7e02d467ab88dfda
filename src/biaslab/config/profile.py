"""The ``profile`` / ``profiles`` keys: how much of the pipeline one run does, without editing ``dvc.yaml``.

A profile names the variants that run (``variants``; ``null`` = every variant of ``params.yaml``) and the
study sizes (``tune``: keys of the ``tune`` section applied to every Optuna study, the ``tune`` section's and
each variant's own). ``profile`` selects one; ``dvc exp run -S profile=quick`` runs only its variants. Every
stage of ``dvc.yaml`` still runs, but the stages of a variant the profile leaves out do nothing and write
outputs marked ``disabled`` (docs/profiles.md), so ``dvc.yaml``'s ``foreach`` lists never change.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from biaslab.config.section import Section

DEFAULT_PROFILE = "full"

STUDY_KEYS = frozenset({"n_trials", "trial_max_steps", "search_space", "accuracy_tolerance", "objective"})
"""Keys of the ``tune`` section a profile may set: the study's size and search, never where it is stored
(``output_dir``, ``storage``, ``study_name``: a study's place belongs to its stage's outputs)."""


class ProfileConfig(Section):
    """One named profile: which variants run and how large the studies are."""

    description: str = ""
    variants: tuple[str, ...] | None = Field(
        None, description="the variants that run (base always among them); null = every variant in `variants`")
    tune: dict[str, Any] = Field(
        default_factory=dict,
        description="keys of the tune section for every study of this profile (n_trials, trial_max_steps, "
                    "search_space, accuracy_tolerance, objective); applied after a variant's tune_overrides")


def profile_problems(profile: str, profiles: dict[str, ProfileConfig], variants: dict[str, Any]) -> str | None:
    """What is wrong with ``profile`` / ``profiles`` (one line naming the key), or ``None``.

    Only the active profile must name defined variants: a params file whose ``variants`` were trimmed (a smoke
    run, a user's own set) keeps loading while ``paper``/``quick`` still name the full set; selecting such a
    profile then fails here, naming what is missing."""
    if profile not in profiles:
        known = ", ".join(sorted(profiles)) or "(none)"
        return f"profile: unknown profile {profile!r}; profiles defines: {known}"
    for name, cfg in profiles.items():
        where = f"profiles.{name}"
        if cfg.variants is not None:
            unknown = [v for v in cfg.variants if v not in variants]
            if unknown and name == profile:
                return (f"{where}.variants: unknown variant(s) {', '.join(map(repr, unknown))}; "
                        f"variants defines: {', '.join(variants)}")
            if variants and "base" in variants and "base" not in cfg.variants:
                return f"{where}.variants: must list base (every other variant is measured against it)"
        wrong = sorted(set(cfg.tune) - STUDY_KEYS)
        if wrong:
            return (f"{where}.tune: {', '.join(wrong)} cannot be set by a profile; "
                    f"allowed: {', '.join(sorted(STUDY_KEYS))}")
    return None
