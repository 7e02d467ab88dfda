"""The ``model``, ``scoring`` and ``evaluation`` sections: which model, how it is trained here, scored and evaluated."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, field_validator, model_validator

from biaslab.config.section import Section


# --------------------------------------------------------------------------- model
_COMMIT = re.compile(r"[0-9a-f]{40}")

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
    """Which model, and what loading it may do. ``trust_remote_code`` and ``allow_pickle`` run code from the
    model's files, so they are strict booleans (``"yes"`` or ``1`` is an error, not a true) and remote code
    needs ``revision`` pinned to a 40-hex commit: a branch or tag can move to other code."""

    source: str | None = Field(None, description="hub id or local path; null trains the offline default model")
    revision: str | None = Field(None, description="pinned hub revision (commit) for reproducible snapshots")
    kind: Literal["auto", "causal", "masked"] = "auto"
    trust_remote_code: StrictBool = Field(False, description="run the model repository's own Python code; needs "
                                          "revision pinned to a commit sha")
    allow_pickle: StrictBool = Field(False, description="allow loading .bin/.pt pickle checkpoints (unsafe)")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="dtype models/base is stored in; auto = the checkpoint's own (every later copy keeps it)")
    device_map: str | dict[str, int | str] | None = Field(
        None, description="accelerate device map for models that do not fit one GPU (auto, balanced, or "
        "module -> device); null = the whole model on scoring.device")
    output_dir: str = "models/base"
    pretrain: PretrainConfig = PretrainConfig()

    @model_validator(mode="after")
    def _remote_code_is_pinned(self) -> "ModelConfig":
        if self.trust_remote_code and not (self.revision and _COMMIT.fullmatch(self.revision)):
            raise ValueError(f"trust_remote_code: true needs model.revision pinned to a 40-hex commit sha (got "
                             f"{self.revision!r}): a branch or tag can move to other code")
        return self


# --------------------------------------------------------------------------- scoring
class ScoringConfig(Section):
    batch_size: int | Literal["auto"] = "auto"
    max_batch_tokens: Annotated[int, Field(gt=0)] | Literal["auto"] = Field(
        1024, description="padded-token budget per batch; auto = sized from free GPU memory (1024 on the CPU)")
    prefix_sharing: Literal["auto", "on", "off"] = Field(
        "auto", description="share token prefixes through a gathered KV cache: auto = where the model's cache "
        "type can be gathered (else one row per request, logged), on = required, off = never (same scores)")
    num_threads: int | None = Field(None, description="torch intra-op threads; null = physical cores")
    device: Literal["auto", "cpu", "cuda"] = Field(
        "auto", description="where models are scored; auto = a CUDA GPU when present, else the CPU")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="auto = bfloat16 on a GPU that supports it, float32 on the CPU")
    cache_dir: str | None = Field(None, description="on-disk result cache keyed by model fingerprint; null = off")
    add_bos: Literal["auto"] | bool = Field(
        "auto", description="BOS before every prompt: auto = what the tokenizer adds by default (the papers' "
        "setting; lm-evaluation-harness add_bos_token unset), true / false force it (causal LMs)")
    cpu_arithmetic: Literal["portable", "native"] = Field(
        "portable", description="portable = PyTorch and MKL capped at AVX2, MKL in strict reproducible mode: the same "
        "bytes on AVX2 and AVX-512 CPUs (biaslab.cpu_arithmetic); native = the machine's fastest kernels")

    @field_validator("prefix_sharing", mode="before")
    @classmethod
    def _yaml_on_off(cls, value: Any) -> Any:
        """YAML 1.1 reads a bare ``on`` / ``off`` as true / false: take them as the words."""
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


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
