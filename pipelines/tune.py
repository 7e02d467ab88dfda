"""Stages `tune` and `tune_variant`: Optuna multi-objective search over LoRA hyper-parameters -> best_params.json.

    python -m pipelines.tune                  # the DVC stage; resumes the study (tune.storage) if it exists
    python -m pipelines.tune --no-track       # an extra worker on the same study (another shell/machine)
    python -m pipelines.tune --variant lora_clp   # stage tune_variant: a variant's own study (tune_overrides)

`tune` searches with the `lora` section (the study of variants lora and lora_cda) and writes
models/tune/best_params.json; `tune_variant@<v>` searches with the variant's LoRA settings (`params.lora_for`,
e.g. logit pairing) and its `tune_overrides` (`params.tune_for`: search space, trials, own output_dir).
Trials train on GBEM-UA's train professions and are scored on the select professions; the test split is
neither a dependency (dvc.yaml) nor readable (biaslab.data.splits refuses it).

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
from biaslab.config import ConfigError, LoraConfig, Params, TuneConfig, load_params
from biaslab.mitigation.applicability import lora_skip_reason
from biaslab.outputs import paths, run_file
from biaslab.tracking.datasets import lora_training
from pipelines.stage import profile
from pipelines.stage.entry import option, stage_main
from pipelines.stage.inputs import base_model_dir, mitigation_frame



def main(argv: list[str] | None = None) -> int:
    return stage_main("tune", __doc__, run, argv,
                      option("--no-track", action="store_true", help="worker mode: no MLflow runs, no runs/tune.json"),
                      option("--variant", default=None, help="a lora variant with tune_overrides: its own study "
                                                             "(default: the tune section's study)"))


def study_settings(params: Params, variant: str | None) -> tuple[TuneConfig, LoraConfig, Path]:
    """(tune settings, fixed LoRA settings, run file) of the study ``variant`` names (None: the tune section's)."""
    if variant is None:
        return params.shared_study(), params.lora, paths.run_file("tune")
    if params.variant(variant).method != "lora" or not params.variant(variant).tune_overrides:
        raise ConfigError(f"tune --variant {variant}: not a lora variant with tune_overrides in params.yaml; "
                          "variants without them use the tune section's study (python -m pipelines.tune)")
    return params.tune_for(variant), params.lora_for(variant), paths.run_file("tune", variant)


def run(args: argparse.Namespace) -> None:
    from biaslab.evaluation.suite import set_threads
    from biaslab.mitigation.lora.tune import ACCURACY, GAP, tune
    from biaslab.outputs.variant_dir import fingerprint_dir

    params = load_params(args.params)
    cfg, lora, run_json = study_settings(params, args.variant)
    out = Path(cfg.output_dir)
    if not args.no_track:
        remove_outputs(run_json, out / "best_params.json", out / "pareto_front.png")
    disabled = (profile.shared_study_reason(params) if args.variant is None
                else params.disabled_reason(args.variant))
    if disabled is not None:  # no variant of the profile trains from this study (docs/profiles.md)
        if not args.no_track:
            stage = "tune" if args.variant is None else f"tune_variant@{args.variant}"
            profile.disable_study(params, cfg.output_dir, run_json, stage, disabled)
        else:
            profile.announce("tune", disabled)
        return
    reason = lora_skip_reason(base_model_dir(params), params.model.kind,
                              trust_remote_code=params.model.trust_remote_code)
    if reason is not None:
        skip(params, args, reason, cfg, run_json)
        return
    frame = mitigation_frame(params)  # GBEM-UA's train and select professions; a test item is refused
    gbem = params.evaluation.benchmarks.get("gbem_ua")
    options = dict(gbem.options) if gbem is not None else {}
    set_threads(params.scoring.num_threads)
    base = str(base_model_dir(params))
    formatting = {"add_bos": params.scoring.add_bos, "prompt_format": params.evaluation.prompt_format}
    if args.no_track:
        result = tune(base, frame, cfg, lora, options=options, **formatting)
    else:
        tracking.configure(params.tracking)
        with tracking.stage_run("tune", variant=args.variant,
                                tags={"base_fingerprint": fingerprint_dir(base)}) as mlflow_run:
            tracking.log_params({"tune": cfg.model_dump(mode="json"), "lora": lora.model_dump()})
            tracking.log_datasets(lora_training(params, lora))
            result = tune(base, frame, cfg, lora, options=options, log=tracking, **formatting)
            tracking.log_artifact(result.pareto_path, "tune")  # tune/pareto_front.png, the file DVC tracks
            tracking.log_dict(result.payload, "tune/best_params.json")
            tracking.log_metric(f"best/{ACCURACY}", result.values[ACCURACY])
            tracking.log_metric(f"best/{GAP}", result.values[GAP])
            for name, value in (result.payload["baseline"] or {}).items():  # the base model: the accuracy floor's reference
                tracking.log_metric(f"baseline/{name}", value)
            tracking.set_tags({"optuna_study": result.study_name, "best_trial": result.best_trial})
            run_file.write(run_json, run_id=mlflow_run.info.run_id, study_name=result.study_name,
                                    best_trial=result.best_trial, best_params=result.best_params,
                                    values=result.values, n_complete=result.n_complete,
                                    best_params_path=str(result.best_params_path))
    print(f"tune: study {result.study_name}: {result.n_complete} trials complete ({len(result.ran_here)} here); "
          f"best trial {result.best_trial} {result.values} by rule: {result.payload['rule']} "
          f"(base model: {result.payload['baseline']}) -> {result.best_params_path}")


def skip(params: Params, args: argparse.Namespace, reason: str, cfg: TuneConfig, run_json: Path) -> None:
    """No study for a model LoRA does not apply to: ``best_params.json`` with no params, the run says why."""
    from biaslab.mitigation.applicability import write_skipped_tune

    if not args.no_track:
        path = write_skipped_tune(cfg.output_dir, reason)
        tracking.configure(params.tracking)
        with tracking.stage_run("tune", variant=args.variant, tags={"skipped": reason}) as mlflow_run:
            run_file.write(run_json, run_id=mlflow_run.info.run_id, skipped=reason, best_params_path=str(path))
    print(f"tune: {reason}")


if __name__ == "__main__":
    sys.exit(main())
