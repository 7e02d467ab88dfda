"""Train the offline default model: byte-level BPE tokenizer, then a small Llama, with a plain torch loop.

    python pipelines/base_model.py --params params.yaml      # the DVC stage; this module is its library

Steps (all deterministic for the same params, corpus and thread count):

1. :func:`biaslab.pretrain.corpus.load_corpus` — train/validation split *by document*, ``chars_per_language``
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
are reduced in a thread-dependent order). If ``max_minutes`` ends training before ``max_steps``, the number
of steps depends on machine speed; the summary records ``stopped_by`` so this is never hidden.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from biaslab.config import PretrainConfig
from biaslab.pretrain.corpus import LanguageSplit

IGNORE_INDEX = -100  # label value that cross-entropy skips (padding of the last validation block)


@dataclass
class ValidationSet:
    """One language's held-out blocks: ``input_ids``/``labels`` ``[N, seq_len]`` and its character count."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    n_chars: int


@dataclass
class TrainResult:
    model: Any
    tokenizer: Any
    summary: dict[str, Any]
    loss_curve: list[tuple[int, float]] = field(default_factory=list)
    val_curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # language -> (step, ppl)


# --------------------------------------------------------------------------- data
def encode_texts(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """``<s> text </s>`` for every text, concatenated into one token stream."""
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    stream: list[int] = []
    for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]:
        stream.extend([bos, *ids, eos])
    return stream


def pack_blocks(stream: Sequence[int], seq_len: int) -> torch.Tensor:
    """Cut a token stream into ``[len(stream) // seq_len, seq_len]`` blocks (the tail is dropped)."""
    n = len(stream) // seq_len
    if n == 0:
        raise ValueError(f"training text too short: {len(stream)} tokens make no block of seq_len={seq_len}")
    return torch.tensor(stream[: n * seq_len], dtype=torch.long).view(n, seq_len)


def validation_set(tokenizer: Any, texts: Sequence[str], seq_len: int) -> ValidationSet:
    """All held-out tokens in ``[N, seq_len]`` blocks; the last block is padded and its padding not scored."""
    stream = encode_texts(tokenizer, texts)
    n = math.ceil(len(stream) / seq_len)
    ids = torch.full((n * seq_len,), tokenizer.pad_token_id, dtype=torch.long)
    ids[: len(stream)] = torch.tensor(stream, dtype=torch.long)
    labels = ids.clone()
    labels[len(stream) :] = IGNORE_INDEX
    return ValidationSet(ids.view(n, seq_len), labels.view(n, seq_len), sum(map(len, texts)))


