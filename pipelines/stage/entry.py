"""The clean-error contract every stage (:mod:`pipelines`) shares.

A stage run from ``dvc repro`` (or by hand) either succeeds with exit code 0, or fails with exit
code 1 and one line on stderr, ``<stage> failed: <cause>``, when the cause is one of the project's
own errors (:class:`~biaslab.errors.BiaslabError`: config, data, model-load, evaluation, registry,
missing input): their message names the file, row, key or variant to fix, so a traceback is noise.
Anything else is a bug and keeps its traceback. SIGTERM (``docker stop``) and SIGINT (Ctrl-C) end the
stage with exit code 128 + signal and one line, ``<stage> killed: …``, after ``finally`` blocks ran: the
handler raises :class:`~biaslab.errors.Terminated` so the MLflow run ends ``KILLED``. Partial outputs are not this module's concern
(stages write through :mod:`biaslab.atomic`), nor is the MLflow run status:
:func:`biaslab.tracking.runs.stage_run` has already ended the run ``FAILED`` by the time the exception
gets here.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from biaslab.errors import BiaslabError, Terminated

MESSAGE = "{stage} failed: {exc}"
"""The stderr line of a failed stage, e.g. ``evaluate@x failed: unknown variant 'x'; params.yaml defines: …``."""


def stage_parser(doc: str | None) -> argparse.ArgumentParser:
    """The command line every stage starts from: its docstring as help, ``--params params.yaml``."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml", help="params file (default: params.yaml)")
    return parser


class Option(NamedTuple):
    """One command-line option of a stage: ``parser.add_argument(*flags, **settings)``."""

    flags: tuple[str, ...]
    settings: dict[str, Any]


def option(*flags: str, **settings: Any) -> Option:
    """An :class:`Option`, written as ``add_argument`` would take it."""
    return Option(flags, settings)


VARIANT = option("--variant", required=True, help="a variant name from params.yaml `variants`")
NO_PROGRESS = option("--no-progress", action="store_true", help="no progress bar (CI logs)")


def stage_main(stage: str, doc: str | None, run: Callable[[argparse.Namespace], object],
               argv: list[str] | None, *options: Option) -> int:
    """A stage's ``main``: parse ``--params`` and ``options``, then :func:`run_stage` ``run(args)``.

    ``stage`` may name parsed options, e.g. ``"evaluate@{variant}"`` is the name a failure line shows.
    """
    parser = stage_parser(doc)
    for extra in options:
        parser.add_argument(*extra.flags, **extra.settings)
    args = parser.parse_args(argv)

    def body() -> object:
        pin_cpu_arithmetic(args.params)
        return run(args)

    return run_stage(stage.format(**vars(args)), body)


def pin_cpu_arithmetic(params_path: str) -> None:
    """``scoring.cpu_arithmetic`` of ``params_path`` in effect before the stage computes anything
    (:func:`biaslab.cpu_arithmetic.pin`; no stage module imports torch at import time, a test checks)."""
    from biaslab.config import load_params
    from biaslab.cpu_arithmetic import pin

    pin(load_params(params_path).scoring.cpu_arithmetic)


def run_stage(stage: str, body: Callable[[], object]) -> int:
    """Run one stage's ``body`` and return its exit code: 0, or 1 after one line for a known error.

    ``stage`` is the name the user sees (``evaluate@base``). The body does the work and prints its
    own success summary.
    """
    from biaslab.progress import quiet_library_bars

    quiet_library_bars()  # before any library loads: log-friendly bars when stderr is not a terminal
    previous = _raise_on_sigterm()
    try:
        body()
    except BiaslabError as exc:  # the message names the file/row/key; the traceback is noise for users
        print(MESSAGE.format(stage=stage, exc=exc), file=sys.stderr)
        return 1
    except (Terminated, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
        print(KILLED.format(stage=stage, signal=signal.Signals(signum).name), file=sys.stderr)
        return 128 + signum
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


KILLED = "{stage} killed: {signal} (its MLflow run ends KILLED)"


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated(signum)


def _raise_on_sigterm() -> Any:
    """Make SIGTERM raise :class:`Terminated` (main thread only); returns the handler to restore, or None."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)
