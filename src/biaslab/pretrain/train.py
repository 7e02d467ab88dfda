"""Train the offline default model: byte-level BPE tokenizer, then a small Llama, with a plain torch loop.

    python -m pipelines.base_model --params params.yaml      # the DVC stage; this module is its library

Steps (all deterministic for the same params, corpus and thread count):

1. :func:`biaslab.data.corpus.load_corpus` — train/validation split *by document*, ``chars_per_language``
   characters of training text per language (balanced), ``validation_chars`` of held-out text per language.
2. Tokenizer: byte-level BPE (``vocab_size``) trained on the training text of all languages.
3. Packing: every text becomes ``<s> ids </s>``; the training stream of all languages is concatenated and cut
   into ``[N, seq_len]`` blocks, shuffled with a seeded generator each epoch (languages mixed in every batch).
4. Loop: AdamW (weight decay on matrices only), linear warmup then cosine decay to 10 % of the peak rate,
   gradient-norm clipping, stop at ``max_steps`` or ``max_minutes`` (whichever comes first).
5. Validation every ``eval_every`` steps and at the end: per-language token perplexity and bits per
   character on held-out documents, next to the unigram baseline (the perplexity of predicting every token by
   its training frequency) — a model that has learned anything real must be far below it.

Reproducibility: the weights depend on the seed, the params and the number of torch threads (float sums
are reduced in a thread-dependent order). ``device`` (default the CPU, which the pipeline's stages use)
trains on another torch device, e.g. ``cuda`` for many draws of the recipe (``bench/planted_draws.py``):
another device is another draw, as another CPU is. If ``max_minutes`` ends training before ``max_steps``, the number
of steps depends on machine speed; the summary records ``stopped_by`` so this is never hidden.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from biaslab import cpu_arithmetic
from biaslab.config import PretrainConfig
from biaslab.errors import MissingInputError
from biaslab.data.corpus import LanguageSplit
from biaslab.pretrain.blocks import IGNORE_INDEX, PretrainData, RowSampler, ValidationSet, prepare_data


@dataclass
class TrainResult:
    model: Any
    tokenizer: Any
    summary: dict[str, Any]
    loss_curve: list[tuple[int, float]] = field(default_factory=list)
    val_curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # language -> (step, ppl)


# --------------------------------------------------------------------------- evaluation
@torch.no_grad()
def evaluate(model: Any, sets: Mapping[str, ValidationSet], batch_size: int) -> dict[str, dict[str, float]]:
    """Per language: token perplexity ``exp(mean NLL)`` and bits per character ``sum NLL / ln 2 / chars``."""
    was_training = model.training
    model.eval()
    out = {}
    for language, vs in sets.items():
        nll, count = 0.0, 0
        for start in range(0, len(vs.input_ids), batch_size):
            ids, labels = vs.input_ids[start : start + batch_size], vs.labels[start : start + batch_size]
            logits = model(input_ids=ids).logits[:, :-1].float()  # [B, T-1, V]: position t predicts t+1
            target = labels[:, 1:]  # [B, T-1]
            nll += torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.size(-1)), target.reshape(-1), ignore_index=IGNORE_INDEX, reduction="sum"
            ).item()
            count += int((target != IGNORE_INDEX).sum())
        out[language] = {"ppl": math.exp(nll / count), "bits_per_char": nll / math.log(2) / vs.n_chars}
    model.train(was_training)
    return out


# --------------------------------------------------------------------------- optimisation
def lr_factor(step: int, warmup_steps: int, max_steps: int, floor: float = 0.1) -> float:
    """Linear warmup to 1, then cosine decay to ``floor`` at ``max_steps`` (``step`` counts from 0)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = min((step - warmup_steps) / max(max_steps - warmup_steps, 1), 1.0)
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def make_optimizer(model: torch.nn.Module, cfg: PretrainConfig) -> torch.optim.Optimizer:
    """AdamW; weight decay on weight matrices and embeddings only (not on norms)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.learning_rate, betas=(0.9, 0.95), eps=1e-8)


@contextlib.contextmanager
def deterministic(seed: int) -> Iterator[None]:
    """Seed torch and require deterministic kernels for the duration of training, then restore.

    ``warn_only``: an op whose kernel on the device is not deterministic warns instead of stopping (on an
    H200: memory-efficient attention's backward), so a CUDA run is a draw that need not repeat bit for bit;
    every op of the CPU path is deterministic, so CPU runs stay bit-reproducible.
    """
    previous = torch.are_deterministic_algorithms_enabled()
    previous_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous, warn_only=previous_warn_only)


def _progress(total: int, initial: int, enabled: bool, desc: str):
    """Steps ``initial`` .. ``total`` of a run (a continued phase counts only its own steps)."""
    from biaslab.progress import bar

    return bar(total=total - initial, desc=desc, unit="step", disable=not enabled)


@dataclass
class Mixture:
    """Extra blocks mixed into every batch from ``from_step`` on: ``rows`` of the ``batch_size`` rows."""

    blocks: torch.Tensor  # [M, seq_len]
    rows: int
    seed: int


# --------------------------------------------------------------------------- training state
@dataclass
class TrainState:
    """Everything needed to continue a run after any step (and to save it as a checkpoint)."""

    model: Any
    optimizer: torch.optim.Optimizer
    step: int = 0
    generic_rows: int = 0  # rows drawn from the corpus stream so far
    mixed_rows: int = 0  # rows drawn from the mixture stream so far
    loss_curve: list[tuple[int, float]] = field(default_factory=list)
    val_curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    last_eval: dict[str, dict[str, float]] = field(default_factory=dict)
    last_eval_step: int = -1
    train_seconds: float = 0.0


def init_state(tokenizer: Any, cfg: PretrainConfig, device: str = "cpu") -> TrainState:
    """A freshly initialised model (seeded, on the CPU, then moved to ``device``) and its optimizer."""
    from biaslab.pretrain.architecture import build_llama

    with deterministic(cfg.seed):
        model = build_llama(
            vocab_size=len(tokenizer),
            hidden_size=cfg.hidden_size,
            intermediate_size=cfg.intermediate_size,
            num_hidden_layers=cfg.num_hidden_layers,
            num_attention_heads=cfg.num_attention_heads,
            num_key_value_heads=cfg.num_key_value_heads,
            max_position_embeddings=max(cfg.seq_len, 512),  # RoPE: scoring may feed longer prompts
            tie_word_embeddings=False,
            seed=cfg.seed,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    return TrainState(model.to(device), make_optimizer(model, cfg))


def train_steps(
    state: TrainState,
    data: PretrainData,
    cfg: PretrainConfig,
    until_step: int,
    *,
    mixture: Mixture | None = None,
    progress: bool = True,
    desc: str = "base_model",
) -> str:
    """Train ``state`` in place up to ``until_step``; returns ``"max_steps"`` or ``"max_minutes"``.

    Each batch holds ``batch_size - mixture.rows`` corpus rows and ``mixture.rows`` mixture rows (both
    streams continue where ``state`` left them). The learning rate of step ``k`` is
    ``learning_rate * lr_factor(k, warmup_steps, max_steps)``, so a run split into several calls follows
    the same schedule as one call. ``max_minutes`` bounds this call's loop (a safety net: ``max_steps``
    is meant to be the binding bound).
    """
    if mixture is not None and not 0 <= mixture.rows <= cfg.batch_size:
        raise ValueError(f"mixture rows {mixture.rows} must be within [0, batch_size={cfg.batch_size}]")
    mixed = mixture.rows if mixture is not None else 0
    generic = RowSampler(len(data.blocks), cfg.seed)
    generic.skip(state.generic_rows)
    extra = None
    if mixed:
        extra = RowSampler(len(mixture.blocks), mixture.seed)
        extra.skip(state.mixed_rows)
    for lang in data.val_sets:
        state.val_curves.setdefault(lang, [])
    model, optimizer = state.model, state.optimizer
    deadline = time.monotonic() + cfg.max_minutes * 60
    started = time.monotonic()
    stopped_by = "max_steps"
    with deterministic(cfg.seed + state.step), _progress(until_step, state.step, progress, desc) as bar:
        model.train()
        while state.step < until_step:
            if time.monotonic() >= deadline:
                stopped_by = "max_minutes"
                break
            batch = data.blocks[generic.take(cfg.batch_size - mixed)]  # [B - k, seq_len]
            if extra is not None:
                batch = torch.cat([batch, mixture.blocks[extra.take(mixed)]])  # [B, seq_len]
            for group in optimizer.param_groups:
                group["lr"] = cfg.learning_rate * lr_factor(state.step, cfg.warmup_steps, cfg.max_steps)
            loss = model(input_ids=batch, labels=batch).loss  # labels are shifted inside the model
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            state.step += 1
            state.generic_rows, state.mixed_rows = generic.consumed, (extra.consumed if extra else state.mixed_rows)
            state.loss_curve.append((state.step, loss.detach().item()))
            bar.update(1)
            bar.set_postfix(loss=f"{state.loss_curve[-1][1]:.3f}")
            if state.step % cfg.eval_every == 0:
                _record_eval(state, data, cfg, bar)
        if state.last_eval_step != state.step:  # the final evaluation, unless the last step was just evaluated
            _record_eval(state, data, cfg, None)
    model.eval()
    state.train_seconds += time.monotonic() - started
    return stopped_by


def _record_eval(state: TrainState, data: PretrainData, cfg: PretrainConfig, bar) -> None:
    result = evaluate(state.model, data.val_sets, cfg.batch_size)
    for lang, m in result.items():
        state.val_curves[lang].append((state.step, m["ppl"]))
    state.last_eval, state.last_eval_step = result, state.step
    if bar is not None:
        bar.write(f"step {state.step}: val ppl " + ", ".join(f"{k} {v['ppl']:.1f}" for k, v in result.items()))


# --------------------------------------------------------------------------- checkpoints
CHECKPOINT_STATE = "trainer_state.json"
OPTIMIZER_FILE = "optimizer.safetensors"


def save_checkpoint(state: TrainState, tokenizer: Any, out_dir: Path, extra: Mapping[str, Any] | None = None) -> None:
    """Model, tokenizer, optimizer state (safetensors, no pickle) and the stream positions, into ``out_dir``."""
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    state.model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    tensors, scalars = {}, {}
    for index, slot in state.optimizer.state_dict()["state"].items():
        for name, value in slot.items():
            if torch.is_tensor(value) and value.dim() > 0:
                tensors[f"{index}.{name}"] = value.cpu().contiguous()
            else:
                scalars[f"{index}.{name}"] = float(value)
    save_file(tensors, str(out_dir / OPTIMIZER_FILE))
    record = {
        "step": state.step, "generic_rows": state.generic_rows, "mixed_rows": state.mixed_rows,
        "optimizer_scalars": scalars, "loss_curve": state.loss_curve, "val_curves": state.val_curves,
        "last_eval": state.last_eval, "last_eval_step": state.last_eval_step,
        **(extra or {}),  # no train_seconds: wall-clock time stays out of DVC outputs (TIMING_KEYS)
    }
    (out_dir / CHECKPOINT_STATE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def load_checkpoint(ckpt_dir: Path, cfg: PretrainConfig, device: str = "cpu") -> tuple[TrainState, Any, dict[str, Any]]:
    """``(state, tokenizer, record)`` of a checkpoint written by :func:`save_checkpoint`, the model on ``device``."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, LlamaForCausalLM

    ckpt_dir = Path(ckpt_dir)
    record_path = ckpt_dir / CHECKPOINT_STATE
    if not record_path.is_file():
        raise MissingInputError(f"{record_path}: not a training checkpoint (run the base_model stage first: dvc repro base_model)")
    record = json.loads(record_path.read_text(encoding="utf-8"))
    tokenizer = AutoTokenizer.from_pretrained(ckpt_dir)
    model = LlamaForCausalLM.from_pretrained(ckpt_dir, use_safetensors=True, dtype=torch.float32).to(device)
    optimizer = make_optimizer(model, cfg)
    saved = optimizer.state_dict()
    tensors = load_file(str(ckpt_dir / OPTIMIZER_FILE))
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = value
    for key, value in record["optimizer_scalars"].items():
        index, name = key.split(".", 1)
        state.setdefault(int(index), {})[name] = torch.tensor(value)
    optimizer.load_state_dict({"state": state, "param_groups": saved["param_groups"]})
    train_state = TrainState(
        model, optimizer, step=record["step"], generic_rows=record["generic_rows"], mixed_rows=record["mixed_rows"],
        loss_curve=[tuple(x) for x in record["loss_curve"]],
        val_curves={k: [tuple(x) for x in v] for k, v in record["val_curves"].items()},
        last_eval=record["last_eval"], last_eval_step=record["last_eval_step"],
    )
    return train_state, tokenizer, record


