"""The one-screen summary at the end of ``dvc repro`` (printed by the ``report`` stage and ``biaslab summary``).

What a person wants after a run, in ~30 lines: which model and variants, the headline metrics of each
benchmark against the base (:mod:`biaslab.reporting.comparison`, compact: value and mark, no CI), what the
promotion gate says about each variant (paired on the stored predictions, :mod:`biaslab.registry.gate`: the
first failing rule and why), their registry versions, and where to look next. A variant whose mitigation
did not apply (LoRA on a masked LM) is listed with its reason, outside the table and the gate. Everything is
read from the pipeline's files (``metrics/<variant>.json``, ``data/predictions/<variant>/``,
``runs/register.json``), so it needs no MLflow connection; the gate's paired bootstraps take seconds of one
core per variant, so the ``report`` stage and ``biaslab summary`` run the variants' verdicts on every CPU at
once (:func:`gate_lines`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biaslab.reporting.comparison import Comparison, compare
from biaslab.reporting.headlines import headline_metrics

WIDTH = 120


@dataclass
class GateLine:
    variant: str
    passed: bool
    failed: list[str] = field(default_factory=list)  # "metric: reason" of the conditions it fails
    primary_distance: float = float("inf")  # the first gate metric's distance to its ideal (lower = better)


def best_first(gate: list[GateLine]) -> list[str]:
    """The variants that pass the gate, best first: closest to the ideal on the gate's first metric (the
    bias metric the gate is about), ties in params order. The summary suggests promoting the first."""
    passing = [g for g in gate if g.passed]
    return [g.variant for g in sorted(passing, key=lambda g: g.primary_distance)]


@dataclass
class Summary:
    model: str
    comparison: Comparison
    gate: list[GateLine]
    versions: dict[str, str]
    model_name: str
    not_evaluated: list[str]
    skipped: dict[str, str] = field(default_factory=dict)  # variant -> why its mitigation did not apply


def gate_line(params: Any, root: str | os.PathLike[str], name: str, base: str, primary: float) -> GateLine:
    """The gate's verdict on variant ``name`` against ``base`` (:func:`biaslab.registry.evaluate_gate_for` on the
    workspace's files), as a summary line. A top-level function, so a worker process can run it."""
    from biaslab.registry import evaluate_gate_for
    from biaslab.registry.evidence import LocalEvidence

    verdict = evaluate_gate_for(params, LocalEvidence(Path(root)), name, base)
    return GateLine(name, verdict.passed, [f"{r.metric}: {r.reason}" for r in verdict.failed], primary)


def gate_lines(params: Any, root: str | os.PathLike[str], primaries: dict[str, float], base: str,
               workers: int | None = None) -> list[GateLine]:
    """:func:`gate_line` of every variant of ``primaries`` (name -> its first gate metric's distance to the
    ideal), in that order. Each verdict is thousands of paired bootstrap resamples per rule (seconds of one
    core), and the verdicts are independent, so up to ``workers`` (default: the CPUs this process may use) run
    at once, each in a fresh (spawned) process: the same function on the same files, so the same lines as one
    at a time."""
    names = list(primaries)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = min(len(names), workers or usable)
    if workers <= 1:
        return [gate_line(params, root, n, base, primaries[n]) for n in names]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(gate_line, params, str(root), n, base, primaries[n]) for n in names]
        return [f.result() for f in futures]


