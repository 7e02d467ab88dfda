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
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

DATA_DIR_ENV = "BIASLAB_DATA_DIR"


class Section(BaseModel):
    """Base for every params section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ConfigError(ValueError):
    """params.yaml is missing, malformed, or has an unknown / mistyped key."""


# --------------------------------------------------------------------------- data
class GbemUaSplit(Section):
    """How GBEM-UA professions are split (by profession, so evaluation professions are never trained on)."""

    finetune_fraction: float = Field(0.5, gt=0, lt=1, description="share of professions used for fine-tuning")
    validation_fraction: float = Field(
        0.2, gt=0, lt=1, description="share of fine-tune professions held back for Optuna validation"
    )
    seed: int = 0


class DataConfig(Section):
    mirror_dir: str = Field("../shared/datasets", description="local mirror read first; env BIASLAB_DATA_DIR wins")
    prepared_dir: str = "data/prepared"
    allow_download: bool = Field(True, description="fall back to the pinned remote source if the mirror lacks a file")
    gbem_ua: GbemUaSplit = GbemUaSplit()

    def resolved_mirror_dir(self) -> Path:
        """The mirror directory, with ``BIASLAB_DATA_DIR`` taking precedence over params."""
        return Path(os.environ.get(DATA_DIR_ENV) or self.mirror_dir)


# --------------------------------------------------------------------------- model
class PretrainConfig(Section):
    """The offline default model (DESIGN §7): byte-level BPE + small Llama, trained on the corpora."""

    languages: tuple[str, ...] = ("en", "uk", "ru")
    chars_per_language: int = Field(3_000_000, gt=0, description="training characters taken per language")
    validation_documents: int = Field(8, ge=1, description="documents per language held out for validation")
    vocab_size: int = 8192
    hidden_size: int = 256
    intermediate_size: int = 688
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    seq_len: int = 128
    batch_size: int = 32
    learning_rate: float = 2e-3
    warmup_steps: int = 50
    max_steps: int = 1500
    max_minutes: float = Field(9.0, gt=0, description="wall-clock budget; training stops at whichever comes first")
    eval_every: int = 250
    seed: int = 0


class ModelConfig(Section):
    source: str | None = Field(None, description="hub id or local path; null trains the offline default model")
    revision: str | None = Field(None, description="pinned hub revision (commit) for reproducible snapshots")
    kind: Literal["auto", "causal", "masked"] = "auto"
    trust_remote_code: bool = False
    allow_pickle: bool = Field(False, description="allow loading .bin/.pt pickle checkpoints (unsafe)")
    output_dir: str = "models/base"
    pretrain: PretrainConfig = PretrainConfig()


# --------------------------------------------------------------------------- scoring
class ScoringConfig(Section):
    batch_size: int | Literal["auto"] = "auto"
    max_batch_tokens: int = Field(16384, gt=0, description="token budget per batch when batch_size is auto")
    num_threads: int | None = Field(None, description="torch intra-op threads; null = physical cores")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    cache_dir: str | None = Field(None, description="on-disk result cache keyed by model fingerprint; null = off")


# --------------------------------------------------------------------------- evaluation
class BenchmarkEntry(Section):
    """One benchmark to run: the module implementing it and its options."""

    enabled: bool = True
    module: str = Field(description="import path of the benchmark module, e.g. biaslab.benchmarks.gbem_ua")
    options: dict[str, Any] = Field(default_factory=dict)


class EvaluationConfig(Section):
    seed: int = 0
    bootstrap_samples: int = Field(1000, ge=0)
    confidence: float = Field(0.95, gt=0, lt=1)
    benchmarks: dict[str, BenchmarkEntry] = Field(default_factory=dict)


# --------------------------------------------------------------------------- variants & mitigations
class VariantConfig(Section):
    """A variant = base model + one mitigation. Evaluation treats all variants alike."""

    method: Literal["none", "prompt", "embedding", "lora"]
    model_dir: str = Field(description="artifact directory the variant is loaded from")
    description: str = ""
    prompt_prefix: dict[str, str] = Field(default_factory=dict, description="language code -> prefix text")
    embedding_mode: Literal["soft", "hard"] | None = None
    embedding_apply: Literal["checkpoint", "hook"] = "checkpoint"


class EmbeddingDebiasConfig(Section):
    n_components: int = Field(1, ge=1, description="PCA components spanning the gender subspace")
    languages: tuple[str, ...] = ("uk", "en", "ru")
    hard_extra_words: dict[str, list[str]] = Field(default_factory=dict)


class LoraConfig(Section):
    r: int = 16
    alpha: int = 8
    dropout: float = 0.1
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj")
    epochs: float = 3.0
    learning_rate: float = 2.5e-4
    per_device_batch_size: int = 2
    gradient_accumulation_steps: int = 8
    max_steps: int = Field(-1, description="-1 = run all epochs; a positive value caps training steps")
    save_steps: int = 20
    augmentation: Literal["none", "counterfactual"] = "none"
    use_tuned: bool = Field(True, description="take hyper-parameters from the tune stage's best trial")
    seed: int = 0


class TuneConfig(Section):
    n_trials: int = 4
    storage: str = Field("journal:models/tune/study.journal", description="optuna storage URL or journal:<path>")
    study_name: str = "biaslab-lora"
    trial_max_steps: int = 20
    seed: int = 0
    search_space: dict[str, Any] = Field(default_factory=dict)


class GateCondition(Section):
    metric: str
    rule: Literal["better_than_base_beyond_ci", "not_worse_than_base_minus", "at_most", "at_least"]
    tolerance: float = 0.0


class RegistryConfig(Section):
    model_name: str = "biaslab-debiased"
    gate: list[GateCondition] = Field(default_factory=list)


class TrackingConfig(Section):
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_location: str = "mlruns/artifacts"
    experiment: str = "biaslab"


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
    tracking: TrackingConfig = TrackingConfig()

    def variant(self, name: str) -> VariantConfig:
        """Look up a variant, with an error that lists the ones that exist."""
        try:
            return self.variants[name]
        except KeyError:
            known = ", ".join(sorted(self.variants)) or "(none)"
            raise ConfigError(f"unknown variant {name!r}; params.yaml defines: {known}") from None


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
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{path}: {problems}") from exc
