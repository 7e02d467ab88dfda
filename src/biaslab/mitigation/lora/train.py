"""LoRA fine-tuning with TRL's ``SFTTrainer`` and PEFT, resumable after an interruption.

    python -m pipelines.finetune                  # the DVC stage: models/base + data/prepared -> models/lora

What it does (GBEM-UA paper LoRA, defaults from ``params.yaml`` ``lora:``):

* data: prompt-completion examples from :mod:`biaslab.mitigation.lora.sft_data` (loss on the completion
  " так" only: TRL masks the prompt tokens of a prompt-completion dataset);
* model: a PEFT ``LoraConfig`` on the attention projections (q/k/v by default); only A and B train.
  PEFT initialises B = 0, so before the first step the adapted model equals its base exactly;
* checkpoints every ``save_steps`` optimizer steps in ``lora.checkpoint_dir``; a rerun resumes from
  the last *complete* one (model, optimizer, scheduler, RNG state, data position), so a killed run
  continues where it stopped. Checkpoints from different hyper-parameters, data or base model are
  never resumed: the directory carries a ``run_key.json`` and is cleared when the key changes;
* the finished adapter (safetensors) and ``variant.json`` ``{"base", "method": "lora",
  "hyperparameters"}`` are written atomically to the variant directory; the base's tokenizer is used.

Step arithmetic: one optimizer step = ``per_device_batch_size × gradient_accumulation_steps`` examples
(2 × 8 = 16), so ``steps = ceil(n_examples / 16) × epochs`` unless ``max_steps`` caps it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from biaslab import progress
from biaslab.atomic import atomic_dir
from biaslab.config import LoraConfig
from biaslab.errors import MissingInputError
from biaslab.models.peft_notices import quiet_checkpointing_deprecation
from biaslab.mitigation.lora.training_plan import Capabilities, TrainingPlan, load_for_training, plan_training
from biaslab.outputs import variant_dir
from biaslab.run_log import RunLog

# LoraConfig fields that change what is learned; the rest (save/log cadence) may change between resumes
TRAINING_KEYS = (
    "r", "alpha", "dropout", "target_modules", "epochs", "learning_rate", "per_device_batch_size",
    "gradient_accumulation_steps", "max_steps", "max_length", "augmentation", "sources", "seed",
    "mixed_precision", "gradient_checkpointing", "quantization", "optimizer", "objective", "pairing_weight",
    "pairing_pairs", "pairing_anchor",
)
# max_steps: every trial records the optimizer steps it trained, so the finetune trains what the tune scored
TUNABLE_KEYS = ("r", "alpha", "dropout", "target_modules", "epochs", "learning_rate", "max_steps")


@dataclass
class TrainOutcome:
    """What one training run produced: the adapted model (in memory) and how it got there."""

    model: Any
    global_step: int
    resumed_from: str | None
    log_history: list[dict[str, Any]] = field(default_factory=list)
    seconds_per_step: float | None = None  # wall clock of the steps run in *this* process

    @property
    def train_loss(self) -> float | None:
        losses = [h["train_loss"] for h in self.log_history if "train_loss" in h]
        return losses[-1] if losses else None


# --------------------------------------------------------------------------- hyper-parameters
def tuned_overrides(path: str | Path) -> dict[str, Any]:
    """The ``params`` of the tune stage's ``best_params.json`` (only LoRA keys the search may set)."""
    path = Path(path)
    if not path.is_file():
        raise MissingInputError(f"{path}: lora.use_tuned is true but the tune stage has not written it (dvc repro tune)")
    params = json.loads(path.read_text(encoding="utf-8")).get("params", {})
    unknown = sorted(set(params) - set(TUNABLE_KEYS))
    if unknown:
        raise ValueError(f"{path}: unexpected keys {unknown}; tunable LoRA keys are {list(TUNABLE_KEYS)}")
    return params


def with_overrides(cfg: LoraConfig, overrides: dict[str, Any]) -> LoraConfig:
    """``cfg`` with some fields replaced, re-validated (so a bad override fails like a bad params key)."""
    return LoraConfig.model_validate({**cfg.model_dump(), **overrides})


def hyperparameters(cfg: LoraConfig) -> dict[str, Any]:
    """The fields that determine the trained adapter (recorded in variant.json and the run key)."""
    dumped = cfg.model_dump()
    return {k: (list(dumped[k]) if isinstance(dumped[k], tuple) else dumped[k]) for k in TRAINING_KEYS}


def peft_config(cfg: LoraConfig):
    from peft import LoraConfig as PeftLoraConfig

    return PeftLoraConfig(
        r=cfg.r, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout, target_modules=list(cfg.target_modules),
        bias="none", task_type="CAUSAL_LM",
    )


