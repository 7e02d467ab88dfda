"""Stage `evaluate@<variant>`: every enabled benchmark on one variant, logged to MLflow.

    python -m pipelines.evaluate --variant base

(Not named evaluate.py: a script directory comes first on sys.path and would shadow the HF `evaluate` package.)
"""

import argparse
import sys
from pathlib import Path

from biaslab.tracking import runs as tracking
from biaslab.atomic import remove_outputs
from biaslab.config import Params, VariantConfig, load_params
from biaslab.reporting.headlines import headline_metrics, variant_markdown
from biaslab.metrics.values import MetricValue
from biaslab.outputs import metrics_file, run_file, variant_dir
from biaslab.tracking.run_description import describe
from pipelines.stage import profile
from pipelines.stage.entry import VARIANT, stage_main


def main(argv: list[str] | None = None) -> int:
    return stage_main("evaluate@{variant}", __doc__, run, argv, VARIANT)


def run(args: argparse.Namespace) -> None:
    params = load_params(args.params)
    disabled = params.disabled_reason(args.variant)
    if disabled is not None:  # the profile leaves it out (docs/profiles.md): outputs saying so, no model, no run
        profile.disable_evaluate(params, args.variant, disabled)
        return
    metrics = evaluate_variant(params, args.variant, Path("."))
    if metrics:
        print(f"evaluate@{args.variant}: {len(metrics)} metrics -> metrics/{args.variant}.json")


def evaluate_variant(params: Params, variant_name: str, root: Path = Path(".")) -> dict[str, MetricValue]:
    """Evaluate one variant (:mod:`biaslab.evaluation.suite`) in its own MLflow run ``evaluate@<variant>``.

    The run gets the model's tags, the evaluation params, the prepared files as dataset inputs, a logged
    model for the variant (:func:`biaslab.tracking.runs.variant_model`: the metric values are its metrics), every
    metric (with CI bounds and direction/ideal tags), per-benchmark timings, the per-item predictions,
    the tables and the summary; then the outputs are written with the run's id. The calibrate stage
    evaluates its control model through this function too. A variant whose directory says its mitigation
    was skipped (``variant.json`` ``skipped``: LoRA on a masked LM) is not loaded: :func:`skip`.
    """
    from biaslab.evaluation import suite as evaluation

    outputs = evaluation.EvaluationOutputs.for_variant(variant_name, root)
    remove_outputs(outputs.metrics, outputs.values, outputs.run_file)  # a failed run must not leave an old file looking new
    tracking.configure(params.tracking, root)
    variant = params.variant(variant_name)
    resolved = variant_dir.resolve(root / variant.model_dir, root)  # read once: the skip reason, then the loader
    reason = variant_dir.variant_skip_reason(variant, root, resolved.manifest)
    if reason is not None:
        return skip(outputs, variant_name, variant, reason, root)
    under_test = evaluation.load_variant(params, variant_name, root, resolved)
    with tracking.stage_run("evaluate", variant=variant_name, tags=under_test.tags) as run:
        run_params = evaluation.run_params(params, under_test)
        tracking.log_params(run_params)
        # the variant as an MLflow 3 logged model: the Models tab lists it with the metric values logged below
        model_id = tracking.variant_model(variant_name, tags=under_test.tags, params={"variant": run_params["variant"]})
        datasets = evaluation.evaluation_datasets(params.evaluation.benchmarks, root / params.data.prepared_dir)
        tracking.log_datasets(datasets)
        result = evaluation.run_benchmarks(params, under_test, root)
        tracking.log_metric_values(result.metrics, model_id=model_id)
        for name, seconds in result.timings.items():
            tracking.log_metric(f"timing/{name}_seconds", seconds)
        for name, frame in result.predictions.items():
            tracking.log_table(frame.reset_index(drop=True), f"predictions/{name}.json")
        for name, frame in result.tables.items():
            tracking.log_text(frame.to_csv(), f"tables/{name}.csv")
        tracking.log_text(result.summary, "summary.md")
        # params no one can change: the model, the data and each evidence artifact's sha256 (the gate checks them)
        tracking.bind_evidence(variant_name, under_test.tags.get("model_fingerprint"), datasets)
        headlines = headline_metrics(params.evaluation.benchmarks)
        describe(variant_markdown(variant_name, result.metrics, headlines), whole="summary.md")
        evaluation.write_outputs(outputs, under_test, result, run.info.run_id, root)
    return result.metrics


def skip(outputs, name: str, variant: VariantConfig, reason: str, root: Path) -> dict[str, MetricValue]:
    """A variant whose mitigation did not apply: no model to load; the outputs and the run carry the reason.

    The same files as an evaluation (empty predictions, a tables folder with the summary, a metrics file with
    no metrics and ``skipped``, the run file), so the DVC stage completes and the report can say why.
    """
    from biaslab.atomic import atomic_dir

    summary = f"# {name}: not evaluated\n\n{reason}\n"
    with tracking.stage_run("evaluate", variant=name, tags={"method": variant.method, "skipped": reason}) as run:
        tracking.log_text(summary, "summary.md")
        with atomic_dir(outputs.predictions):
            pass
        with atomic_dir(outputs.tables) as tmp:
            (tmp / "summary.md").write_text(summary, encoding="utf-8")
        metrics_file.write(root, name, {}, method=variant.method, model_dir=variant.model_dir,
                           run_id=run.info.run_id, skipped=reason)
        run_file.write(outputs.run_file, run_id=run.info.run_id, model_dir=variant.model_dir, variant=name,
                       skipped=reason)
    print(f"evaluate@{name}: {reason}")
    return {}


if __name__ == "__main__":
    sys.exit(main())
