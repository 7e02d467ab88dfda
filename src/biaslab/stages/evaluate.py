"""Stage `evaluate@<variant>`: every enabled benchmark on one variant, logged to MLflow.

    python -m biaslab.stages.evaluate --variant base

(Not named evaluate.py: a script directory comes first on sys.path and would shadow the HF `evaluate` package.)
"""

import argparse
import sys
from pathlib import Path

from biaslab.config import load_params
from biaslab.evaluation import evaluate_variant
from biaslab.stages.entry import run_stage


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", required=True, help="a variant name from params.yaml `variants`")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    return run_stage(f"evaluate@{args.variant}", lambda: run(args))


def run(args: argparse.Namespace) -> None:
    metrics = evaluate_variant(load_params(args.params), args.variant, Path("."))
    print(f"evaluate@{args.variant}: {len(metrics)} metrics -> metrics/{args.variant}.json")


if __name__ == "__main__":
    sys.exit(main())
