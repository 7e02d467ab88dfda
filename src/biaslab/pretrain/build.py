"""The base model: snapshot the configured hub model, or train the offline default one.

:func:`build_base_model` writes ``<model.output_dir>/`` (safetensors model + tokenizer, plus
``training_summary.json`` or ``snapshot.json``) and returns the summary and, for a trained model, the
training result whose curves the ``base_model`` stage (:mod:`pipelines.base_model`) logs to its MLflow
run. With a planted bias it trains in two phases (:mod:`biaslab.pretrain.phases`): the shared checkpoint the
control model continues, then the planted text.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biaslab.atomic import atomic_dir
from biaslab.config import Params


@dataclass
class BuiltModel:
    """What :func:`build_base_model` made: the summary to log, and the training result (None for a snapshot)."""

    summary: dict[str, Any]
    training: Any | None


def default_threads(num_threads: int | None) -> int:
    """``scoring.num_threads`` when set, else the physical core count (hyper-threads slow matmuls down)."""
    if num_threads:
        return num_threads
    cores, physical_id = set(), "0"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "physical id":
                    physical_id = value.strip()
                elif key.strip() == "core id":
                    cores.add((physical_id, value.strip()))
    except OSError:
        pass
    return len(cores) or os.cpu_count() or 1


def build_base_model(params: Params, out_dir: Path, root: Path = Path("."), *, progress: bool = True) -> BuiltModel:
    """Snapshot ``model.source`` or train the default model into ``out_dir``; returns what to log."""
    if params.model.source or not params.model.pretrain.planted_bias.enabled:
        _no_shared_checkpoint(params, root)
    if params.model.source:
        from biaslab.pretrain.snapshot import snapshot_model

        return BuiltModel(snapshot_model(params.model, out_dir), None)
    result = _train(params, out_dir, progress, root)
    return BuiltModel(result.summary, result)


def _no_shared_checkpoint(params: Params, root: Path) -> None:
    """The shared-phase folder (a DVC output) holding only why it is empty: no planted bias, no control."""
    from biaslab.pretrain.control_variant import no_planted_bias
    from biaslab.pretrain.control import SKIPPED_FILE

    with atomic_dir(root / params.model.pretrain.planted_bias.checkpoint_dir) as tmp:
        (tmp / SKIPPED_FILE).write_text(f"{no_planted_bias(params)}\n", encoding="utf-8")


def _train(params: Params, out_dir: Path, progress: bool, root: Path = Path(".")) -> Any:
    cfg = params.model.pretrain
    if cfg.planted_bias.enabled:  # two phases: the shared checkpoint (the control reuses it), then planted text
        from biaslab.pretrain.phases import continue_training, save_continued, train_shared

        checkpoint = root / cfg.planted_bias.checkpoint_dir
        shared = train_shared(params, checkpoint, progress=progress)
        result = continue_training(params, checkpoint, cfg.planted_bias.direction, progress=progress)
        for key in ("minutes", "train_minutes"):  # both phases ran here (the checkpoint keeps no times)
            result.summary[key] = round(result.summary[key] + shared[key], 3)
        save = save_continued
    else:
        from biaslab.data import sources
        from biaslab.data.corpus import load_corpus
        from biaslab.pretrain.train import train_base_model

        # the mirror's corpora, else rebuilt from their pinned GitHub sources into the download cache
        corpus_dir = cfg.corpus_dir or sources.corpus_dir(params.data, cfg.languages)
        splits = load_corpus(
            corpus_dir, cfg.languages, cfg.chars_per_language, cfg.validation_documents, cfg.validation_chars, cfg.seed
        )
        result = train_base_model(splits, cfg, progress=progress)
        save = save_trained
    if params.model.dtype != "auto":  # trained in float32; stored as asked (the summary is the float32 model's)
        import torch

        result.model.to(getattr(torch, params.model.dtype))
    save(result, out_dir)
    return result


def save_trained(result: Any, out_dir: str | os.PathLike[str]) -> None:
    """Model (safetensors), tokenizer and ``training_summary.json`` (no wall-clock fields), all-or-nothing."""
    from biaslab.pretrain.train import without_timings

    with atomic_dir(out_dir) as tmp:
        result.model.save_pretrained(tmp)
        result.tokenizer.save_pretrained(tmp)
        (tmp / "training_summary.json").write_text(
            json.dumps(without_timings(result.summary), indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )


def loss_figure(result: Any):
    """Training loss (left) and validation perplexity per language (right, log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_ppl) = plt.subplots(1, 2, figsize=(10, 4))
    steps, losses = zip(*result.loss_curve) if result.loss_curve else ((), ())
    ax_loss.plot(steps, losses, lw=0.8)
    ax_loss.set(xlabel="step", ylabel="training loss (nats/token)", title="training loss")
    for lang, curve in result.val_curves.items():
        ax_ppl.plot(*zip(*curve), marker="o", label=f"{lang} (unigram {result.summary['unigram_ppl'][lang]:.0f})")
    ax_ppl.set(xlabel="step", ylabel="perplexity", yscale="log", title="validation perplexity")
    ax_ppl.legend()
    fig.tight_layout()
    plt.close(fig)
    return fig