def build(params: Any, root: str | os.PathLike[str] = ".", base: str = "base", workers: int | None = 1) -> Summary:
    """Gather the summary from the pipeline's files under ``root`` (the gate's verdicts :func:`gate_lines`,
    ``workers`` at a time; ``None``: every usable CPU). The default is one: worker processes are spawned, and
    a spawned process imports the caller's main script again, which a script without an
    ``if __name__ == "__main__":`` guard does not survive; the ``report`` stage and ``biaslab summary`` ask
    for every CPU."""
    from biaslab.outputs import metrics_file, paths, run_file
    from biaslab.reporting.report import describe_model_source

    root = Path(root)
    loaded, skipped = {}, {}
    for name in params.variants:
        found = metrics_file.read_if_present(root, name)
        if found is not None and found.skipped:
            skipped[name] = found.skipped
        elif found is not None:
            loaded[name] = found
    if base not in loaded:
        raise FileNotFoundError(f"metrics/{base}.json not found; run `dvc repro` first")
    table = compare({n: vm.metrics for n, vm in loaded.items()}, headline_metrics(params.evaluation.benchmarks), base)
    conditions = list(params.registry.gate)
    primaries = {}
    for name, vm in loaded.items():
        if name != base:
            primary = vm.metrics.get(conditions[0].metric) if conditions else None
            primaries[name] = primary.distance_to_ideal() if primary is not None else float("inf")
    gate = gate_lines(params, root, primaries, base, workers)
    versions = run_file.registered_versions(root / paths.run_file("register"))
    return Summary(describe_model_source(params), table, gate, versions,
                   params.registry.model_name, [n for n in params.variants if n not in loaded and n not in skipped],
                   skipped)


def _compact_table(comparison: Comparison) -> Any:
    from rich.table import Table

    from biaslab.reporting.comparison import add_rich_rows, number

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    table.add_column("benchmark")
    table.add_column("headline metric")
    for v in comparison.variants:
        table.add_column(v, justify="right")
    add_rich_rows(table, comparison, lambda cell: number(cell.value), lambda cell: cell.mark, " ")
    return table


def render(summary: Summary, console: Any) -> None:
    """Print ``summary`` on a rich ``console`` (one screen)."""
    comparison = summary.comparison
    console.rule("biaslab summary")
    console.print(f"Model: {summary.model}.", highlight=False)
    evaluated = [v for v in comparison.variants]
    line = f"Variants: {', '.join(evaluated)} (base = {comparison.base})"
    if summary.not_evaluated:
        line += f"; not evaluated: {', '.join(summary.not_evaluated)}"
    console.print(line, highlight=False)
    for name, reason in summary.skipped.items():
        console.print(f"Skipped: {name}: {reason}", highlight=False)
    console.print(_compact_table(comparison))
    console.print("▲/▼ better/worse than the base beyond the 95% CIs, △/▽ within them, = same "
                  "(each metric's own direction: ↑ higher, ↓ lower, ◎ closest to the ideal).", highlight=False)
    console.print("Promotion gate (registry.gate, paired vs base on the same test items; docs/gate.md):",
                  highlight=False)
    for g in summary.gate:
        version = summary.versions.get(g.variant)
        where = f" (version {version})" if version else ""
        if g.passed:
            console.print(f"  [green]PASS[/] {g.variant}{where}", highlight=False)
        else:
            first = g.failed[0] if g.failed else "no gate conditions"
            more = f" (+{len(g.failed) - 1} more)" if len(g.failed) > 1 else ""
            console.print(f"  [red]FAIL[/] {g.variant}{where}: {first}{more}", highlight=False, overflow="ellipsis",
                          no_wrap=True)
    passing = best_first(summary.gate)
    console.print("Next:", highlight=False)
    if passing:
        console.print(f"  {'biaslab promote ' + passing[0]:<34}alias `champion` on {summary.model_name} "
                      f"(passed the gate: {', '.join(passing)})", highlight=False)
    console.print("  biaslab compare                   the table above with CIs and Δ", highlight=False)
    console.print("  make ui                           MLflow: runs, models, registry (prints the address)",
                  highlight=False)
    console.print("  reports/report.md                 every metric, the papers' tables, bias vs accuracy",
                  highlight=False)
    console.print("  dvc metrics diff / dvc exp show   what changed since the last commit / experiment",
                  highlight=False)


def print_summary(params: Any, root: str | os.PathLike[str] = ".", console: Any = None,
                  workers: int | None = 1) -> Summary:
    """Build and print the summary (stdout, ``WIDTH`` columns unless ``console`` is given; ``workers`` as
    :func:`build`)."""
    from rich.console import Console

    summary = build(params, root, workers=workers)
    render(summary, console or Console(width=WIDTH))
    return summary
