"""The ``base_model`` stage: snapshot the configured model, or train the offline default, and track it.

Outputs: ``<model.output_dir>/`` (safetensors model + tokenizer, plus ``training_summary.json`` or
``snapshot.json``) and ``runs/base_model.json`` (MLflow run id, model URI, model fingerprint), which
downstream stages read because a stage DVC skips creates no MLflow run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from biaslab import tracking
from biaslab.atomic import atomic_dir, remove_outputs
from biaslab.config import Params
from biaslab.outputs import paths, run_file

RUN_JSON = paths.run_file("base_model")


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


def run_base_model(params: Params, root: str | os.PathLike[str] = ".", *, progress: bool = True) -> dict[str, Any]:
    """Run the stage from project ``root``; returns the summary that was logged."""
    import torch

    root = Path(root)
    out_dir, run_json = root / params.model.output_dir, root / RUN_JSON
    remove_outputs(run_json)
    torch.set_num_threads(default_threads(params.scoring.num_threads))
    tracking.configure(params.tracking, root=root)
    with tracking.stage_run("base_model", variant="base") as run:
        tracking.log_params(params.model.model_dump(mode="json"), prefix="model")
        if params.model.source or not params.model.pretrain.planted_bias.enabled:
            _no_shared_checkpoint(params, root)
        if params.model.source:
            from biaslab.pretrain.snapshot import snapshot_model

            summary = snapshot_model(params.model, out_dir)
        else:
            summary = _train(params, out_dir, progress, root)
        fingerprint = _fingerprint(out_dir)
        tracking.set_tags({"model_fingerprint": fingerprint, "model_source": params.model.source or "pretrained-here",
                           "model_commit": summary.get("resolved_commit") or "none"})
        tracking.log_dict(summary, "base_model_summary.json")
        run_file.write(
            run_json, run_id=run.info.run_id, model_uri=str(params.model.output_dir), fingerprint=fingerprint,
            source=params.model.source or "trained",
        )
    return summary


def _no_shared_checkpoint(params: Params, root: Path) -> None:
    """The shared-phase folder (a DVC output) holding only why it is empty: no planted bias, no control."""
    from biaslab.calibrate_stage import no_planted_bias
    from biaslab.pretrain.control import SKIPPED_FILE

    with atomic_dir(root / params.model.pretrain.planted_bias.checkpoint_dir) as tmp:
        (tmp / SKIPPED_FILE).write_text(f"{no_planted_bias(params)}\n", encoding="utf-8")


def _fingerprint(out_dir: Path) -> str:
    from biaslab.outputs.variant_dir import fingerprint_dir

    return fingerprint_dir(out_dir)


def _train(params: Params, out_dir: Path, progress: bool, root: Path = Path(".")) -> dict[str, Any]:
    cfg = params.model.pretrain
    if cfg.planted_bias.enabled:  # two phases: the shared checkpoint (the control reuses it), then planted text
        from biaslab.pretrain.phases import continue_training, save_continued, train_shared

        checkpoint = root / cfg.planted_bias.checkpoint_dir
        train_shared(params, checkpoint, progress=progress)
        result = continue_training(params, checkpoint, cfg.planted_bias.direction, progress=progress)
        save = save_continued
    else:
        from biaslab.data import sources
        from biaslab.pretrain.corpus import load_corpus
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
    log_training(result)
    return result.summary


def log_training(result: Any) -> None:
    """Loss and validation curves, unigram baselines, bits per character and the curves figure (MLflow)."""
    tracking.log_series("train/loss", result.loss_curve)
    for lang, curve in result.val_curves.items():
        tracking.log_series(f"val/ppl_{lang}", curve)
    for lang, ppl in result.summary["unigram_ppl"].items():
        tracking.log_metric(f"val/unigram_ppl_{lang}", ppl)
    for lang, bpc in result.summary["val_bits_per_char"].items():
        tracking.log_metric(f"val/bits_per_char_{lang}", bpc)
    tracking.log_figure(loss_figure(result), "plots/base_model_curves.png")


def save_trained(result: Any, out_dir: str | os.PathLike[str]) -> None:
    """Model (safetensors), tokenizer and ``training_summary.json``, all-or-nothing."""
    with atomic_dir(out_dir) as tmp:
        result.model.save_pretrained(tmp)
        result.tokenizer.save_pretrained(tmp)
        (tmp / "training_summary.json").write_text(
            json.dumps(result.summary, indent=2, sort_keys=True) + "\n", encoding="utf-8"
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
