"""The clean-error contract every ``pipelines/*.py`` stage script shares.

A stage run from ``dvc repro`` (or by hand) either succeeds with exit code 0, or fails with exit
code 1 and one line on stderr that names the stage and the cause (the file, row, key or variant
that is wrong): no traceback for the errors a user is expected to fix. Partial outputs are not
this module's concern (stages write through :mod:`biaslab.atomic`), nor is the MLflow run status:
:func:`biaslab.tracking.stage_run` has already ended the run ``FAILED`` by the time the exception
gets here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

ERROR_MESSAGE = "{stage}: error: {exc}"
"""The default stderr line of a failed stage, e.g. ``evaluate@base: error: unknown variant 'x'``."""

FAILED_MESSAGE = "{stage} failed: {exc}"
"""The wording of ``prepare``, ``register`` and ``report``, which catch only their own error types
(config/data/registry errors); kept as it is because users and tests look for ``prepare failed:``."""


def run_stage(
    stage: str,
    body: Callable[[], object],
    *,
    expected: tuple[type[BaseException], ...] = (Exception,),
    message: str = ERROR_MESSAGE,
) -> int:
    """Run one stage's ``body`` and return its exit code: 0, or 1 after printing ``message``.

    ``stage`` is the name the user sees (``evaluate@base``); ``expected`` are the exception types
    turned into that one line (anything else keeps its traceback); ``message`` is formatted with
    ``stage`` and ``exc``. The body does the work and prints its own success summary.
    """
    from biaslab.progress import quiet_library_bars

    quiet_library_bars()  # before any library loads: log-friendly bars when stderr is not a terminal
    try:
        body()
    except expected as exc:  # the message names the file/row/key; the traceback is noise for users
        print(message.format(stage=stage, exc=exc), file=sys.stderr)
        return 1
    return 0
