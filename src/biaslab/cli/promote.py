"""``biaslab promote``: gate a variant against the base and, on a pass, copy it into the champion model;
``--verify`` checks the current champion against the promoter's record (docs/champion.md).

Registered on the ``biaslab`` app by :mod:`biaslab.cli.main`; nothing heavy is imported until it runs."""

from __future__ import annotations

from pathlib import Path

import typer

from biaslab.cli.options import EXIT_REFUSED, PARAMS_OPT, ROOT_OPT, fmt_ci
from biaslab.cli.options import console as _console
from biaslab.cli.options import fail as _fail
from biaslab.cli.options import load as _load


def promote(
    variant: str = typer.Argument(None, help="variant to promote (a name from params.yaml `variants`)"),
    base: str = typer.Option("base", "--base", help="variant the gate compares against"),
    verify: bool = typer.Option(False, "--verify", help="promote nothing: check the current champion's gate "
                                                        "record and recompute its files' hashes (exit 1 if not ok)"),
    version: str = typer.Option(None, "--version", help="the variant's registered version (default: runs/register.json)"),
    base_version: str = typer.Option(None, "--base-version", help="the base's registered version (default: "
                                                                  "runs/register.json)"),
    no_rescore: bool = typer.Option(False, "--no-rescore", help="do not re-score a seeded sample of 64 evidence "
                                    "rows from the verified files (slow for a large model on a CPU); the verdict "
                                    "table then says the tables were not checked against the model"),
    params_file: str = PARAMS_OPT,
    root: Path = ROOT_OPT,
) -> None:
    """Gate VARIANT against the base: pass -> its files copied into the champion model, alias `champion`;
    fail -> refused with reasons (exit 1).

    With --verify: show the current champion's gate record, recompute every file's sha256 against the
    promoter's manifest, and flag anything else (exit 1)."""
    from rich.table import Table

    from biaslab import registry
    from biaslab.tracking import access
    from biaslab.tracking import runs as tracking
    from biaslab.errors import BiaslabError

    params = _load(root, params_file)
    if verify:
        if variant is not None:
            _fail("--verify checks the current champion; give no variant")
        _verify_champion(params, root)
        return
    if variant is None:
        _fail("name the variant to promote (or pass --verify)")
    try:
        params.variant(variant)
        tracking.configure(params.tracking, root=root)
        with access.refusals():
            decision = registry.promote(params, variant, root, base_variant=base, version=version,
                                        base_version=base_version, rescore=not no_rescore)
    except (BiaslabError, access.AccessDenied) as exc:
        _fail(str(exc))

    table = Table(title=f"promotion gate: {variant} (version {decision.version}) vs {base}, paired on the same "
                        "test items (docs/gate.md)")
    for col in ("metric", "rule", "asks", variant, base, "estimate [95% CI]", "result", "why"):
        table.add_column(col, overflow="fold")
    for r in decision.results:
        verdict = "[green]PASS[/]" if r.passed else "[red]FAIL[/]"
        table.add_row(r.metric, r.rule, r.asks, fmt_ci(r.variant_value), fmt_ci(r.base_value),
                      fmt_ci(r.estimate, *(r.ci or (None, None))), verdict, r.reason)
    console = _console()
    console.print(table)
    if decision.tag_problem:
        console.print(f"[yellow]note:[/] {decision.tag_problem}")
    if decision.approved:
        console.print(f"[green]approved:[/] {decision.model_name} version {decision.version} copied to "
                      f"{params.registry.champion_model} version {decision.champion_version}, now "
                      f"@{registry.CHAMPION}")
        return
    failed = "; ".join(f"{r.metric} ({r.reason})" for r in decision.results if not r.passed)  # whole, for a log
    console.print(f"[red]refused:[/] {variant} failed {failed}; "
                  f"the decision is recorded in experiment {params.registry.promotions_experiment!r} and as "
                  f"promotion.* tags on version {decision.version}")
    raise typer.Exit(EXIT_REFUSED)


def _verify_champion(params, root: Path) -> None:
    """``biaslab promote --verify``: the champion, its newest gate record, and what is wrong with it."""
    from mlflow import MlflowClient

    from biaslab.tracking import access
    from biaslab.registry import promotions
    from biaslab.tracking import runs as tracking
    from biaslab.config import ConfigError

    import tempfile

    try:
        uri = tracking.resolve_tracking_uri(params.tracking, root)
        with access.refusals(uri), tempfile.TemporaryDirectory(prefix="verify-champion-") as tmp:
            check = promotions.verify_champion(MlflowClient(uri), params, files_to=tmp)
    except (ConfigError, access.AccessDenied) as exc:
        _fail(str(exc))
    console = _console()
    if check.version is None:
        console.print(f"{check.model_name}: no @{promotions.CHAMPION} alias; nothing to verify")
        return
    record = (f"run {check.record_run_id}: {check.record_decision} at {check.record_time}"
              + (f" by {check.record_user}" if check.record_user else "")) if check.record_run_id else "none"
    console.print(f"{check.model_name}@{promotions.CHAMPION} = version {check.version} "
                  f"(variant {check.variant or '?'}, copied from {check.source or '?'}); gate record: {record}")
    if check.ok:
        console.print("[green]verified:[/] the champion is the promoter's copy of a version the gate approved; "
                      "every file's sha256 recomputed matches the promoter's manifest")
        return
    for problem in check.problems:
        console.print(f"[red]FLAGGED:[/] {problem}")
    console.print("the champion is not what the gate approved; re-run `biaslab promote <variant>` as the promoter")
    raise typer.Exit(EXIT_REFUSED)