# --------------------------------------------------------------------------- summary and the whole run
TIMING_KEYS = ("minutes", "train_minutes", "tokenizer_seconds")
"""A summary's wall-clock fields: printed and logged to MLflow, never written into a model folder. A model
folder is a DVC output: these would give every run of the same model (bit-identical weights) another
digest, and every stage downstream of it would run again."""


def without_timings(summary: Mapping[str, Any]) -> dict[str, Any]:
    """``summary`` without :data:`TIMING_KEYS`: what a model folder's ``training_summary.json`` holds."""
    return {k: v for k, v in summary.items() if k not in TIMING_KEYS}


def summarize(state: TrainState, data: PretrainData, cfg: PretrainConfig, stopped_by: str, minutes: float,
              **extra: Any) -> dict[str, Any]:
    """The ``training_summary.json`` record of a finished run."""
    return {
        "steps": state.step,
        "stopped_by": stopped_by,
        "minutes": round(minutes, 3),
        "train_minutes": round(state.train_seconds / 60, 3),
        "tokenizer_seconds": round(data.tokenizer_seconds, 2),
        "tokens_seen": state.step * cfg.batch_size * cfg.seq_len,
        "train_blocks": len(data.blocks),
        "train_tokens": int(data.blocks.numel()),
        "epochs": round(state.generic_rows / len(data.blocks), 3),
        "n_parameters": sum(p.numel() for p in state.model.parameters()),
        "torch_threads": torch.get_num_threads(),
        "cpu_arithmetic": cpu_arithmetic.in_effect(),  # the kernels it trained with (scoring.cpu_arithmetic)
        "final_train_loss": state.loss_curve[-1][1] if state.loss_curve else None,
        "val_ppl": {lang: m["ppl"] for lang, m in state.last_eval.items()},
        "val_bits_per_char": {lang: m["bits_per_char"] for lang, m in state.last_eval.items()},
        "unigram_ppl": data.unigram,
        "corpus": {
            lang: {
                "train_chars": s.train_chars,
                "train_documents": len(s.train_sources),
                "validation_chars": s.validation_chars,
                "validation_documents": s.validation_sources,
            }
            for lang, s in data.splits.items()
        },
        "params": cfg.model_dump(mode="json"),
        **extra,
    }


def train_base_model(
    splits: Mapping[str, LanguageSplit], cfg: PretrainConfig, *, progress: bool = True,
    mixture: Mixture | None = None, mix_from_step: int = 0,
) -> TrainResult:
    """Train tokenizer and model on ``splits`` in one call (optionally mixing ``mixture`` in from a step)."""
    started = time.monotonic()
    data = prepare_data(splits, cfg)
    state = init_state(data.tokenizer, cfg)
    stopped_by = train_steps(state, data, cfg, min(mix_from_step, cfg.max_steps) if mixture else cfg.max_steps,
                             progress=progress)
    if mixture is not None and stopped_by == "max_steps":
        stopped_by = train_steps(state, data, cfg, cfg.max_steps, mixture=mixture, progress=progress)
    summary = summarize(state, data, cfg, stopped_by, (time.monotonic() - started) / 60)
    return TrainResult(state.model, data.tokenizer, summary, state.loss_curve, state.val_curves)
