"""DVC stage ``control_model``: the planted bias's counterbalanced control -> ``calibrate.control_dir``.

    python -m biaslab.stages.control_model --params params.yaml

Continues the base model's shared checkpoint (``model.pretrain.planted_bias.checkpoint_dir``) with the
planted sentences' genders counterbalanced; see ``biaslab.calibrate_stage`` and docs/planted_bias.md.
Its MLflow run logs the corpora's train/validation documents and the counterbalanced planted text as inputs;
the training curves go to ``reports/curves/control_model/`` (``dvc plots show``).
"""

from __future__ import annotations

import argparse
import json
import sys

from biaslab import tracking
from biaslab.atomic import remove_outputs
from biaslab.config import load_params
from biaslab.outputs import curves, paths, run_file
from biaslab.stages.entry import run_stage, stage_parser


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser(__doc__)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (CI logs)")
    args = parser.parse_args(argv)
    return run_stage("control_model", lambda: run(args))


def run(args: argparse.Namespace) -> None:
    from biaslab.pretrain.control import CONTROL_RUN, run_control_model
    from biaslab.pretrain.datasets import pretraining

    params = load_params(args.params)
    remove_outputs(paths.curves_dir("control_model"))
    summary = run_control_model(params, progress=not args.no_progress)
    run_id = run_file.read(CONTROL_RUN).get("run_id")
    if run_id:  # none when there is no planted bias to control for (the stage only wrote why)
        tracking.log_datasets(pretraining(params, params.calibrate.control_dir), run_id=run_id)
    curves.write(paths.curves_dir("control_model"),
                 tracking.metric_history(run_id, curves.PRETRAINING) if run_id else {})
    print(json.dumps({k: summary[k] for k in ("steps", "stopped_by", "minutes", "val_ppl") if k in summary}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
