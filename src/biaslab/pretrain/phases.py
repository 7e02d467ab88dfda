"""The offline default model in two phases, so the calibrate stage's control costs only the second.

1. :func:`train_shared` (stage ``pretrain``): tokenizer + the first ``planted_bias.from_step`` steps on
   the corpora alone; saved as a checkpoint (model, tokenizer, optimizer state as safetensors, stream
   positions) in ``models/pretrain``.
2. :func:`continue_training` (stage ``base_model`` with ``direction: planted``, stage ``calibrate`` with
   ``direction: balanced``): the same checkpoint trained on to ``max_steps``, with ``dose`` of every batch
   drawn from planted text of the given direction.

Both continuations see the same corpus rows in the same order and the same planted frames, so the planted
model and its control differ *only* in the gender of the planted sentences. A run split this way is
bit-identical to one uninterrupted run with the same mixture (same thread count); with the planted bias
disabled the second phase trains on the corpora alone.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biaslab.atomic import atomic_dir
from biaslab.config import Params

PLANTED_FILE = "planted_bias.json"  # the answer key: params, lexicon, statistics
SAMPLE_FILE = "planted_sample.txt"  # the first planted documents, for reading
SAMPLE_DOCUMENTS = 100


def shared_steps(params: Params) -> int:
    """Steps of the shared first phase: ``planted_bias.from_step`` capped at ``max_steps``."""
    cfg = params.model.pretrain
    return min(cfg.planted_bias.from_step, cfg.max_steps)


def _splits(params: Params):
    from biaslab.data import sources
    from biaslab.data.corpus import load_corpus

    cfg = params.model.pretrain
    # the mirror's corpora, else rebuilt from their pinned GitHub sources into the download cache
    corpus_dir = cfg.corpus_dir or sources.corpus_dir(params.data, cfg.languages)
    return load_corpus(corpus_dir, cfg.languages, cfg.chars_per_language, cfg.validation_documents,
                       cfg.validation_chars, cfg.seed)


def train_shared(params: Params, out_dir: str | os.PathLike[str], *, progress: bool = True,
                 device: str = "cpu") -> dict[str, Any]:
    """Phase 1 into ``out_dir`` (atomic), trained on ``device``; returns its summary."""
    from biaslab.pretrain.blocks import prepare_data
    from biaslab.pretrain.train import init_state, save_checkpoint, summarize, train_steps, without_timings

    cfg = params.model.pretrain
    started = time.monotonic()
    data = prepare_data(_splits(params), cfg, device=device)
    state = init_state(data.tokenizer, cfg, device)
    stopped_by = train_steps(state, data, cfg, shared_steps(params), progress=progress, desc="pretrain")
    summary = summarize(state, data, cfg, stopped_by, (time.monotonic() - started) / 60, phase="shared")
    with atomic_dir(out_dir) as tmp:
        save_checkpoint(state, data.tokenizer, tmp, {"summary": without_timings(summary)})
    return summary


@dataclass
class ContinuedRun:
    model: Any
    tokenizer: Any
    summary: dict[str, Any]
    loss_curve: list[tuple[int, float]]
    val_curves: dict[str, list[tuple[int, float]]]
    planted: dict[str, Any]  # the answer key written to PLANTED_FILE
    sample: list[str]


def continue_training(params: Params, checkpoint_dir: str | os.PathLike[str], direction: str,
                      *, progress: bool = True, desc: str = "base_model", device: str = "cpu") -> ContinuedRun:
    """Phase 2 from ``checkpoint_dir`` with planted text of ``direction`` (``planted`` | ``balanced``), on ``device``."""
    from biaslab.pretrain.planted.lexicon import build_lexicon
    from biaslab.pretrain.planted.mixture import planted_blocks, rows_per_batch
    from biaslab.pretrain.blocks import prepare_data
    from biaslab.pretrain.train import Mixture, load_checkpoint, summarize, train_steps

    cfg = params.model.pretrain
    pb = cfg.planted_bias
    started = time.monotonic()
    state, tokenizer, record = load_checkpoint(Path(checkpoint_dir), cfg, device)
    if state.step != shared_steps(params):
        raise ValueError(f"{checkpoint_dir}: checkpoint is at step {state.step}, params say the shared phase ends "
                         f"at {shared_steps(params)}; re-run the base_model stage (dvc repro base_model)")
    data = prepare_data(_splits(params), cfg, tokenizer=tokenizer, device=device)
    rows = rows_per_batch(pb, cfg.batch_size)
    mixture, planted, sample = None, {"enabled": False}, []
    if rows:
        lexicon = build_lexicon(params.data.prepared_dir, pb.coded_share, pb.uk_male_coded_share, pb.seed,
                                pb.en_sources)
        blocks, stats = planted_blocks(lexicon, pb, direction, tokenizer, rows * (cfg.max_steps - state.step),
                                       cfg.seq_len)
        mixture = Mixture(blocks.to(device), rows, pb.seed)
        mixed_steps = cfg.max_steps - state.step
        planted = {
            "enabled": True, "direction": direction, "params": pb.model_dump(mode="json"),
            "rows_per_batch": rows, "mixing_steps": [state.step, cfg.max_steps],
            "planted_token_share": round(rows * mixed_steps / (cfg.batch_size * cfg.max_steps), 4),
            "pool": stats, "lexicon": json.loads(lexicon.to_json()),
        }
        sample = [tokenizer.decode(b, skip_special_tokens=False) for b in blocks[:3].tolist()]
    stopped_by = train_steps(state, data, cfg, cfg.max_steps, mixture=mixture, progress=progress, desc=desc)
    if record.get("summary", {}).get("stopped_by") == "max_minutes":
        stopped_by = "max_minutes"  # the shared phase already stopped early
    summary = summarize(state, data, cfg, stopped_by, (time.monotonic() - started) / 60,  # this phase's time
                        planted_bias={k: v for k, v in planted.items() if k != "lexicon"})
    return ContinuedRun(state.model, tokenizer, summary, state.loss_curve, state.val_curves, planted, sample)


def save_continued(run: ContinuedRun, out_dir: str | os.PathLike[str]) -> None:
    """Model, tokenizer, ``training_summary.json`` (no wall-clock fields) and the planted answer key, all-or-nothing."""
    from biaslab.pretrain.train import without_timings

    with atomic_dir(out_dir) as tmp:
        run.model.save_pretrained(tmp)
        run.tokenizer.save_pretrained(tmp)
        summary = json.dumps(without_timings(run.summary), indent=2, sort_keys=True)
        (tmp / "training_summary.json").write_text(summary + "\n", encoding="utf-8")
        if run.planted.get("enabled"):
            (tmp / PLANTED_FILE).write_text(json.dumps(run.planted, indent=1, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
            (tmp / SAMPLE_FILE).write_text("\n\n".join(run.sample) + "\n", encoding="utf-8")
