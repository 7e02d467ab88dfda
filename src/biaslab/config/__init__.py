"""Typed views of ``params.yaml``.

Every section of ``params.yaml`` has one pydantic model here; unknown or mistyped keys are errors
(``extra="forbid"``), so a typo such as ``lerning_rate`` fails loudly instead of being silently
ignored. Stage scripts call :func:`load_params` once and pass the typed section to the library.

Why pydantic: it gives field-level error messages (``lora -> lerning_rate: Extra inputs are not
permitted``) that name the key and the fix, which hand-written dict checks rarely do.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from biaslab.config.data import DataConfig, GbemUaSplit, LmHeldoutConfig, SampleConfig, SplitsConfig
from biaslab.config.mitigation import (
    EmbeddingDebiasConfig, GateControl, LoraConfig, SearchRange, TuneConfig, VariantConfig,
)
from biaslab.config.model import (
    BenchmarkEntry,
    EvaluationConfig,
    ModelConfig,
    PlantedBiasConfig,
    PretrainConfig,
    ScoringConfig,
)
from biaslab.config.profile import DEFAULT_PROFILE, ProfileConfig, profile_problems
from biaslab.config.section import DATA_DIR_ENV, Section, SectionT
from biaslab.config.verdicts import CalibrateConfig, GateBootstrap, GateCondition, RegistryConfig, TrackingConfig
from biaslab.errors import ConfigError

__all__ = [
    "DATA_DIR_ENV", "BenchmarkEntry", "CalibrateConfig", "ConfigError", "DataConfig", "EmbeddingDebiasConfig",
    "EvaluationConfig", "GateBootstrap", "GateCondition", "GateControl", "GbemUaSplit", "LmHeldoutConfig", "LoraConfig",
    "ModelConfig", "Params",
    "PlantedBiasConfig", "ProfileConfig", "PretrainConfig", "RegistryConfig", "SampleConfig", "ScoringConfig", "SearchRange",
    "Section", "SplitsConfig", "TrackingConfig", "TuneConfig", "VariantConfig", "load_params",
]


class Params(Section):
    data: DataConfig = DataConfig()
    model: ModelConfig = ModelConfig()
    scoring: ScoringConfig = ScoringConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    variants: dict[str, VariantConfig] = Field(default_factory=dict)
    embedding_debias: EmbeddingDebiasConfig = EmbeddingDebiasConfig()
    lora: LoraConfig = LoraConfig()
    tune: TuneConfig = TuneConfig()
    registry: RegistryConfig = RegistryConfig()
    calibrate: CalibrateConfig = CalibrateConfig()
    tracking: TrackingConfig = TrackingConfig()
    profile: str = DEFAULT_PROFILE
    profiles: dict[str, ProfileConfig] = Field(default_factory=lambda: {DEFAULT_PROFILE: ProfileConfig()})

    @model_validator(mode="after")
    def _known_profile(self) -> "Params":
        problem = profile_problems(self.profile, self.profiles, self.variants)
        if problem:
            raise ValueError(problem)
        for name, profile in self.profiles.items():  # every profile's study keys, not only the active one's
            try:
                TuneConfig.model_validate({**self.tune.model_dump(), **profile.tune})
            except ValidationError as exc:
                raise ValueError(f"profiles.{name}.tune: {_problems(exc)}") from None
        return self

    @property
    def active_profile(self) -> ProfileConfig:
        """The profile ``profile`` names (validated to exist)."""
        return self.profiles[self.profile]

    def enabled_variants(self) -> list[str]:
        """The variants the active profile runs, in ``variants`` order (all of them for ``variants: null``)."""
        chosen = self.active_profile.variants
        return [n for n in self.variants if chosen is None or n in chosen]

    def disabled_reason(self, name: str) -> str | None:
        """Why variant ``name`` does not run under the active profile (one line), or ``None`` when it runs."""
        self.variant(name)
        if name in self.enabled_variants():
            return None
        return (f"disabled by profile {self.profile!r} (params.yaml profiles.{self.profile}.variants does not list "
                f"it; dvc exp run -S profile=full runs every variant)")

    def variant(self, name: str) -> VariantConfig:
        """Look up a variant, with an error that lists the ones that exist."""
        try:
            return self.variants[name]
        except KeyError:
            known = ", ".join(sorted(self.variants)) or "(none)"
            raise ConfigError(f"unknown variant {name!r}; params.yaml defines: {known}") from None

    def lora_for(self, name: str) -> LoraConfig:
        """The ``lora`` section with variant ``name``'s ``lora_overrides`` applied (validated like params)."""
        return _with_overrides(self.lora, self.variant(name).lora_overrides, f"variants.{name}.lora_overrides")

    def tune_for(self, name: str) -> TuneConfig:
        """The study variant ``name``'s LoRA settings come from: the ``tune`` section, or with the variant's
        ``tune_overrides`` its own study (own ``output_dir``, required; a journal storage then defaults to
        ``journal:<output_dir>/study.journal``, so two studies never write into one stage's output)."""
        overrides = dict(self.variant(name).tune_overrides)
        if not overrides:
            return self.shared_study()
        where = f"variants.{name}.tune_overrides"
        if overrides.get("output_dir", self.tune.output_dir) == self.tune.output_dir:
            raise ConfigError(f"params.yaml {where}: a variant's own study needs its own output_dir "
                              f"(not the tune section's {self.tune.output_dir!r})")
        if "storage" not in overrides and self.tune.storage.startswith("journal:"):
            overrides["storage"] = f"journal:{overrides['output_dir']}/study.journal"
        return self._profiled(_with_overrides(self.tune, overrides, where))

    def shared_study(self) -> TuneConfig:
        """The ``tune`` section's study (stage ``tune``: variants without ``tune_overrides``), sized by the profile."""
        return self._profiled(self.tune)

    def _profiled(self, study: TuneConfig) -> TuneConfig:
        """``study`` with the active profile's ``tune`` keys (none for ``full``: the same object back)."""
        return _with_overrides(study, self.active_profile.tune, f"profiles.{self.profile}.tune")

    def embedding_debias_for(self, name: str) -> EmbeddingDebiasConfig:
        """The ``embedding_debias`` section with variant ``name``'s ``embedding_overrides`` applied."""
        return _with_overrides(self.embedding_debias, self.variant(name).embedding_overrides,
                               f"variants.{name}.embedding_overrides")


def _with_overrides(section: SectionT, overrides: dict[str, Any], where: str) -> SectionT:
    """``section`` with the keys of ``overrides`` replaced, validated like params (errors name ``where``)."""
    if not overrides:
        return section
    try:
        return type(section).model_validate({**section.model_dump(), **overrides})
    except ValidationError as exc:
        raise ConfigError(f"params.yaml {where}: {_problems(exc)}") from None


def _problems(exc: ValidationError) -> str:
    """Pydantic's errors as ``key.path: message; …`` (the key to fix, then why)."""
    return "; ".join(_problem(e) for e in exc.errors())


def _problem(error: Any) -> str:
    """One pydantic error as ``key.path: message``; a whole-file check (no path) names its key in the message."""
    where = ".".join(str(p) for p in error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def load_params(path: str | os.PathLike[str] = "params.yaml") -> Params:
    """Read and validate ``params.yaml``; errors name the file and the offending key."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: params file not found (run from the project root or pass --params)")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: top level must be a mapping of sections, got {type(raw).__name__}")
    try:
        return Params.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_problems(exc)}") from exc
