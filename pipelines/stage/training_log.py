"""The MLflow record of a pretraining run, shared by the ``base_model`` and ``control_model`` stages."""

from __future__ import annotations

from typing import Any

from biaslab.tracking import runs as tracking


def pretraining_curves(result: Any) -> dict[str, list[tuple[int, float]]]:
    """``{metric: [(step, value), ...]}``: the loss per step and the validation perplexity per language.

    The same points go to MLflow (:func:`log_training`) and to the stage's ``dvc plots`` folder
    (:func:`biaslab.outputs.curves.write`), so both read from the training result in memory.
    """
    curves = {"train/loss": list(result.loss_curve)}
    curves.update({f"val/ppl_{lang}": list(curve) for lang, curve in result.val_curves.items()})
    return curves


def log_training(result: Any, stage: str) -> None:
    """Loss and validation curves, unigram baselines, bits per character and the curves figure
    (``plots/<stage>_curves.png``)."""
    from biaslab.pretrain.build import loss_figure

    for name, points in pretraining_curves(result).items():
        tracking.log_series(name, points)
    for lang, ppl in result.summary["unigram_ppl"].items():
        tracking.log_metric(f"val/unigram_ppl_{lang}", ppl)
    for lang, bpc in result.summary["val_bits_per_char"].items():
        tracking.log_metric(f"val/bits_per_char_{lang}", bpc)
    tracking.log_figure(loss_figure(result), f"plots/{stage}_curves.png")
