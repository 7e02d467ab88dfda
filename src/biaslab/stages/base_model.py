"""DVC stage ``base_model``: snapshot ``model.source`` into ``models/base``, or train the offline default model.

    python -m biaslab.stages.base_model --params params.yaml

Outputs ``models/base/`` (safetensors + tokenizer + training_summary.json or snapshot.json) and
``runs/base_model.json``; logs one MLflow run (see docs/base_model.md) with the corpora's train/validation
documents and the planted text as its dataset inputs; writes the training curves to
``reports/curves/base_model/`` (``dvc plots show``).
"""

from __future__ import annotations

import argparse
import json
import sys

from biaslab import tracking
from biaslab.atomic import remove_outputs
from biaslab.config import load_params
from biaslab.outputs import curves, paths, run_file
from biaslab.pretrain.datasets import pretraining
from biaslab.pretrain.stage import RUN_JSON, run_base_model
from biaslab.stages.entry import run_stage, stage_parser


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser(__doc__)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (CI logs)")
    args = parser.parse_args(argv)
    return run_stage("base_model", lambda: run(args))


def run(args: argparse.Namespace) -> None:
    params = load_params(args.params)
    remove_outputs(paths.curves_dir("base_model"))
    summary = run_base_model(params, progress=not args.no_progress)
    run_id = run_file.read(RUN_JSON)["run_id"]
    tracking.log_datasets(pretraining(params, params.model.output_dir), run_id=run_id)
    curves.write(paths.curves_dir("base_model"), tracking.metric_history(run_id, curves.PRETRAINING))
    keys = ("steps", "stopped_by", "minutes", "val_ppl", "unigram_ppl", "source")
    print(json.dumps({k: summary[k] for k in keys if k in summary}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
