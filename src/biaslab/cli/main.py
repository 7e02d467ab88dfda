"""The ``biaslab`` command: inspect variants and metrics, and promote a variant through the fairness gate.

    biaslab variants                 # every variant of params.yaml with its registry version and key metrics
    biaslab show-metrics lora        # every metric of one variant (value, CI, direction, ideal)
    biaslab show-metrics             # every metric, all variants side by side
    biaslab summary                  # one screen: headline metrics vs base, gate per variant, next steps
    biaslab compare lora soft        # headline metrics per benchmark, Δ vs base, better/worse beyond CI
    biaslab check-reproduction       # this run's metrics vs the committed ones, within their CIs
    biaslab promote lora             # gate -> alias `champion`, or refusal with reasons (exit 1)
    biaslab ui                       # MLflow UI on the run store; prints the address of the runs table
    biaslab serve champion           # `mlflow models serve` of a registered version (variant, version or alias)
    biaslab team setup --user worker --role worker --password-env WORKER_PASSWORD   # admin, on a team server

Run from the project root (or pass ``--root``). Only ``promote`` and ``team`` talk to MLflow; nothing heavy is
imported until a command runs, so ``biaslab --help`` is instant.
"""

from __future__ import annotations

from pathlib import Path

import typer

from biaslab.cli.options import EXIT_REFUSED, PARAMS_OPT, ROOT_OPT, fmt_ci
from biaslab.cli.options import console as _console
from biaslab.cli.options import fail as _fail
from biaslab.cli.options import load as _load
from biaslab.cli.promote import promote
from biaslab.cli.team import team_app

app = typer.Typer(help="biaslab: measure and mitigate gender bias in language models.", no_args_is_help=True,
                  add_completion=False)

app.add_typer(team_app, name="team")


def _metrics_or_none(root: Path, variant: str):
    from biaslab.outputs import metrics_file

    return metrics_file.read_if_present(root, variant)


@app.command()
def variants(params_file: str = PARAMS_OPT, root: Path = ROOT_OPT) -> None:
    """List the variants with their registry version and latest metrics (gate metrics first)."""
    from rich.table import Table

    from biaslab.outputs import paths, run_file

    params = _load(root, params_file)
    versions = run_file.registered_versions(root / paths.run_file("register"))
    key_metrics = list(dict.fromkeys([c.metric for c in params.registry.gate if c.rule != "answer_floor"]))
    table = Table(title=f"variants ({params.registry.model_name})")
    for col in ("variant", "method", "version", "model fingerprint", *key_metrics, "metrics", "description"):
        table.add_column(col)
    for name, cfg in params.variants.items():
        vm = _metrics_or_none(root, name)
        cells = []
        for metric in key_metrics:
            mv = vm.metrics.get(metric) if vm else None
            cells.append(fmt_ci(mv.value, mv.ci_low, mv.ci_high) if mv else "–")
        table.add_row(name, cfg.method, str(versions.get(name, "–")), (vm and vm.model_fingerprint) or "–",
                      *cells, str(len(vm.metrics)) if vm else "not evaluated", cfg.description)
    _console().print(table)
    _print_champion_check(params, root)


