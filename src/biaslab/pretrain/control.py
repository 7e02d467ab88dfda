"""The ``control_model`` stage: the planted bias's counterbalanced control model.

It continues the base model's shared checkpoint (``planted_bias.checkpoint_dir``) with the planted
sentences' genders counterbalanced (``direction: balanced``) into ``calibrate.control_dir``: the same
corpus rows, the same frames and the same steps as the default model; only the gender of the planted
sentences differs (:mod:`biaslab.pretrain.phases`). The ``calibrate`` stage compares the two.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from biaslab import tracking
from biaslab.atomic import atomic_dir, remove_outputs
from biaslab.config import Params
from biaslab.outputs import paths, run_file

CONTROL_RUN = paths.run_file("control_model")
SKIPPED_FILE = "SKIPPED.txt"  # in the control directory when there is no planted bias to control for


def run_control_model(params: Params, root: str | os.PathLike[str] = ".", *, progress: bool = True) -> dict[str, Any]:
    """Train the counterbalanced control from the shared checkpoint; returns its training summary."""
    import torch

    from biaslab.outputs.variant_dir import fingerprint_dir
    from biaslab.pretrain.phases import continue_training, save_continued
    from biaslab.pretrain.stage import default_threads, log_training

    from biaslab.calibrate_stage import no_planted_bias

    root = Path(root)
    out_dir = root / params.calibrate.control_dir
    remove_outputs(root / CONTROL_RUN)
    reason = no_planted_bias(params)
    if reason:  # nothing to control for: the stage's outputs say why, so dvc repro completes
        with atomic_dir(out_dir) as tmp:
            (tmp / SKIPPED_FILE).write_text(reason + "\n", encoding="utf-8")
        run_file.write(root / CONTROL_RUN, skipped=reason)
        return {"skipped": reason}
    torch.set_num_threads(default_threads(params.scoring.num_threads))
    tracking.configure(params.tracking, root=root)
    with tracking.stage_run("control_model", variant="control") as run:
        result = continue_training(params, root / params.model.pretrain.planted_bias.checkpoint_dir, "balanced",
                                   progress=progress, desc="control_model")
        if params.model.dtype != "auto":
            result.model.to(getattr(torch, params.model.dtype))
        save_continued(result, out_dir)
        log_training(result)
        tracking.log_dict(result.summary, "control_model_summary.json")
        run_file.write(root / CONTROL_RUN, run_id=run.info.run_id, model_dir=params.calibrate.control_dir,
                       fingerprint=fingerprint_dir(out_dir))
    return result.summary
