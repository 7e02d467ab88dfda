"""DVC stage ``control_model``: the planted bias's counterbalanced control -> ``calibrate.control_dir``.

    python -m biaslab.stages.control_model --params params.yaml

Continues the base model's shared checkpoint (``model.pretrain.planted_bias.checkpoint_dir``) with the
planted sentences' genders counterbalanced; see ``biaslab.calibrate_stage`` and docs/planted_bias.md.
"""

from __future__ import annotations

import argparse
import json
import sys

from biaslab.config import load_params
from biaslab.stages.entry import run_stage, stage_parser


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser(__doc__)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (CI logs)")
    args = parser.parse_args(argv)
    return run_stage("control_model", lambda: run(args))


def run(args: argparse.Namespace) -> None:
    from biaslab.pretrain.control import run_control_model

    summary = run_control_model(load_params(args.params), progress=not args.no_progress)
    print(json.dumps({k: summary[k] for k in ("steps", "stopped_by", "minutes", "val_ppl") if k in summary}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
