"""DVC stage ``calibrate``: does every benchmark see the planted bias, and does every mitigation remove it?

    python -m biaslab.stages.calibrate --params params.yaml

Evaluates the control model, compares it with the planted default model and every mitigation variant, and
writes ``reports/calibration.md`` / ``reports/calibration.csv`` (see ``biaslab.calibrate_stage``).
"""

from __future__ import annotations

import argparse
import sys

from biaslab.config import load_params
from biaslab.stages.entry import run_stage, stage_parser


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser(__doc__)
    args = parser.parse_args(argv)
    return run_stage("calibrate", lambda: run(args))


def run(args: argparse.Namespace) -> None:
    from biaslab.calibrate_stage import REPORT, run_calibrate

    numbers = run_calibrate(load_params(args.params))
    print(f"calibrate: {numbers.get('calibration/families_detected', 0):.0f} of "
          f"{numbers.get('calibration/families', 0):.0f} benchmark families detect the planted bias -> {REPORT}")


if __name__ == "__main__":
    sys.exit(main())