def _print_champion_check(params, root: Path) -> None:
    """Under ``biaslab variants``: the champion and whether the gate approved it (``promote --verify``'s check).

    Nothing is printed when there is no local run store yet; a store that cannot be read says so in one line
    instead of failing the listing."""
    from mlflow import MlflowClient

    from biaslab.tracking import access
    from biaslab.registry import promotions
    from biaslab.tracking import runs as tracking

    uri = tracking.resolve_tracking_uri(params.tracking, root)
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).exists():
        return
    console = _console()
    try:
        with access.refusals(uri):
            check = promotions.verify_champion(MlflowClient(uri), params)
    except Exception as exc:  # the listing stays useful without the registry (a refusal, a server down)
        console.print(f"champion: not checked ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
        return
    if check.version is None:
        console.print(f"champion: none (no @{promotions.CHAMPION} alias on {check.model_name})")
    elif check.ok:
        console.print(f"champion: version {check.version} (variant {check.variant or '?'}), approved by the gate "
                      "(files not hashed here: `biaslab promote --verify`)")
    else:
        console.print(f"champion: version {check.version} (variant {check.variant or '?'}) "
                      f"[red]FLAGGED:[/] {'; '.join(check.problems)} (see `biaslab promote --verify`)")


@app.command("show-metrics")
def show_metrics(
    variant: str = typer.Argument(None, help="one variant; omit for all variants side by side"),
    contains: str = typer.Option("", "--filter", help="only metrics whose name contains this text"),
    params_file: str = PARAMS_OPT,
    root: Path = ROOT_OPT,
) -> None:
    """Show metrics with their CI, direction (↑ higher / ↓ lower / ◎ target is better) and ideal."""
    from rich.table import Table

    from biaslab.config import ConfigError
    from biaslab.reporting.headlines import ARROWS

    params = _load(root, params_file)
    names = [variant] if variant else list(params.variants)
    if variant:
        try:
            params.variant(variant)
        except ConfigError as exc:
            _fail(str(exc))
    loaded = {n: _metrics_or_none(root, n) for n in names}
    if variant and loaded[variant] is None:
        _fail(f"metrics/{variant}.json not found; run `dvc repro` (evaluate@{variant}) first")
    present = {n: vm for n, vm in loaded.items() if vm is not None}
    if not present:
        _fail("no metrics/<variant>.json found; run `dvc repro` first")
    metric_names = sorted({m for vm in present.values() for m in vm.metrics if contains in m})
    table = Table(title="metrics" + (f" of {variant}" if variant else ""))
    for col in ("metric", "dir", "ideal", *present, *(["n"] if variant else [])):
        table.add_column(col)
    for metric in metric_names:
        first = next(vm.metrics[metric] for vm in present.values() if metric in vm.metrics)
        cells = []
        for vm in present.values():
            mv = vm.metrics.get(metric)
            cells.append(fmt_ci(mv.value, mv.ci_low, mv.ci_high) if mv else "–")
        extra = [str(first.n) if first.n is not None else "–"] if variant else []
        table.add_row(metric, ARROWS.get(first.direction, "?"), "" if first.ideal is None else f"{first.ideal:g}",
                      *cells, *extra)
    _console().print(table)


@app.command()
def compare(
    variants: list[str] = typer.Argument(None, help="variants to compare with the base (default: every evaluated one)"),
    base: str = typer.Option("base", "--base", help="the variant every other is compared with"),
    markdown: bool = typer.Option(False, "--markdown", help="print the markdown table instead of the rich one"),
    params_file: str = PARAMS_OPT,
    root: Path = ROOT_OPT,
) -> None:
    """Each benchmark's headline metrics: value [95% CI] per variant and Δ vs the base, better/worse marked."""
    from biaslab.reporting import comparison
    from biaslab.config import ConfigError
    from biaslab.reporting.headlines import headline_metrics

    params = _load(root, params_file)
    names = list(dict.fromkeys([base, *(variants or params.variants)]))
    for name in names:
        try:
            params.variant(name)
        except ConfigError as exc:
            _fail(str(exc))
    loaded = {n: _metrics_or_none(root, n) for n in names}
    missing = [n for n, vm in loaded.items() if vm is None and (n == base or variants)]
    if missing:
        _fail(f"no metrics for {', '.join(missing)}: metrics/<variant>.json not found; run `dvc repro` "
              f"(evaluate@<variant>) first")
    try:
        headlines = headline_metrics(params.evaluation.benchmarks)
        table = comparison.compare({n: vm.metrics for n, vm in loaded.items() if vm is not None}, headlines, base)
    except ValueError as exc:
        _fail(str(exc))
    if markdown:
        typer.echo(comparison.to_markdown(table), nl=False)
    else:
        _console().print(comparison.to_rich(table))


@app.command()
def summary(params_file: str = PARAMS_OPT, root: Path = ROOT_OPT) -> None:
    """One screen after `dvc repro`: variants, headline metrics vs base, the gate per variant, what to do next."""
    from biaslab.reporting import summary as one_screen

    params = _load(root, params_file)
    try:
        one_screen.print_summary(params, root, workers=None)  # the gate's verdicts on every CPU
    except (FileNotFoundError, ValueError) as exc:
        _fail(str(exc))


@app.command("check-reproduction")
def check_reproduction(
    variants: list[str] = typer.Argument(None, help="variants to check (default: every variant in params)"),
    rev: str = typer.Option("HEAD", "--rev", help="git revision holding the reference metrics/values/*.json"),
    show: int = typer.Option(10, "--show", help="list at most this many metrics outside their CI per variant"),
    params_file: str = PARAMS_OPT,
    root: Path = ROOT_OPT,
) -> None:
    """Compare this run's metrics with the committed ones within their 95% CIs (exit 1 if any falls outside).

    Bit-identical numbers are expected only on the machine type that produced the committed values
    (same params, same threads); elsewhere the default model trains differently and each committed value
    should lie inside the fresh run's CI. To share exact models and metrics use a DVC remote (dvc push/pull).
    """
    from rich.table import Table

    from biaslab.reporting import reproduction

    params = _load(root, params_file)
    names = list(variants or params.variants)
    committed_model, fresh_model = reproduction.same_model(root, rev)
    table = Table(title=f"this run vs the metrics committed at {rev}")
    for col in ("variant", "metrics", "identical", "within CI", "outside CI", "differs, no CI", "new", "gone"):
        table.add_column(col, justify="right" if col != "variant" else "left")
    outside: dict[str, list] = {}
    every_check: list[reproduction.MetricCheck] = []
    for name in names:
        vm = _metrics_or_none(root, name)
        if vm is None:
            _fail(f"metrics/{name}.json not found; run `dvc repro` (evaluate@{name}) first")
        try:
            checks = reproduction.check_variant(vm.metrics, reproduction.committed_values(root, name, rev))
        except reproduction.ReproductionError as exc:
            _fail(str(exc))
        n = reproduction.counts(checks)
        table.add_row(name, str(len(checks)), str(n["identical"]), str(n["within_ci"]),
                      f"[red]{n['outside_ci']}[/]" if n["outside_ci"] else "0", str(n["no_ci"]), str(n["new"]),
                      str(n["gone"]))
        outside[name] = [c for c in checks if c.status == "outside_ci"]
        every_check += checks
    console = _console()
    console.print(table)
    same, verdict = reproduction.model_verdict(committed_model, fresh_model, every_check)
    console.print(f"models/base: committed {committed_model or 'unknown'}, this run {fresh_model or 'unknown'}: "
                  f"{verdict}", highlight=False)
    for name, bad in outside.items():
        for c in sorted(bad, key=lambda c: -abs(c.delta or 0.0))[:show]:
            console.print(f"  {name} {c.metric}: committed {c.committed:.6g} outside this run's CI "
                          f"[{c.ci_low:.6g}, {c.ci_high:.6g}] (value {c.fresh:.6g})", highlight=False)
    if any(outside.values()):
        console.print("[red]not reproduced:[/] some committed values lie outside this run's 95% CI")
        raise typer.Exit(EXIT_REFUSED)
    console.print("[green]reproduced:[/] every committed value with a CI lies inside this run's 95% CI"
                  + ("" if not same else " (the same model)"))


app.command()(promote)  # biaslab promote: cli/promote.py


@app.command()
def ui(
    host: str = typer.Option("127.0.0.1", "--host", help="address the UI listens on (loopback by default)"),
    port: int = typer.Option(5000, "--port", help="port of the UI"),
    print_only: bool = typer.Option(False, "--print-url", help="only print the address; do not start the UI"),
    params_file: str = PARAMS_OPT,
    root: Path = ROOT_OPT,
) -> None:
    """Start the MLflow UI on the run store and print the address of the runs table.

    The experiment is tagged as model development; the printed address also selects MLflow's
    "Model training" view, so the browser opens on the runs (not the GenAI overview).
    """
    import os
    import subprocess

    from biaslab.tracking import runs as tracking

    params = _load(root, params_file)
    experiment_id = tracking.configure(params.tracking, root=root)
    command = tracking.ui_command(params.tracking, root, host=host, port=port)
    if command is None:  # a tracking server: it serves its own UI
        import mlflow

        _console().print(f"runs: {tracking.ui_url(mlflow.get_tracking_uri(), experiment_id)}", highlight=False)
        return
    _console().print(f"runs: {tracking.ui_url(f'http://{host}:{port}', experiment_id)}", highlight=False)
    if print_only:
        return
    raise typer.Exit(subprocess.call(command, cwd=os.fspath(root)))


@app.command()
def serve(
    target: str = typer.Argument("champion", help="champion (verified first), a variant of params.yaml, a version "
                                                  "number, or an alias of the candidates"),
    host: str = typer.Option("127.0.0.1", "--host", help="address the server listens on (loopback by default)"),
    port: int = typer.Option(5001, "--port", help="port of the server"),
    print_only: bool = typer.Option(False, "--print-command", help="only print the command and a curl example"),
    trust_remote_code: bool = typer.Option(None, "--trust-remote-code/--no-trust-remote-code",
                                           help="let the model's own code run (default: model.trust_remote_code "
                                                "of this host's params.yaml)"),
    allow_pickle: bool = typer.Option(None, "--allow-pickle/--no-allow-pickle",
                                      help="let pickle checkpoints load (default: model.allow_pickle of this "
                                           "host's params.yaml)"),
    params_file: str = PARAMS_OPT,
    root: Path = ROOT_OPT,
) -> None:
    """Serve a registered version over HTTP with `mlflow models serve` (biaslab's predict contract).

    `champion` is the champion model's version, downloaded and checked file by file against the
    promoter's manifest before it is served (refused, naming the file, on a mismatch). What the package may
    run is this host's decision (flags, else params.yaml), never the package's.
    POST /invocations with rows of `prompt` (greedy text), `context`+`continuation` (log-likelihood) or
    `sentence`; see docs/serving.md.
    """
    import os
    import shutil
    import subprocess
    import tempfile

    import mlflow

    from biaslab.cli.serve import ServeTargetError, describe_serving, serve_command, serve_env, serve_target
    from biaslab.serving.settings import HostOptions
    from biaslab.tracking import access
    from biaslab.tracking import runs as tracking

    params = _load(root, params_file)
    tracking.configure(params.tracking, root=root)
    options = HostOptions(
        trust_remote_code=params.model.trust_remote_code if trust_remote_code is None else trust_remote_code,
        allow_pickle=params.model.allow_pickle if allow_pickle is None else allow_pickle)
    workdir = tempfile.mkdtemp(prefix="biaslab-serve-")
    try:
        try:
            with access.refusals():
                name, uri, version = serve_target(params, target, root, workdir)
        except (ServeTargetError, access.AccessDenied) as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            _fail(str(exc))
        command = serve_command(uri, host, port)
        env = serve_env(os.environ, MLFLOW_TRACKING_URI=mlflow.get_tracking_uri(), **options.env())
        for line in describe_serving(name, uri, version, command, env, host, port,
                                     kept=workdir if print_only else None):
            _console().print(line, highlight=False, soft_wrap=True)
        if print_only:  # the printed command names the verified copy: it stays (describe_serving says where)
            return
        raise typer.Exit(subprocess.call(command, env=env, cwd=os.fspath(root)))
    finally:
        if not print_only:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    app()
