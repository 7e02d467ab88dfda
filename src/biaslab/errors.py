"""The root of the project's own exception types: the errors a user is expected to fix.

Every error that names a wrong key, file, row, variant or missing input derives from
:class:`BiaslabError` (``ConfigError``, ``DataError``, ``ModelLoadError``, ``EvaluationError``,
``RegistryError``, ``MissingInputError``, …). A stage turns exactly these into one clean line on
stderr and exit code 1 (:func:`pipelines.stage.entry.run_stage`); anything else is a bug and keeps
its traceback.
"""

from __future__ import annotations


class BiaslabError(Exception):
    """An error with a message that says what is wrong and how to fix it (no traceback needed)."""


class MissingInputError(BiaslabError, FileNotFoundError):
    """A stage input (a file another stage writes) does not exist; the message names the stage to run."""


class EvaluationError(BiaslabError, RuntimeError):
    """A benchmark produced an unusable number (NaN/inf log-probabilities) or could not run."""


class ConfigError(BiaslabError, ValueError):
    """params.yaml is missing, malformed, or has an unknown / mistyped key."""


class Terminated(BaseException):
    """The process got SIGTERM (``docker stop``, a scheduler, ``kill``): raised by the stage's signal handler
    (:func:`pipelines.stage.entry.run_stage`) so ``finally`` blocks run and the MLflow run ends ``KILLED``.

    A ``BaseException`` like ``KeyboardInterrupt`` (SIGINT's), so ``except Exception`` does not swallow it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum
