"""DVC stage ``register``: every variant becomes a version of ``registry.model_name``.

    python -m pipelines.register --params params.yaml [--flavor transformers|artifacts]

Full models are logged with the MLflow ``transformers`` flavour (``--flavor artifacts``: a verified byte
copy, faster); LoRA adapters / embedding hooks as artifacts referencing the base's version; the prompt
variant as ``prompt.json``. Artifacts are verified before a version is created; unchanged content reuses
its version. The alias ``candidate`` moves to the newest version. Each version points at the MLflow
logged model of the evaluation its metrics come from (tag ``model_id``; the model lists the version).
Writes ``runs/register.json`` (variant -> version), which ``report`` and ``biaslab promote`` read. A variant
whose mitigation did not apply (LoRA on a masked LM), or that the active profile disables (docs/profiles.md), is
not registered; the file and the run say why.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from biaslab.tracking import runs as tracking
from biaslab.config import load_params
from biaslab.outputs import metrics_file
from biaslab.registry import FLAVORS, REGISTER_JSON, register_variants, skipped_variants, write_register_json
from pipelines.stage.entry import option, stage_main
from pipelines.stage.profile import disabled_names


def main(argv: list[str] | None = None) -> int:
    return stage_main("register", __doc__, run, argv,
                      option("--flavor", choices=FLAVORS, default="transformers", help="how full models are logged"),
                      option("--metrics-dir", default="metrics"))


def run(args: argparse.Namespace) -> None:
    params = load_params(args.params)
    tracking.configure(params.tracking)
    model_name = params.registry.model_name
    skipped = {**skipped_variants(params), **disabled_names(params)}  # + the profile's disabled (a prompt variant)
    with tracking.stage_run("register", tags={"registered_model": model_name,
                                              **{f"skipped.{n}": why for n, why in skipped.items()}}):
        result = register_variants(params, ".", log=tracking, metrics_dir=args.metrics_dir, flavor=args.flavor,
                                   skipped=skipped)
        link_logged_models(model_name, result, args.metrics_dir)
        tracking.log_dict({n: asdict(r) for n, r in result.items()}, "register.json")
    write_register_json(result, params.registry.model_name, REGISTER_JSON, skipped=skipped)
    for name, reg in result.items():
        print(f"  {name:<10} version {reg.version:<4} {'(unchanged, reused)' if reg.reused else '(new)'}")
    for name, reason in skipped.items():
        print(f"  {name:<10} not registered: {reason}")
    print(f"registered {len(result)} variants of {params.registry.model_name} -> {REGISTER_JSON}")


def link_logged_models(model_name: str, result: dict, metrics_dir: str) -> None:
    """Point each registered version at the logged model its evaluate run made (none: a variant not evaluated)."""
    from pathlib import Path

    for name, reg in result.items():
        path = Path(metrics_dir) / f"{name}.json"
        run_id = metrics_file.read(path, name).run_id if path.is_file() else None
        model_id = tracking.run_model_id(run_id) if run_id else None
        if model_id is not None:
            tracking.link_version(model_name, reg.version, model_id)


if __name__ == "__main__":
    sys.exit(main())
