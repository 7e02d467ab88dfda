"""Stage `tune`: Optuna multi-objective search over LoRA hyper-parameters -> models/tune/best_params.json.

    python -m pipelines.tune                  # the DVC stage; resumes the study (tune.storage) if it exists
    python -m pipelines.tune --no-track       # an extra worker on the same study (another shell/machine)

`tune.n_trials` is the total the study should reach: every worker runs only the missing trials. For
workers on several machines, point `tune.storage` at an RDB URL (e.g. postgresql://...) instead of
the journal file, and MLFLOW_TRACKING_URI at an MLflow server.

When LoRA does not apply to the base model (a masked LM: biaslab.mitigation.applicability), no study runs:
best_params.json, runs/tune.json and the stage's MLflow run (tag `skipped`) say why, and dvc repro goes on.
"""

import argparse
import sys
from pathlib import Path

from biaslab.tracking import runs as tracking
from biaslab.atomic import remove_outputs
from biaslab.config import Params, load_params
from biaslab.mitigation.applicability import lora_skip_reason
from biaslab.outputs import paths, run_file
from biaslab.tracking.datasets import lora_training
from pipelines.stage.entry import option, stage_main
from pipelines.stage.inputs import base_model_dir, prepared_table

RUN_FILE = paths.run_file("tune")


def main(argv: list[str] | None = None) -> int:
    return stage_main("tune", __doc__, run, argv,
                      option("--no-track", action="store_true", help="worker mode: no MLflow runs, no runs/tune.json"))


def run(args: argparse.Namespace) -> None:
    from biaslab.evaluation.suite import set_threads
    from biaslab.mitigation.lora.tune import ACCURACY, GAP, tune
    from biaslab.outputs.variant_dir import fingerprint_dir

    params = load_params(args.params)
    out = Path(params.tune.output_dir)
    if not args.no_track:
        remove_outputs(RUN_FILE, out / "best_params.json", out / "pareto_front.png")
    reason = lora_skip_reason(base_model_dir(params), params.model.kind,
                              trust_remote_code=params.model.trust_remote_code)
    if reason is not None:
        skip(params, args, reason)
        return
    frame = prepared_table(params, "gbem_ua.parquet")
    gbem = params.evaluation.benchmarks.get("gbem_ua")
    options = dict(gbem.options) if gbem is not None else {}
    set_threads(params.scoring.num_threads)
    base = str(base_model_dir(params))
    formatting = {"add_bos": params.scoring.add_bos, "prompt_format": params.evaluation.prompt_format}
    if args.no_track:
        result = tune(base, frame, params.tune, params.lora, options=options, **formatting)
    else:
        tracking.configure(params.tracking)
        with tracking.stage_run("tune", tags={"base_fingerprint": fingerprint_dir(base)}) as mlflow_run:
            tracking.log_params({"tune": params.tune.model_dump(mode="json"), "lora": params.lora.model_dump()})
            tracking.log_datasets(lora_training(params, frame))
            result = tune(base, frame, params.tune, params.lora, options=options, log=tracking, **formatting)
            tracking.log_artifact(result.pareto_path, "tune")  # tune/pareto_front.png, the file DVC tracks
            tracking.log_dict(result.payload, "tune/best_params.json")
            tracking.log_metric(f"best/{ACCURACY}", result.values[ACCURACY])
            tracking.log_metric(f"best/{GAP}", result.values[GAP])
            for name, value in (result.payload["baseline"] or {}).items():  # the base model: the accuracy floor's reference
                tracking.log_metric(f"baseline/{name}", value)
            tracking.set_tags({"optuna_study": result.study_name, "best_trial": result.best_trial})
            run_file.write(RUN_FILE, run_id=mlflow_run.info.run_id, study_name=result.study_name,
                                    best_trial=result.best_trial, best_params=result.best_params,
                                    values=result.values, n_complete=result.n_complete,
                                    best_params_path=str(result.best_params_path))
    print(f"tune: study {result.study_name}: {result.n_complete} trials complete ({len(result.ran_here)} here); "
          f"best trial {result.best_trial} {result.values} by rule: {result.payload['rule']} "
          f"(base model: {result.payload['baseline']}) -> {result.best_params_path}")


def skip(params: Params, args: argparse.Namespace, reason: str) -> None:
    """No study for a model LoRA does not apply to: ``best_params.json`` with no params, the run says why."""
    from biaslab.mitigation.applicability import write_skipped_tune

    if not args.no_track:
        path = write_skipped_tune(params.tune.output_dir, reason)
        tracking.configure(params.tracking)
        with tracking.stage_run("tune", tags={"skipped": reason}) as mlflow_run:
            run_file.write(RUN_FILE, run_id=mlflow_run.info.run_id, skipped=reason, best_params_path=str(path))
    print(f"tune: {reason}")


if __name__ == "__main__":
    sys.exit(main())
