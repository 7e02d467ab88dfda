"""The ``variants``, ``embedding_debias``, ``lora`` and ``tune`` sections: what each mitigation fits and how."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from biaslab.config.section import Section


# --------------------------------------------------------------------------- variants & mitigations
class GateControl(Section):
    """How a control of the gate is built (method ``control``; stage ``gate_control``, docs/gate.md "Controls").

    ``positive``: ``balanced_finetune`` - the base model fine-tuned for ``steps`` steps at ``learning_rate``
    (a tenth of the steps' warmup, then a cosine decay) on the planted recipe's own counterbalanced text,
    mixed with corpus rows at the recipe's dose (never a benchmark item); the gate must pass it.
    ``negative``: ``noised_embeddings`` - the base's input embeddings plus Gaussian noise of ``scale`` times
    their standard deviation (``seed``); the gate must refuse it by a harm rule.
    """

    role: Literal["positive", "negative"]
    recipe: Literal["balanced_finetune", "noised_embeddings"]
    steps: int = Field(40, ge=1, description="balanced_finetune: optimizer steps (chosen on selection items)")
    learning_rate: float = Field(1e-3, gt=0, description="balanced_finetune: peak rate (chosen on selection items)")
    scale: float = Field(0.5, gt=0, description="noised_embeddings: noise sd / the embedding matrix's sd")
    seed: int = 0


class VariantConfig(Section):
    """A variant = base model + one mitigation. Evaluation treats all variants alike."""

    method: Literal["none", "prompt", "embedding", "lora", "control"]
    model_dir: str = Field(description="artifact directory the variant is loaded from")
    description: str = ""
    prompt_prefix: dict[str, str] = Field(default_factory=dict, description="language code -> prefix text")
    embedding_mode: Literal["soft", "hard"] | None = None
    embedding_apply: Literal["rows", "checkpoint", "hook"] = Field(
        "rows", description="rows: variant.json + the edited embedding rows, put into the base at load (the "
                            "checkpoint edit stored as the edit); checkpoint: an edited copy of the base's files; "
                            "hook: variant.json + the runtime hook (the target words' positions only)")
    embedding_overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="method embedding: keys of the embedding_debias section that differ for this variant")
    lora_overrides: dict[str, Any] = Field(
        default_factory=dict, description="method lora: keys of the lora section that differ for this variant")
    tune_overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="method lora: this variant's own Optuna study (stage tune_variant): keys of the tune section "
                    "that differ, output_dir required; empty = the tune section's study (stage tune)")
    control: GateControl | None = Field(None, description="method control: how this control of the gate is built")

    @model_validator(mode="after")
    def _control_has_its_recipe(self) -> "VariantConfig":
        if (self.method == "control") != (self.control is not None):
            raise ValueError("a variant has a control: section exactly when its method is control")
        return self


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
    heartbeat_seconds: int = Field(
        60, ge=1, description="RDB storage: Optuna's heartbeat interval of a running trial (RDBStorage heartbeat_interval)"
    )
    heartbeat_grace_seconds: int | None = Field(
        None, ge=1, description="RDB storage: a trial silent this long is a dead worker's (grace_period; "
                                "null = 2 x heartbeat_seconds)"
    )
    trial_retries: int = Field(
        2, ge=0, description="a dead worker's trial is re-queued with the same params at most this many times "
                             "(Optuna's RetryHeartbeatStaleTrialCallback; journal: when its process is gone)"
    )
    output_dir: str = Field("models/tune", description="best_params.json and pareto_front.png")
    seed: int = Field(0, description="sampler seed; trial n samples with seed + n, so workers never collide")
    search_space: dict[str, list[Any] | SearchRange] = Field(
        default_factory=dict,
        description="LoRA field -> list of choices or {low, high, log}; merged over the built-in defaults",
    )
