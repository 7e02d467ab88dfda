"""DVC stage ``control_model``: the planted bias's counterbalanced control -> ``calibrate.control_dir``.

    python -m pipelines.control_model --params params.yaml

Continues the base model's shared checkpoint (``model.pretrain.planted_bias.checkpoint_dir``) with the
planted sentences' genders counterbalanced (:mod:`biaslab.pretrain.control`); see ``pipelines.calibrate``
and docs/planted_bias.md. Its MLflow run logs the corpora's train/validation documents and the
counterbalanced planted text as inputs; the training curves go to ``reports/curves/control_model/``
(``dvc plots show``). Without a planted bias the control directory and ``runs/control_model.json`` say
why (and the curves folder is empty), and the stage succeeds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from biaslab.atomic import remove_outputs
from biaslab.config import Params, load_params
from biaslab.outputs import curves, paths, run_file
from pipelines.stage.entry import NO_PROGRESS, stage_main

CONTROL_RUN = paths.run_file("control_model")


def main(argv: list[str] | None = None) -> int:
    return stage_main("control_model", __doc__, run, argv, NO_PROGRESS)


def run(args: argparse.Namespace) -> None:
    summary = run_control_model(load_params(args.params), progress=not args.no_progress)
    print(json.dumps({k: summary[k] for k in ("steps", "stopped_by", "minutes", "val_ppl") if k in summary}, indent=2))


def run_control_model(params: Params, root: str | os.PathLike[str] = ".", *, progress: bool = True) -> dict[str, Any]:
    """Train the counterbalanced control from the shared checkpoint in one MLflow run; returns its summary."""
    import torch

    from biaslab.tracking import runs as tracking
    from biaslab.pretrain.control_variant import no_planted_bias
    from biaslab.outputs.variant_dir import fingerprint_dir
    from biaslab.pretrain.build import default_threads
    from biaslab.pretrain.control import train_control, write_skipped
    from biaslab.tracking.datasets import pretraining
    from pipelines.stage.training_log import log_training, pretraining_curves

    root = Path(root)
    out_dir, curves_dir = root / params.calibrate.control_dir, root / paths.curves_dir("control_model")
    remove_outputs(root / CONTROL_RUN, curves_dir)
    reason = no_planted_bias(params)
    if reason:  # nothing to control for: the stage's outputs say why, so dvc repro completes
        write_skipped(out_dir, reason)
        curves.write(curves_dir, {})
        run_file.write(root / CONTROL_RUN, skipped=reason)
        return {"skipped": reason}
    torch.set_num_threads(default_threads(params.scoring.num_threads))
    tracking.configure(params.tracking, root=root)
    with tracking.stage_run("control_model", variant="control") as mlflow_run:
        result = train_control(params, root, out_dir, progress=progress)
        log_training(result, "control_model")
        tracking.log_dict(result.summary, "control_model_summary.json")
        tracking.log_datasets(pretraining(params, out_dir))
        curves.write(curves_dir, pretraining_curves(result))
        run_file.write(root / CONTROL_RUN, run_id=mlflow_run.info.run_id, model_dir=params.calibrate.control_dir,
                       fingerprint=fingerprint_dir(out_dir))
    return result.summary


if __name__ == "__main__":
    sys.exit(main())
