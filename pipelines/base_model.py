"""DVC stage ``base_model``: snapshot ``model.source`` into ``models/base``, or train the offline default model.

    python -m pipelines.base_model --params params.yaml

Outputs ``models/base/`` (safetensors + tokenizer + training_summary.json or snapshot.json, built by
:mod:`biaslab.pretrain.build`) and ``runs/base_model.json`` (MLflow run id, model URI, model fingerprint),
which downstream stages read because a stage DVC skips creates no MLflow run; logs one MLflow run with the
model params, the training curves, the summary and the corpora's train/validation documents and the planted
text as its dataset inputs (see docs/base_model.md); writes the training curves to
``reports/curves/base_model/`` (``dvc plots show``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from biaslab.tracking import runs as tracking
from biaslab.atomic import remove_outputs
from biaslab.config import Params, load_params
from biaslab.outputs import curves, paths, run_file
from pipelines.stage.entry import NO_PROGRESS, stage_main

RUN_JSON = paths.run_file("base_model")


def main(argv: list[str] | None = None) -> int:
    return stage_main("base_model", __doc__, run, argv, NO_PROGRESS)


def run(args: argparse.Namespace) -> None:
    summary = run_base_model(load_params(args.params), progress=not args.no_progress)
    keys = ("steps", "stopped_by", "minutes", "val_ppl", "unigram_ppl", "source")
    print(json.dumps({k: summary[k] for k in keys if k in summary}, indent=2))


def run_base_model(params: Params, root: str | os.PathLike[str] = ".", *, progress: bool = True) -> dict[str, Any]:
    """Run the stage from project ``root``; returns the summary that was logged."""
    import torch

    from biaslab.outputs.variant_dir import fingerprint_dir
    from biaslab.pretrain.build import build_base_model, default_threads
    from biaslab.tracking.datasets import pretraining
    from pipelines.stage.training_log import log_training, pretraining_curves

    root = Path(root)
    out_dir, run_json, curves_dir = root / params.model.output_dir, root / RUN_JSON, root / paths.curves_dir("base_model")
    remove_outputs(run_json, curves_dir)
    torch.set_num_threads(default_threads(params.scoring.num_threads))
    tracking.configure(params.tracking, root=root)
    with tracking.stage_run("base_model", variant="base") as mlflow_run:
        tracking.log_params(params.model.model_dump(mode="json"), prefix="model")
        built = build_base_model(params, out_dir, root, progress=progress)
        if built.training is not None:
            log_training(built.training, "base_model")
        summary = built.summary
        fingerprint = fingerprint_dir(out_dir)
        tracking.set_tags({"model_fingerprint": fingerprint, "model_source": params.model.source or "pretrained-here",
                           "model_commit": summary.get("resolved_commit") or "none"})
        tracking.log_dict(summary, "base_model_summary.json")
        tracking.log_datasets(pretraining(params, out_dir))
        curves.write(curves_dir, pretraining_curves(built.training) if built.training is not None else {})
        run_file.write(
            run_json, run_id=mlflow_run.info.run_id, model_uri=str(params.model.output_dir), fingerprint=fingerprint,
            source=params.model.source or "trained",
        )
    return summary


if __name__ == "__main__":
    sys.exit(main())
