"""Stage `evaluate@<variant>`: every enabled benchmark on one variant, logged to MLflow.

    python -m biaslab.stages.evaluate --variant base

(Not named evaluate.py: a script directory comes first on sys.path and would shadow the HF `evaluate` package.)
"""

import argparse
import sys
from pathlib import Path

from biaslab import tracking
from biaslab.atomic import remove_outputs
from biaslab.config import Params, load_params
from biaslab.metrics.values import MetricValue
from biaslab.stages.entry import VARIANT, stage_main


def main(argv: list[str] | None = None) -> int:
    return stage_main("evaluate@{variant}", __doc__, run, argv, VARIANT)


def run(args: argparse.Namespace) -> None:
    metrics = evaluate_variant(load_params(args.params), args.variant, Path("."))
    print(f"evaluate@{args.variant}: {len(metrics)} metrics -> metrics/{args.variant}.json")


def evaluate_variant(params: Params, variant_name: str, root: Path = Path(".")) -> dict[str, MetricValue]:
    """Evaluate one variant (:mod:`biaslab.evaluation`) in its own MLflow run ``evaluate@<variant>``.

    The run gets the model's tags, the evaluation params, the prepared files as dataset inputs, a logged
    model for the variant (:func:`biaslab.tracking.variant_model`: the metric values are its metrics), every
    metric (with CI bounds and direction/ideal tags), per-benchmark timings, the per-item predictions,
    the tables and the summary; then the outputs are written with the run's id. The calibrate stage
    evaluates its control model through this function too.
    """
    from biaslab import evaluation

    outputs = evaluation.EvaluationOutputs.for_variant(variant_name, root)
    remove_outputs(outputs.metrics, outputs.values, outputs.run_file)  # a failed run must not leave an old file looking new
    tracking.configure(params.tracking, root)
    under_test = evaluation.load_variant(params, variant_name, root)
    with tracking.stage_run("evaluate", variant=variant_name, tags=under_test.tags) as run:
        run_params = evaluation.run_params(params, under_test)
        tracking.log_params(run_params)
        # the variant as an MLflow 3 logged model: the Models tab lists it with the metric values logged below
        model_id = tracking.variant_model(variant_name, tags=under_test.tags, params={"variant": run_params["variant"]})
        tracking.log_datasets(evaluation.evaluation_datasets(params.evaluation.benchmarks,
                                                             root / params.data.prepared_dir))
        result = evaluation.run_benchmarks(params, under_test, root)
        tracking.log_metric_values(result.metrics, model_id=model_id)
        for name, seconds in result.timings.items():
            tracking.log_metric(f"timing/{name}_seconds", seconds)
        for name, frame in result.predictions.items():
            tracking.log_table(frame.reset_index(drop=True), f"predictions/{name}.json")
        for name, frame in result.tables.items():
            tracking.log_text(frame.to_csv(), f"tables/{name}.csv")
        tracking.log_text(result.summary, "summary.md")
        evaluation.write_outputs(outputs, under_test, result, run.info.run_id, root)
    return result.metrics


if __name__ == "__main__":
    sys.exit(main())
