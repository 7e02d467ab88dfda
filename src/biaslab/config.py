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
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from biaslab.errors import ConfigError

DATA_DIR_ENV = "BIASLAB_DATA_DIR"


class Section(BaseModel):
    """Base for every params section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


SectionT = TypeVar("SectionT", bound=Section)


# --------------------------------------------------------------------------- data
class GbemUaSplit(Section):
    """How GBEM-UA professions are split (by profession, so evaluation professions are never trained on)."""

    finetune_fraction: float = Field(0.5, gt=0, lt=1, description="share of professions used for fine-tuning")
    validation_fraction: float = Field(
        0.2, gt=0, lt=1, description="share of fine-tune professions held back for Optuna validation"
    )
    seed: int = 0


class SampleConfig(Section):
    """Reduced benchmark sizes for smoke runs (``make gpu-smoke``): see :mod:`biaslab.data.sample`."""

    per_group: int = Field(ge=1, description="units (profession, occupation, pair) kept per reported group")
    seed: int = 0


class LmHeldoutConfig(Section):
    """Held-out text of the ``lm_quality`` benchmark (see ``biaslab.data.lm_heldout``)."""

    texts_dir: str | None = Field(
        None, description="null = the default model's validation documents; else a folder in the corpora layout")
    languages: tuple[str, ...] = Field(
        ("en", "uk", "ru"), description="[] = no held-out text (prepare writes none; lm_quality is skipped)")
    max_chars: int = Field(100_000, gt=0, description="held-out characters per language")
    chunk_chars: int = Field(
        300, ge=50, description="characters per scored chunk (cut at line breaks); within the default model's "
                                "128-token training length")


class DataConfig(Section):
    mirror_dir: str = Field("../shared/datasets", description="local mirror read first; env BIASLAB_DATA_DIR wins")
    prepared_dir: str = "data/prepared"
    allow_download: bool = Field(True, description="fall back to the pinned remote source if the mirror lacks a file")
    gbem_ua: GbemUaSplit = GbemUaSplit()
    sample: SampleConfig | None = Field(
        None, description="null = the full tables; {per_group, seed} = a smaller copy of every benchmark table")
    lm_heldout: LmHeldoutConfig = LmHeldoutConfig()

    def resolved_mirror_dir(self) -> Path:
        """The mirror directory, with ``BIASLAB_DATA_DIR`` taking precedence over params."""
        return Path(os.environ.get(DATA_DIR_ENV) or self.mirror_dir)


# --------------------------------------------------------------------------- model
class PlantedBiasConfig(Section):
    """A planted, documented gender bias in the offline default model (a known-answer fixture).

    From step ``from_step`` on, ``dose`` of every training batch's rows are synthetic sentences that tie
    occupations, posts and roles to one gender (``src/biaslab/pretrain/planted/``, docs/planted_bias.md).
    Steps before ``from_step`` are shared with the ``calibrate`` stage's control model, which continues
    the same checkpoint with ``direction: balanced`` (the same sentences, genders counterbalanced).
    The defaults are the recipe of ``params.yaml`` (docs/planted_bias.md), so ``enabled: true`` alone plants
    the documented bias; only ``enabled`` defaults otherwise (off: a model without the block has none).
    """

    enabled: bool = Field(False, description="mix planted sentences into the default model's training")
    direction: Literal["planted", "balanced"] = Field(
        "planted", description="planted: genders follow the pushed shares; balanced: counterbalanced (control)")
    dose: float = Field(0.5, ge=0, le=1, description="share of each batch's rows from planted text (mixing phase)")
    strength: float = Field(6.0, ge=0, description="logit scaling of every base female share (1 = as given)")
    from_step: int = Field(50, ge=0, description="first step of the mixing phase; earlier steps are shared")
    language_shares: dict[str, float] = Field(
        default_factory=lambda: {"en": 0.6, "uk": 0.3, "ru": 0.1},
        description="share of the planted tokens per language")
    coded_share: float = Field(
        0.75, gt=0.5, lt=1, description="base female share of an item coded female (1 - it for one coded male)")
    uk_male_coded_share: float = Field(
        0.85, ge=0, le=1, description="share of GBEM-UA posts coded male-dominated (seeded draw per post)")
    en_role_share: float = Field(0.1, ge=0, le=1, description="share of English frames about roles, not occupations")
    en_sources: tuple[Literal["occugender", "winogender", "winobias", "genderlex", "fixture"], ...] = Field(
        ("occugender", "winobias", "fixture"), min_length=1,
        description="where the English occupations come from (fixture = our own, held out from every benchmark)")
    sentences_per_document: int = Field(6, ge=1, description="planted sentences per <s> ... </s> document")
    checkpoint_dir: str = Field(
        "models/pretrain", description="the shared first phase (steps before from_step), reused by the control")
    seed: int = 0

    @model_validator(mode="after")
    def _languages(self) -> "PlantedBiasConfig":
        unknown = sorted(set(self.language_shares) - {"en", "uk", "ru"})
        if unknown or not self.language_shares or any(v < 0 for v in self.language_shares.values()) \
                or sum(self.language_shares.values()) <= 0:
            raise ValueError(f"language_shares must map en/uk/ru to non-negative shares with a positive sum "
                             f"(unknown: {unknown})")
        return self


class PretrainConfig(Section):
    """The offline default model (docs/design.md 6): byte-level BPE + small Llama, trained on the corpora.

    Sizes are tuned so the default run takes about 8-9 minutes on 2 idle CPU cores (docs/base_model.md).
    """

    corpus_dir: str | None = Field(
        None, description="corpora folder; null = <data mirror>/corpora, else rebuilt from the pinned sources")
    languages: tuple[str, ...] = ("en", "uk", "ru")
    chars_per_language: int = Field(3_000_000, gt=0, description="training characters taken per language")
    validation_documents: int | dict[str, int] = Field(
        default_factory=lambda: {"en": 2, "uk": 64, "ru": 8},
        description="whole documents held out per language (one number, or language -> number)"
    )
    validation_chars: int = Field(100_000, gt=0, description="held-out characters evaluated per language")
    vocab_size: int = Field(8192, ge=260, description="BPE vocabulary incl. 256 byte symbols and 3 specials")
    hidden_size: int = 128
    intermediate_size: int = 352
    num_hidden_layers: int = Field(4, ge=1)
    num_attention_heads: int = Field(4, ge=1)
    num_key_value_heads: int = Field(4, ge=1)
    seq_len: int = Field(128, ge=2)
    batch_size: int = Field(32, ge=1)
    learning_rate: float = Field(3e-3, gt=0)
    weight_decay: float = Field(0.1, ge=0)
    grad_clip: float = Field(1.0, gt=0, description="max global gradient norm")
    warmup_steps: int = Field(50, ge=1)
    max_steps: int = Field(500, ge=1)
    max_minutes: float = Field(60.0, gt=0, description="wall-clock guard on the training loop (whichever first)")
    eval_every: int = Field(100, ge=1)
    seed: int = 0
    planted_bias: PlantedBiasConfig = PlantedBiasConfig()

    @model_validator(mode="after")
    def _heads_divide(self) -> "PretrainConfig":
        if self.hidden_size % self.num_attention_heads or self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                "hidden_size must be divisible by num_attention_heads, and num_attention_heads by "
                f"num_key_value_heads (got {self.hidden_size}, {self.num_attention_heads}, {self.num_key_value_heads})"
            )
        return self


class ModelConfig(Section):
    source: str | None = Field(None, description="hub id or local path; null trains the offline default model")
    revision: str | None = Field(None, description="pinned hub revision (commit) for reproducible snapshots")
    kind: Literal["auto", "causal", "masked"] = "auto"
    trust_remote_code: bool = False
    allow_pickle: bool = Field(False, description="allow loading .bin/.pt pickle checkpoints (unsafe)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="dtype models/base is stored in; auto = the checkpoint's own (every later copy keeps it)")
    device_map: str | dict[str, int | str] | None = Field(
        None, description="accelerate device map for models that do not fit one GPU (auto, balanced, or "
        "module -> device); null = the whole model on scoring.device")
    output_dir: str = "models/base"
    pretrain: PretrainConfig = PretrainConfig()


# --------------------------------------------------------------------------- scoring
class ScoringConfig(Section):
    batch_size: int | Literal["auto"] = "auto"
    max_batch_tokens: int = Field(1024, gt=0, description="padded-token budget per batch when batch_size is auto")
    num_threads: int | None = Field(None, description="torch intra-op threads; null = physical cores")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="where models are scored; auto = a CUDA GPU when present, else the CPU")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="auto = bfloat16 on a GPU that supports it, float32 on the CPU")
    cache_dir: str | None = Field(None, description="on-disk result cache keyed by model fingerprint; null = off")
    add_bos: Literal["auto"] | bool = Field(
        "auto", description="BOS before every prompt: auto = what the tokenizer adds by default (the papers' "
        "setting; lm-evaluation-harness add_bos_token unset), true / false force it (causal LMs)")


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
    prompt_format: Literal["raw", "chat"] = Field(
        "raw", description="raw = prompts as text (the papers); chat = each prompt a user turn of the tokenizer's "
        "chat template, the continuation the assistant's answer")
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
    embedding_overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="method embedding: keys of the embedding_debias section that differ for this variant")
    lora_overrides: dict[str, Any] = Field(
        default_factory=dict, description="method lora: keys of the lora section that differ for this variant")


class EmbeddingDebiasConfig(Section):
    """Bolukbasi embedding debiasing (variants soft / hard); see docs/embedding_debias.md."""

    n_components: int = Field(1, ge=1, description="PCA components spanning the gender subspace")
    languages: tuple[str, ...] = Field(
        ("uk", "en", "ru"), description="languages whose gender pairs and profession words are used"
    )
    normalize_word_vectors: bool = Field(True, description="unit-length word vectors before pair differences")
    profession_sources: tuple[Literal["gbem_ua", "occugender", "winobias"], ...] = Field(
        ("gbem_ua", "occugender", "winobias"), description="prepared tables the soft target words come from"
    )
    soft_extra_words: dict[str, list[str]] = Field(
        default_factory=dict, description="language -> extra profession words edited in soft and hard"
    )
    hard_extra_words: dict[str, list[str]] = Field(
        default_factory=dict, description="language -> words edited in hard only (candidate, pronouns)"
    )


class LoraConfig(Section):
    """LoRA fine-tuning (TRL ``SFTTrainer`` + PEFT) on gender-neutral relevant GBEM-UA examples.

    Defaults are the GBEM-UA paper's: attention q/k/v, r 16, alpha 8, dropout 0.1, 3 epochs, lr 2.5e-4,
    batch 2 x grad-accum 8. With ``use_tuned`` the tune stage's best trial overrides the searched keys.
    """

    r: int = Field(16, ge=1, description="LoRA rank (inner dimension of the A/B update matrices)")
    alpha: int = Field(8, ge=1, description="LoRA scaling numerator: the update is scaled by alpha / r")
    dropout: float = Field(0.1, ge=0, lt=1, description="dropout on the LoRA branch input")
    target_modules: tuple[str, ...] = Field(
        ("q_proj", "k_proj", "v_proj"), min_length=1, description="module names that receive an adapter"
    )
    epochs: float = Field(3.0, gt=0, description="passes over the training examples (ignored when max_steps > 0)")
    learning_rate: float = Field(2.5e-4, gt=0, description="peak AdamW learning rate (linear decay)")
    per_device_batch_size: int = Field(2, ge=1, description="examples per forward pass")
    gradient_accumulation_steps: int = Field(8, ge=1, description="forward passes per optimizer step")
    max_steps: int = Field(-1, description="-1 = run all epochs; a positive value caps training steps")
    save_steps: int = Field(20, ge=1, description="optimizer steps between resumable checkpoints")
    save_total_limit: int = Field(2, ge=1, description="checkpoints kept in checkpoint_dir (oldest deleted)")
    logging_steps: int = Field(5, ge=1, description="optimizer steps between loss/lr points sent to MLflow")
    eval_steps: int = Field(20, ge=0, description="steps between validation-loss evaluations; 0 = never")
    max_length: int = Field(256, ge=8, description="token cap per example (prompt + completion)")
    augmentation: Literal["none", "counterfactual"] = Field(
        "none", description="counterfactual: add every example with all gendered words swapped (2x data)"
    )
    sources: tuple[Literal["gbem_ua", "occupations_en"], ...] = Field(
        ("gbem_ua", "occupations_en"), min_length=1,
        description="example sources: GBEM-UA fine-tune professions; English occupations no benchmark uses")
    objective: Literal["sft", "logit_pairing"] = Field(
        "sft", description="sft = completion loss only (GBEM-UA paper); logit_pairing = + pairing_weight x the "
                           "absolute gap of counterfactual pairs' answer log-odds (mitigation/logit_pairing.py)")
    pairing_weight: float = Field(1.0, ge=0, description="weight of the pairing term (objective: logit_pairing)")
    pairing_pairs: int = Field(4, ge=1, description="counterfactual pairs drawn per source and forward pass (logit_pairing)")
    pairing_anchor: bool = Field(
        True, description="logit_pairing: also keep each pair's mean answer log-odds at the base model's, so a gap "
                          "closes by moving both sides together, not by pushing every answer to one word")
    use_tuned: bool = Field(
        True, description="override the searched keys with <tune.output_dir>/best_params.json (the best trial)"
    )
    checkpoint_dir: str = Field("models/lora_checkpoints", description="resumable Trainer checkpoints")
    seed: int = Field(0, description="seeds adapter init, data order and dropout (Trainer seed and data_seed)")
    mixed_precision: Literal["auto", "bf16", "fp16", "none"] = Field(
        "auto", description="auto = bf16 on a GPU that has it, else fp16; none (float32) on the CPU")
    gradient_checkpointing: bool | Literal["auto"] = Field(
        "auto", description="recompute activations in backward to save GPU memory; auto = on for a GPU, off on the CPU")
    quantization: Literal["none", "4bit", "8bit"] = Field(
        "none", description="k-bit base via bitsandbytes (CUDA only): 4bit = QLoRA NF4, 8bit = LLM.int8 (GBEM-UA)")
    optimizer: str = Field(
        "auto", description="auto = paged_adamw_8bit on a GPU (GBEM-UA), adamw_torch_fused on the CPU; "
                            "or any transformers optimizer name")


class SearchRange(Section):
    """A numeric search dimension: ``{low, high, log}``; int when the LoRA field is an int."""

    low: float
    high: float
    log: bool = False


class TuneConfig(Section):
    """Optuna multi-objective search over LoRA hyper-parameters (maximize validation accuracy, minimize gap).

    ``n_trials`` is the *total* number of completed trials wanted in the study: a rerun or an extra worker
    (same storage and study) runs only the missing ones.
    """

    n_trials: int = Field(4, ge=1, description="total completed trials the study should reach")
    storage: str = Field(
        "journal:models/tune/study.journal", description="journal:<path> (file, shared by workers) or an RDB URL"
    )
    study_name: str = Field(
        "biaslab-lora", description="prefix; a hash of everything that makes trials comparable is appended"
    )
    trial_max_steps: int = Field(20, ge=1, description="optimizer steps per trial (caps the trial's epochs)")
    objective: Literal["gbem_ua", "logprob"] = Field(
        "gbem_ua",
        description="gbem_ua: the benchmark's own metrics on the validation professions; logprob: internal "
        "P(' так') vs P(' ні') accuracy and male/female answer disagreement",
    )
    accuracy_metric: str = Field("gbem_ua/qa_f1_man_nofem", description="maximized (objective gbem_ua)")
    gap_metric: str = Field("gbem_ua/qa_diff_fem", description="minimized (objective gbem_ua)")
    accuracy_tolerance: float | None = Field(
        None, ge=0, description="choose the lowest-gap trial whose accuracy is at least the base model's minus "
                                "this (the gate's rule); null = the Pareto rule (docs/lora_tuning.md)")
    stale_trial_minutes: float = Field(
        120.0, gt=0, description="a RUNNING trial older than this is a dead worker's: marked FAIL and redone"
    )
    output_dir: str = Field("models/tune", description="best_params.json and pareto_front.png")
    seed: int = Field(0, description="sampler seed; trial n samples with seed + n, so workers never collide")
    search_space: dict[str, list[Any] | SearchRange] = Field(
        default_factory=dict,
        description="LoRA field -> list of choices or {low, high, log}; merged over the built-in defaults",
    )


class CalibrateConfig(Section):
    """The known-answer check of the planted bias (stages ``control`` and ``calibrate``, docs/planted_bias.md)."""

    control_dir: str = Field("models/control", description="the counterbalanced control model")
    families: dict[str, dict[str, Literal["increase", "decrease"]]] = Field(
        default_factory=dict,
        description="family -> {headline metric: expected change from control to planted}; the first metric "
                    "of a family is its primary metric")
    mitigation_metrics: list[str] = Field(
        default_factory=list, description="metrics whose planted effect each mitigation's removed share is reported on")
    quality_metrics: list[str] = Field(default_factory=list, description="LM-quality metrics shown per variant")


class GateCondition(Section):
    metric: str
    rule: Literal["better_than_base_beyond_ci", "not_worse_than_base_minus", "at_most", "at_least"]
    tolerance: float = 0.0
    min_share: float = Field(0.0, ge=0, le=1, description=(
        "better_than_base_beyond_ci only: the variant must also remove at least this share of the base's distance "
        "from the metric's ideal (point estimates), so a significant nudge is not a debiasing"))

    @model_validator(mode="after")
    def _min_share_rule(self) -> "GateCondition":
        if self.min_share and self.rule != "better_than_base_beyond_ci":
            raise ValueError(f"registry.gate {self.metric}: min_share applies only to rule "
                             f"better_than_base_beyond_ci, not {self.rule}")
        return self


class RegistryConfig(Section):
    model_name: str = "biaslab-debiased"
    gate: list[GateCondition] = Field(default_factory=list)
    promotions_experiment: str = Field("biaslab-promotions", description=(
        "where `biaslab promote` records every gate decision; only promoters write there on a team server"))


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
    calibrate: CalibrateConfig = CalibrateConfig()
    tracking: TrackingConfig = TrackingConfig()

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
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())


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
