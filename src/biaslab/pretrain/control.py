"""The planted bias's counterbalanced control model (trained by the ``control_model`` stage).

It continues the base model's shared checkpoint (``planted_bias.checkpoint_dir``) with the planted
sentences' genders counterbalanced (``direction: balanced``) into ``calibrate.control_dir``: the same
corpus rows, the same frames and the same steps as the default model; only the gender of the planted
sentences differs (:mod:`biaslab.pretrain.phases`). The ``calibrate`` stage compares the two.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biaslab.atomic import atomic_dir
from biaslab.config import Params

SKIPPED_FILE = "SKIPPED.txt"  # in the control directory when there is no planted bias to control for


def write_skipped(out_dir: Path, reason: str) -> None:
    """The control directory holding only why there is no control (so ``dvc repro`` completes)."""
    with atomic_dir(out_dir) as tmp:
        (tmp / SKIPPED_FILE).write_text(reason + "\n", encoding="utf-8")


def train_control(params: Params, root: Path, out_dir: Path, *, progress: bool = True) -> Any:
    """Train the counterbalanced control from the shared checkpoint and save it to ``out_dir``.

    Returns the training result (summary, loss and validation curves) for the stage to log.
    """
    import torch

    from biaslab.pretrain.phases import continue_training, save_continued

    result = continue_training(params, root / params.model.pretrain.planted_bias.checkpoint_dir, "balanced",
                               progress=progress, desc="control_model")
    if params.model.dtype != "auto":
        result.model.to(getattr(torch, params.model.dtype))
    save_continued(result, out_dir)
    return result