def sft_config(cfg: LoraConfig, work_dir: Path, *, max_steps: int, checkpoints: bool, evaluate: bool,
               plan: TrainingPlan):
    """TRL ``SFTConfig``: precision, checkpointing and optimizer from ``plan``; offline (``report_to="none"``)."""
    from trl import SFTConfig

    return SFTConfig(
        output_dir=str(work_dir),
        num_train_epochs=cfg.epochs,
        max_steps=max_steps,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type="linear",
        per_device_train_batch_size=cfg.per_device_batch_size,
        per_device_eval_batch_size=max(cfg.per_device_batch_size, 8),
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        logging_steps=cfg.logging_steps,
        save_strategy="steps" if checkpoints else "no",
        save_steps=cfg.save_steps,
        save_total_limit=cfg.save_total_limit,
        eval_strategy="steps" if evaluate else "no",
        eval_steps=cfg.eval_steps or None,
        seed=cfg.seed,
        data_seed=cfg.seed,
        max_length=cfg.max_length,
        completion_only_loss=True,
        **plan.sft_arguments(),
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
    )


# --------------------------------------------------------------------------- MLflow curves
def curves_callback(log: RunLog, prefix: str = "train"):
    """A ``TrainerCallback`` sending every logged value (loss, lr, grad norm, eval loss) to the active run of ``log``."""
    from transformers import TrainerCallback

    class MlflowCurves(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero:
                log_curve_points(log, prefix, logs or {}, state.global_step)

    return MlflowCurves()


def log_curve_points(log: RunLog, prefix: str, logs: dict[str, Any], step: int) -> None:
    """One Trainer log entry's numbers as ``<prefix>/<key>`` at ``step`` (nothing without an active run)."""
    if log.active_run_id() is None:
        return
    for key, value in logs.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            log.log_metric(f"{prefix}/{key}", value, step=step)


def replay_checkpoint_curves(log: RunLog, prefix: str, trainer_state: dict[str, Any]) -> None:
    """The curves up to a checkpoint, from its ``log_history``, into this process's run.

    A resumed (or already finished) run's own callback sees only the steps after the checkpoint; without
    this its MLflow run and ``reports/curves`` would start at the checkpoint (or be empty).
    """
    for entry in trainer_state.get("log_history", []):
        log_curve_points(log, prefix, {k: v for k, v in entry.items() if k != "step"}, int(entry["step"]))


# --------------------------------------------------------------------------- checkpoints
def last_complete_checkpoint(checkpoint_dir: Path) -> Path | None:
    """The newest ``checkpoint-N`` holding a trainer state; half-written newer ones are deleted."""
    if not checkpoint_dir.is_dir():
        return None
    found = sorted(
        (p for p in checkpoint_dir.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.name.split("-")[-1]), reverse=True,
    )
    for ckpt in found:
        if (ckpt / "trainer_state.json").is_file() and any(ckpt.glob("*.safetensors")):
            return ckpt
        shutil.rmtree(ckpt, ignore_errors=True)  # killed while saving: unusable
    return None


def prepare_checkpoint_dir(checkpoint_dir: Path, run_key: str) -> None:
    """Keep checkpoints only if they belong to the same run (hyper-parameters, data, base model)."""
    key_file = checkpoint_dir / "run_key.json"
    if checkpoint_dir.is_dir():
        old = json.loads(key_file.read_text(encoding="utf-8")).get("run_key") if key_file.is_file() else None
        if old != run_key:
            shutil.rmtree(checkpoint_dir)
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    key_file.write_text(json.dumps({"run_key": run_key}) + "\n", encoding="utf-8")


def run_key(cfg: LoraConfig, examples: pd.DataFrame, base_fingerprint: str, plan: TrainingPlan | None = None) -> str:
    """Identity of a training run: a checkpoint from another key (or another machine's plan) is not resumed."""
    digest = hashlib.sha256(json.dumps(hyperparameters(cfg), sort_keys=True).encode())
    if plan is not None:
        digest.update(json.dumps(plan.describe(), sort_keys=True).encode())
    digest.update(base_fingerprint.encode())
    digest.update("\n".join(examples["prompt"] + "\t" + examples["completion"]).encode())
    return digest.hexdigest()[:16]


# --------------------------------------------------------------------------- training
def train_lora(
    model: Any,
    tokenizer: Any,
    train: pd.DataFrame,
    cfg: LoraConfig,
    work_dir: str | Path,
    *,
    valid: pd.DataFrame | None = None,
    max_steps: int | None = None,
    checkpoints: bool = True,
    callbacks: Sequence[Any] = (),
    curve_prefix: str = "train",
    plan: TrainingPlan | None = None,
    fmt: Any = None,
    log: RunLog | None = None,
    pairs: pd.DataFrame | None = None,
    anchor_cache: Any = None,
) -> TrainOutcome:
    """Attach a LoRA adapter to ``model`` and train it on ``train`` (prompt/completion columns).

    With ``checkpoints`` the run saves to ``work_dir`` and resumes from its last complete checkpoint.
    ``max_steps`` overrides ``cfg.max_steps`` (tuning trials). ``plan`` is how this machine trains
    (:func:`~biaslab.mitigation.lora.training_plan.plan_training` of ``cfg`` when None); ``model`` must have
    been loaded as it says (:func:`~biaslab.mitigation.lora.training_plan.load_for_training`). ``fmt`` is the
    scorer's :class:`~biaslab.scoring.formatting.PromptFormat` (default: the tokenizer's own BOS, raw
    prompts); examples are tokenised with it (:func:`~biaslab.mitigation.lora.sft_data.tokenized_examples`), so
    the adapter is trained on exactly what evaluation feeds. With ``log`` (the stage's
    :class:`~biaslab.run_log.RunLog`) the training curves go to its active run as ``<curve_prefix>/<key>``.
    ``pairs`` (:func:`~biaslab.mitigation.lora.logit_pairing.pair_set`) is required by, and only used with,
    ``cfg.objective == "logit_pairing"``; ``anchor_cache`` (a
    :class:`~biaslab.mitigation.lora.logit_pairing.AnchorCache`) shares its base anchors between the trials of a
    study. Returns the in-memory ``PeftModel``.
    """
    from datasets import Dataset
    from trl import SFTTrainer

    from biaslab.mitigation.lora.logit_pairing import encode_pairs, pairing_trainer_class
    from biaslab.mitigation.lora.sft_data import tokenized_examples
    from biaslab.scoring.formatting import PromptFormat

    work_dir = Path(work_dir)
    evaluate = valid is not None and not valid.empty and cfg.eval_steps > 0
    args = sft_config(cfg, work_dir, max_steps=cfg.max_steps if max_steps is None else max_steps,
                      checkpoints=checkpoints, evaluate=evaluate, plan=plan or plan_training(cfg))
    fmt = fmt if fmt is not None else PromptFormat.create(tokenizer)
    to_ds = lambda f: Dataset.from_pandas(tokenized_examples(f, fmt), preserve_index=False)  # noqa: E731
    pairing = cfg.objective == "logit_pairing"
    if pairing and (pairs is None or pairs.empty):
        raise ValueError("lora.objective logit_pairing needs counterfactual pairs (logit_pairing.pair_set)")
    with quiet_checkpointing_deprecation():  # PEFT wraps the model here
        trainer = (pairing_trainer_class() if pairing else SFTTrainer)(
            model=model,
            args=args,
            train_dataset=to_ds(train),
            eval_dataset=to_ds(valid) if evaluate else None,
            processing_class=tokenizer,
            peft_config=peft_config(cfg),
            callbacks=[*([curves_callback(log, curve_prefix)] if log is not None else []), *callbacks],
        )
    if pairing:
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        trainer.pairing = (encode_pairs(pairs, fmt), cfg.pairing_weight, cfg.pairing_pairs, cfg.seed, int(pad),
                           cfg.pairing_anchor)
        trainer.anchor_cache = anchor_cache
    progress.use_for_trainer(trainer, desc=curve_prefix)  # one bar, or periodic lines in a log
    resume = last_complete_checkpoint(work_dir) if checkpoints else None
    saved = json.loads((resume / "trainer_state.json").read_text()) if resume else {"global_step": 0}
    if log is not None and resume is not None and trainer.is_world_process_zero():  # where the callback logs
        replay_checkpoint_curves(log, curve_prefix, saved)
    if resume is not None and run_finished(saved):
        return finished_outcome(trainer.model, resume, saved)
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    steps_here = trainer.state.global_step - saved["global_step"]
    model = trainer.model
    model.eval()
    return TrainOutcome(
        model=model,
        global_step=trainer.state.global_step,
        resumed_from=resume.name if resume else None,
        log_history=list(trainer.state.log_history),
        seconds_per_step=(time.perf_counter() - started) / steps_here if steps_here > 0 else None,
    )


def run_finished(trainer_state: dict[str, Any]) -> bool:
    """Whether a checkpoint's ``trainer_state.json`` is the last step of its run (``global_step`` reached ``max_steps``)."""
    return 0 < int(trainer_state.get("max_steps", 0)) <= int(trainer_state["global_step"])


def finished_outcome(model: Any, checkpoint: Path, trainer_state: dict[str, Any]) -> TrainOutcome:
    """The outcome of a run whose last step is already checkpointed: its adapter weights, no training.

    Resuming the Trainer from such a checkpoint is not a no-op: it takes one more optimizer step (at learning
    rate 0 under the linear schedule, so the weights stay, but the step count, the curves and the variant's
    manifest move on by one, and every rerun of the stage added another).
    """
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    set_peft_model_state_dict(model, load_file(str(checkpoint / "adapter_model.safetensors")))
    model.eval()
    return TrainOutcome(model=model, global_step=int(trainer_state["global_step"]), resumed_from=checkpoint.name,
                        log_history=list(trainer_state.get("log_history", [])))


@dataclass
class FinetuneResult:
    output_dir: Path
    global_step: int
    resumed_from: str | None
    train_examples: int
    hyperparameters: dict[str, Any]
    train_loss: float | None
    seconds_per_step: float | None
    training: dict[str, Any] = field(default_factory=dict)  # the resolved TrainingPlan


def canonicalise_adapter_config(path: Path) -> None:
    """Sort the set-valued fields PEFT writes in set order (``target_modules``), in place.

    PEFT keeps ``target_modules`` as a Python set, so its JSON order follows string hashing, which
    changes with every interpreter (``PYTHONHASHSEED``): the same adapter then had different bytes on
    every run, a new content hash, and a new registry version although no weight changed.
    """
    config = json.loads(path.read_text(encoding="utf-8"))
    for key in ("target_modules", "modules_to_save", "exclude_modules"):
        if isinstance(config.get(key), list):
            config[key] = sorted(config[key])
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def finetune(
    base_dir: str | Path,
    frame: pd.DataFrame,
    cfg: LoraConfig,
    output_dir: str | Path,
    *,
    base_ref: str | None = None,
    callbacks: Sequence[Any] = (),
    add_bos: str | bool = "auto",
    prompt_format: str = "raw",
    log: RunLog | None = None,
    caps: Capabilities | None = None,
) -> FinetuneResult:
    """Fine-tune ``base_dir`` on the GBEM-UA ``frame`` (prepared schema) and write the LoRA variant.

    ``base_ref`` is the base path recorded in ``variant.json`` (default: ``base_dir`` as given, which
    should be relative to the project root so the variant loads from any checkout). ``add_bos`` and
    ``prompt_format`` are the evaluation's (``scoring.add_bos``, ``evaluation.prompt_format``): the
    adapter learns on the token sequences it is evaluated on. ``log``: where the training curves go
    (the finetune stage passes :mod:`biaslab.tracking.runs`). ``caps``: the machine (default: probed), so
    tests decide the device.
    """
    from biaslab.mitigation.lora.logit_pairing import pair_set
    from biaslab.mitigation.lora.sft_data import validation_examples
    from biaslab.mitigation.lora.sft_sources import training_set
    from biaslab.scoring.formatting import PromptFormat

    plan = plan_training(cfg, caps)  # fails here, before loading, when the machine cannot run the options
    train = training_set(frame, cfg.augmentation, cfg.sources)
    pairs = pair_set(frame, cfg.sources) if cfg.objective == "logit_pairing" else None
    valid = validation_examples(frame) if (frame["split"] == "validation").any() else None
    loaded = load_for_training(base_dir, plan)
    checkpoint_dir = Path(cfg.checkpoint_dir)
    fmt = PromptFormat.create(loaded.tokenizer, add_bos, prompt_format)
    # the token ids depend on the formatting too: checkpoints of another BOS / chat setting are not resumed
    formatted = "" if (add_bos, prompt_format) == ("auto", "raw") else f":{json.dumps(fmt.describe())}"
    prepare_checkpoint_dir(checkpoint_dir, run_key(cfg, train, loaded.fingerprint + formatted, plan))
    outcome = train_lora(loaded.model, loaded.tokenizer, train, cfg, checkpoint_dir, valid=valid,
                         callbacks=callbacks, plan=plan, fmt=fmt, log=log, pairs=pairs)
    hp = hyperparameters(cfg)
    with atomic_dir(output_dir) as tmp:
        outcome.model.save_pretrained(str(tmp), safe_serialization=True)
        canonicalise_adapter_config(tmp / "adapter_config.json")
        variant_dir.write_manifest(
            tmp, base=str(base_ref if base_ref is not None else base_dir), method="lora", hyperparameters=hp,
            training=plan.describe(), base_fingerprint=loaded.fingerprint, train_examples=len(train),
            global_step=outcome.global_step,
        )
    return FinetuneResult(Path(output_dir), outcome.global_step, outcome.resumed_from, len(train), hp,
                          outcome.train_loss, outcome.seconds_per_step, plan.describe())
