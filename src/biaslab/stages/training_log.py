"""The MLflow record of a pretraining run, shared by the ``base_model`` and ``control_model`` stages."""

from __future__ import annotations

from typing import Any

from biaslab import tracking


def log_training(result: Any) -> None:
    """Loss and validation curves, unigram baselines, bits per character and the curves figure."""
    from biaslab.pretrain.build import loss_figure

    tracking.log_series("train/loss", result.loss_curve)
    for lang, curve in result.val_curves.items():
        tracking.log_series(f"val/ppl_{lang}", curve)
    for lang, ppl in result.summary["unigram_ppl"].items():
        tracking.log_metric(f"val/unigram_ppl_{lang}", ppl)
    for lang, bpc in result.summary["val_bits_per_char"].items():
        tracking.log_metric(f"val/bits_per_char_{lang}", bpc)
    tracking.log_figure(loss_figure(result), "plots/base_model_curves.png")
