"""Stage ``gate_control@<variant>``: build a control of the gate (a ``method: control`` variant) from ``models/base``.

    python -m pipelines.gate_control --variant positive_control

``positive_control`` (``balanced_finetune``) removes the planted bias with the planted recipe's own
counterbalanced text; ``negative_control`` (``noised_embeddings``) blurs the base's input embeddings
(:mod:`biaslab.pretrain.gate_controls`, docs/gate.md "Controls"). Both are evaluated like every variant
(``evaluate@<variant>``); the ``calibrate`` stage fails the run when the gate does not pass the positive one or
does not refuse the negative one. Without a planted bias (a hub model, or ``planted_bias.enabled: false``) a
``balanced_finetune`` control has nothing to remove: its folder holds a ``variant.json`` saying why (evaluate
and register skip it). Writes ``models/<variant>/`` and ``runs/gate_control_<variant>.json``; logs one MLflow run.
"""

import sys
from pathlib import Path

from biaslab.config import ConfigError, load_params
from biaslab.outputs import paths, run_file
from biaslab.tracking import runs as tracking
from pipelines.stage import profile
from pipelines.stage.entry import VARIANT, stage_main
from pipelines.stage.inputs import base_model_dir


def main(argv: list[str] | None = None) -> int:
    return stage_main("gate_control@{variant}", __doc__, lambda args: run(args.variant, args.params), argv, VARIANT)


def run(variant_name: str, params_path: str) -> None:
    from biaslab.atomic import atomic_dir
    from biaslab.outputs.variant_dir import fingerprint_dir, write_manifest
    from biaslab.pretrain.control_variant import no_planted_bias
    from biaslab.pretrain.gate_controls import build_control

    params = load_params(params_path)
    variant = params.variant(variant_name)
    if variant.method != "control" or variant.control is None:
        raise ConfigError(f"variants.{variant_name}: needs method: control and a control: section")
    disabled = params.disabled_reason(variant_name)
    if disabled is not None:  # the profile leaves it out (docs/profiles.md): a marked directory, no control built
        profile.disable_variant_dir(params, variant_name, disabled)
        run_file.write(paths.run_file("gate_control", variant_name), variant=variant_name,
                       model_dir=variant.model_dir, stage="gate_control", skipped=disabled, disabled=params.profile)
        profile.announce(f"gate_control@{variant_name}", disabled)
        return
    base_dir = base_model_dir(params)
    reason = no_planted_bias(params) if variant.control.recipe == "balanced_finetune" else None
    tracking.configure(params.tracking)
    with tracking.stage_run("gate_control", variant=variant_name,
                            tags={"base_fingerprint": fingerprint_dir(base_dir), "control": variant.control.role}) as r:
        tracking.log_params({"variant": variant.model_dump(mode="json")})
        if reason:
            with atomic_dir(Path(variant.model_dir)) as tmp:
                write_manifest(tmp, base=params.model.output_dir, method="control", skipped=reason)
            fingerprint, record = None, {"skipped": reason}
            print(f"gate_control@{variant_name}: {reason}")
        else:
            record = build_control(params, variant.control, base_dir, variant.model_dir)
            for name in ("final_train_loss", "relative_change"):
                if record.get(name) is not None:
                    tracking.log_metric(f"gate_control/{name}", record[name])
            fingerprint = fingerprint_dir(variant.model_dir)
            tracking.set_tags({"model_fingerprint": fingerprint})
        tracking.log_dict(record, "gate_control.json")
        run_id = r.info.run_id
    run_file.write(paths.run_file("gate_control", variant_name), run_id=run_id, variant=variant_name,
                   model_dir=variant.model_dir, model_fingerprint=fingerprint, stage="gate_control")


if __name__ == "__main__":
    sys.exit(main())
