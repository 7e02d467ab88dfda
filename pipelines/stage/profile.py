"""A variant the active profile leaves out: its stages do nothing, say so in one line and write the outputs
``dvc.yaml`` declares, marked ``disabled`` (docs/profiles.md).

Every writer here is what the stage's own "mitigation did not apply" path writes (a variant directory whose
``variant.json`` says ``skipped``, a ``best_params.json`` with no params, a metrics file with no metrics), so
``evaluate``, ``register``, ``report`` and ``calibrate`` read a disabled variant the way they already read a
skipped one; the reason names the profile, and the run files also carry ``disabled: <profile>``. No model is
loaded, no MLflow run is made and nothing heavy is imported: a disabled stage takes about a second.
"""

from __future__ import annotations

from pathlib import Path

from biaslab.config import Params
from biaslab.outputs import paths, run_file


def announce(stage: str, reason: str) -> None:
    """The one log line of a disabled stage: ``<stage>: <reason>``."""
    print(f"{stage}: {reason}")


def shared_study_reason(params: Params) -> str | None:
    """Why stage ``tune`` (the ``tune`` section's study) does nothing under the active profile: no enabled
    variant trains from it (a ``lora`` variant without ``tune_overrides``); ``None`` when one does."""
    users = [n for n, v in params.variants.items() if v.method == "lora" and not v.tune_overrides]
    if not users or any(n in params.enabled_variants() for n in users):
        return None
    return (f"disabled by profile {params.profile!r}: no variant it lists trains from this study "
            f"({', '.join(users)} do; params.yaml profiles.{params.profile}.variants)")


def disable_variant_dir(params: Params, name: str, reason: str) -> Path:
    """``<variant>.model_dir`` holding only a ``variant.json`` that says ``skipped: <reason>``, ``disabled``."""
    from biaslab.atomic import atomic_dir
    from biaslab.outputs import variant_dir

    variant = params.variant(name)
    with atomic_dir(variant.model_dir) as tmp:
        variant_dir.write_manifest(tmp, base=params.model.output_dir, method=variant.method, skipped=reason,
                                   disabled=params.profile)
    return Path(variant.model_dir)


def disable_edit(params: Params, name: str, reason: str) -> None:
    """``edit_embeddings@<name>``'s outputs for a disabled variant."""
    disable_variant_dir(params, name, reason)
    run_file.write(paths.run_file("edit_embeddings", name), variant=name, model_dir=params.variant(name).model_dir,
                   stage="edit_embeddings", skipped=reason, disabled=params.profile)
    announce(f"edit_embeddings@{name}", reason)


def disable_study(params: Params, output_dir: str, run_json: Path, stage: str, reason: str) -> None:
    """``tune`` / ``tune_variant@<v>``'s outputs for a study no enabled variant uses: ``best_params.json`` with
    no params (the shape of :func:`biaslab.mitigation.applicability.write_skipped_tune`, written here so that
    ``register`` and ``report``, which import this module, do not enter the ``mitigation`` room) and the run file."""
    import json

    from biaslab.atomic import atomic_write_text

    path = Path(output_dir) / "best_params.json"
    atomic_write_text(path, json.dumps({"skipped": reason, "params": {}, "disabled": params.profile}, indent=2) + "\n")
    run_file.write(run_json, skipped=reason, disabled=params.profile, best_params_path=str(path))
    announce(stage, reason)


def disable_finetune(params: Params, name: str, reason: str) -> None:
    """``finetune@<name>``'s outputs for a disabled variant (the checkpoint folder is kept: a persistent output)."""
    from biaslab.outputs import curves

    disable_variant_dir(params, name, reason)
    Path(params.lora_for(name).checkpoint_dir).mkdir(parents=True, exist_ok=True)
    curves.write(paths.curves_dir("finetune", name), {})
    run_file.write(paths.run_file("finetune", name), variant=name, model_dir=params.variant(name).model_dir,
                   skipped=reason, disabled=params.profile)
    announce(f"finetune@{name}", reason)


def disable_evaluate(params: Params, name: str, reason: str, root: Path = Path(".")) -> None:
    """``evaluate@<name>``'s outputs for a disabled variant: no metrics, ``skipped: <reason>`` (what ``register``,
    ``report`` and ``calibrate`` read), empty predictions, a tables folder with a one-line summary."""
    from biaslab.atomic import atomic_dir
    from biaslab.outputs import metrics_file

    variant = params.variant(name)
    with atomic_dir(root / paths.predictions_dir(name)):
        pass
    with atomic_dir(root / paths.tables_dir(name)) as tmp:
        (tmp / "summary.md").write_text(f"# {name}: not evaluated\n\n{reason}\n", encoding="utf-8")
    metrics_file.write(root, name, {}, method=variant.method, model_dir=variant.model_dir, skipped=reason)
    run_file.write(root / paths.run_file("evaluate", name), variant=name, model_dir=variant.model_dir,
                   skipped=reason, disabled=params.profile)
    announce(f"evaluate@{name}", reason)


def disabled_names(params: Params) -> dict[str, str]:
    """``variant -> reason`` of every variant the active profile leaves out (empty for ``full``)."""
    return {n: reason for n in params.variants if (reason := params.disabled_reason(n)) is not None}
