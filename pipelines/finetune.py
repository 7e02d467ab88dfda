"""Stage `finetune`: LoRA fine-tune of models/base on gender-neutral GBEM-UA examples -> models/lora.

Also writes the training loss curve to `reports/curves/finetune_<variant>/` (`dvc plots show`).

    python -m pipelines.finetune --variant lora   # resumes from the lora checkpoint_dir after an interruption

Hyper-parameters: params.yaml `lora:` with the variant's `lora_overrides`, overridden by its study's best trial
when `use_tuned` is true: `<tune.output_dir>/best_params.json` (stage tune), or for a variant with
`tune_overrides` its own study's (stage tune_variant: `params.tune_for(variant).output_dir`). Trains on
GBEM-UA's train professions (validation loss on the select ones); never reads the test split.

When LoRA does not apply to the base model (a masked LM: biaslab.mitigation.applicability), nothing trains:
the variant directory holds only variant.json with `skipped` (the reason), and runs/finetune_<variant>.json
and the stage's MLflow run (tag `skipped`) say why; evaluate, register and report carry the reason.
"""

import argparse
import sys
from pathlib import Path

from biaslab.tracking import runs as tracking
from biaslab.atomic import remove_outputs
from biaslab.config import ConfigError, Params, load_params
from biaslab.mitigation.applicability import lora_skip_reason
from biaslab.outputs import curves, paths, run_file
from biaslab.tracking.datasets import lora_training
from pipelines.stage import profile
from pipelines.stage.entry import option, stage_main
from pipelines.stage.inputs import base_model_dir, mitigation_frame


def main(argv: list[str] | None = None) -> int:
    return stage_main("finetune", __doc__, run, argv,
                      option("--variant", default="lora", help="a method: lora variant (its lora_overrides apply)"))


def run(args: argparse.Namespace) -> None:
    from biaslab.evaluation.suite import set_threads
    from biaslab.mitigation.lora.train import finetune, hyperparameters, tuned_overrides, with_overrides
    from biaslab.outputs.variant_dir import fingerprint_dir

    params = load_params(args.params)
    variant_name = args.variant
    variant = params.variant(variant_name)
    if variant.method != "lora":
        raise ConfigError(f"finetune: variant {variant_name!r} has method {variant.method!r}, not lora")
    run_json, curves_dir = paths.run_file("finetune", variant_name), paths.curves_dir("finetune", variant_name)
    remove_outputs(run_json, curves_dir)
    disabled = params.disabled_reason(variant_name)
    if disabled is not None:  # the profile leaves it out (docs/profiles.md): a marked directory, no training
        profile.disable_finetune(params, variant_name, disabled)
        return
    cfg = params.lora_for(variant_name)
    reason = lora_skip_reason(base_model_dir(params), params.model.kind,
                              trust_remote_code=params.model.trust_remote_code)
    if reason is not None:
        skip(params, variant_name, cfg.checkpoint_dir, reason)
        return
    study_dir = Path(params.tune_for(variant_name).output_dir)  # the tune section's study, or the variant's own
    overrides = tuned_overrides(study_dir / "best_params.json") if cfg.use_tuned else {}
    cfg = with_overrides(cfg, overrides)
    frame = mitigation_frame(params)  # GBEM-UA's train and select professions; a test item is refused
    base_model_dir(params)
    set_threads(params.scoring.num_threads)
    tracking.configure(params.tracking)
    tags = {"method": "lora", "base_fingerprint": fingerprint_dir(params.model.output_dir),
            "tuned": bool(overrides)}
    with tracking.stage_run("finetune", variant=variant_name, tags=tags) as mlflow_run:
        tracking.log_params({"lora": hyperparameters(cfg), "tuned_overrides": overrides or "none"})
        tracking.log_datasets(lora_training(params, cfg))
        result = finetune(params.model.output_dir, frame, cfg, variant.model_dir, add_bos=params.scoring.add_bos,
                          prompt_format=params.evaluation.prompt_format, log=tracking)
        for name, value in (("global_step", result.global_step), ("train_examples", result.train_examples),
                            ("train_loss", result.train_loss), ("seconds_per_step", result.seconds_per_step)):
            if value is not None:
                tracking.log_metric(f"finetune/{name}", value)
        tracking.set_tags({"resumed_from": result.resumed_from or "none",
                           **{f"training.{k}": v for k, v in result.training.items()}})  # the resolved precision plan
        tracking.log_artifact(variant.model_dir, "adapter")
        curves.write(curves_dir, tracking.metric_history(mlflow_run.info.run_id, curves.LORA))
        run_file.write(run_json, run_id=mlflow_run.info.run_id, model_dir=variant.model_dir,
                       fingerprint=fingerprint_dir(variant.model_dir), variant=variant_name,
                                hyperparameters=result.hyperparameters, global_step=result.global_step,
                                resumed_from=result.resumed_from)
    origin = f"resumed from {result.resumed_from}" if result.resumed_from else "from scratch"
    print(f"finetune: {result.global_step} steps on {result.train_examples} examples ({origin}) -> {variant.model_dir}")


def skip(params: Params, variant_name: str, checkpoint_dir: str, reason: str) -> None:
    """No adapter for a model LoRA does not apply to: a ``skipped`` variant directory; the run says why."""
    from biaslab.mitigation.applicability import write_skipped_variant

    variant = params.variant(variant_name)
    write_skipped_variant(variant.model_dir, base=params.model.output_dir, method="lora", reason=reason)
    Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)  # a declared (persistent) output of the stage
    curves.write(paths.curves_dir("finetune", variant_name), {})  # no training, no curve
    tracking.configure(params.tracking)
    with tracking.stage_run("finetune", variant=variant_name, tags={"method": "lora", "skipped": reason}) as mlflow_run:
        run_file.write(paths.run_file("finetune", variant_name), run_id=mlflow_run.info.run_id,
                       model_dir=variant.model_dir, variant=variant_name, skipped=reason)
    print(f"finetune@{variant_name}: {reason}")


if __name__ == "__main__":
    sys.exit(main())
