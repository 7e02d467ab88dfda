"""What every ``biaslab`` command shares: the ``--params``/``--root`` options, the exit codes, the console,
and the one-line error (exit 2) for a params file that does not load."""

from __future__ import annotations

import math
from pathlib import Path

import typer

PARAMS_OPT = typer.Option("params.yaml", "--params", help="params file (relative to --root)")
ROOT_OPT = typer.Option(".", "--root", help="project root holding metrics/, runs/ and mlruns/")
EXIT_REFUSED, EXIT_ERROR = 1, 2


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, width=160)


def fail(message: str) -> None:
    console(stderr=True).print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    raise typer.Exit(EXIT_ERROR)


def load(root: Path, params_file: str):
    from biaslab.config import ConfigError, load_params

    try:
        return load_params(root / params_file)
    except ConfigError as exc:
        fail(str(exc))


def fmt_ci(value: float | None, lo: float | None = None, hi: float | None = None) -> str:
    """``value [lo, hi]`` as every table of the command prints a metric; a dash for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    text = f"{value:.4g}"
    if lo is not None and hi is not None:
        text += f" [{lo:.4g}, {hi:.4g}]"
    return text