def batches(blocks: torch.Tensor, batch_size: int, seed: int) -> Iterator[torch.Tensor]:
    """Endless ``[batch_size, seq_len]`` batches; a fresh seeded permutation of the blocks every epoch."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(len(blocks), generator=generator)  # [N]
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield blocks[order[start : start + batch_size]]
        if len(order) < batch_size:
            raise ValueError(f"{len(blocks)} training blocks cannot fill one batch of {batch_size}")


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


def unigram_perplexity(train_blocks: torch.Tensor, vs: ValidationSet, vocab_size: int) -> float:
    """Perplexity of the add-one-smoothed unigram distribution of the training tokens on validation tokens."""
    counts = torch.bincount(train_blocks.reshape(-1), minlength=vocab_size).double() + 1.0  # [V]
    log_p = counts.log() - counts.sum().log()  # [V]
    target = vs.labels[:, 1:].reshape(-1)
    target = target[target != IGNORE_INDEX]
    return math.exp(-float(log_p[target].mean()))


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
    """Seed torch and require deterministic kernels for the duration of training, then restore."""
    previous = torch.are_deterministic_algorithms_enabled()
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous)


def _progress(total: int, enabled: bool):
    from biaslab.progress import bar

    return bar(total=total, desc="base_model", unit="step", disable=not enabled)


# --------------------------------------------------------------------------- the whole run
def train_base_model(
    splits: Mapping[str, LanguageSplit], cfg: PretrainConfig, *, progress: bool = True
) -> TrainResult:
    """Train tokenizer and model on ``splits`` (from ``load_corpus``) with the sizes and budget of ``cfg``."""
    from biaslab.pretrain.architecture import build_llama
    from biaslab.pretrain.tokenizer import train_bpe_tokenizer

    started = time.monotonic()
    train_texts = [t for s in splits.values() for t in s.train_texts]
    tokenizer = train_bpe_tokenizer((line for t in train_texts for line in t.split("\n")), cfg.vocab_size)
    tokenizer_seconds = time.monotonic() - started

    blocks = pack_blocks(encode_texts(tokenizer, train_texts), cfg.seq_len)  # [N, seq_len], languages mixed
    val_sets = {lang: validation_set(tokenizer, s.validation_texts, cfg.seq_len) for lang, s in splits.items()}
    unigram = {lang: unigram_perplexity(blocks, vs, len(tokenizer)) for lang, vs in val_sets.items()}

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
        model.train()
        optimizer = make_optimizer(model, cfg)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: lr_factor(s, cfg.warmup_steps, cfg.max_steps)
        )
        loss_curve: list[tuple[int, float]] = []
        val_curves: dict[str, list[tuple[int, float]]] = {lang: [] for lang in val_sets}
        deadline = time.monotonic() + cfg.max_minutes * 60
        train_started = time.monotonic()
        stopped_by, step, last_eval, last_eval_step = "max_steps", 0, {}, -1
        data = batches(blocks, cfg.batch_size, cfg.seed)
        with _progress(cfg.max_steps, progress) as bar:
            while step < cfg.max_steps:
                if time.monotonic() >= deadline:
                    stopped_by = "max_minutes"
                    break
                batch = next(data)  # [B, seq_len]
                loss = model(input_ids=batch, labels=batch).loss  # labels are shifted inside the model
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                optimizer.step()
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                loss_curve.append((step, loss.detach().item()))
                bar.update(1)
                bar.set_postfix(loss=f"{loss_curve[-1][1]:.3f}")
                if step % cfg.eval_every == 0:
                    last_eval, last_eval_step = _record_eval(model, val_sets, cfg, step, val_curves, bar), step
        if last_eval_step != step:  # the final evaluation, unless the last step was just evaluated
            last_eval = _record_eval(model, val_sets, cfg, step, val_curves, None)
    model.eval()

    summary = {
        "steps": step,
        "stopped_by": stopped_by,
        "minutes": round((time.monotonic() - started) / 60, 3),
        "train_minutes": round((time.monotonic() - train_started) / 60, 3),
        "tokenizer_seconds": round(tokenizer_seconds, 2),
        "tokens_seen": step * cfg.batch_size * cfg.seq_len,
        "train_blocks": len(blocks),
        "train_tokens": int(blocks.numel()),
        "epochs": round(step * cfg.batch_size / len(blocks), 3),
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "torch_threads": torch.get_num_threads(),
        "final_train_loss": loss_curve[-1][1] if loss_curve else None,
        "val_ppl": {lang: m["ppl"] for lang, m in last_eval.items()},
        "val_bits_per_char": {lang: m["bits_per_char"] for lang, m in last_eval.items()},
        "unigram_ppl": unigram,
        "corpus": {
            lang: {
                "train_chars": s.train_chars,
                "train_documents": len(s.train_sources),
                "validation_chars": s.validation_chars,
                "validation_documents": s.validation_sources,
            }
            for lang, s in splits.items()
        },
        "params": cfg.model_dump(mode="json"),
    }
    return TrainResult(model, tokenizer, summary, loss_curve, val_curves)


def _record_eval(model, val_sets, cfg, step, val_curves, bar) -> dict[str, dict[str, float]]:
    result = evaluate(model, val_sets, cfg.batch_size)
    for lang, m in result.items():
        val_curves[lang].append((step, m["ppl"]))
    if bar is not None:
        bar.write(f"step {step}: val ppl " + ", ".join(f"{k} {v['ppl']:.1f}" for k, v in result.items()))
    return result
