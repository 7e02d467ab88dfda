"""What a domain loop may log to its stage's MLflow run without importing the tracking layer.

Stages (:mod:`pipelines`) own their MLflow runs: each opens its run, logs what the domain code
returned and writes its outputs. A few domain loops must log *while they run* - Optuna trials as nested
runs (:mod:`biaslab.mitigation.lora.tune`), training curves (:mod:`biaslab.mitigation.lora.train`), the nested run
that holds a registered package (:mod:`biaslab.registry.register`). The stage hands them a :class:`RunLog`:
the :mod:`biaslab.tracking.runs` module itself satisfies this protocol (its functions have exactly these
signatures), a test may pass any object that does. ``None`` means "log nothing" (e.g. an extra tune worker).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol


class RunLog(Protocol):
    """The logging calls domain code makes on the run its stage opened (see :mod:`biaslab.tracking.runs`)."""

    def stage_run(self, stage: str, *, variant: str | None = None, tags: Mapping[str, Any] | None = None,
                  nested: bool = False, run_name: str | None = None) -> AbstractContextManager[Any]:
        """A run (nested under the active one when ``nested``); yields the ``mlflow.ActiveRun``."""
        ...

    def log_params(self, params: Mapping[str, Any], prefix: str = "") -> None: ...

    def log_metric(self, name: str, value: float, step: int | None = None) -> None: ...

    def set_tags(self, tags: Mapping[str, Any]) -> None: ...

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None: ...

    def active_run_id(self) -> str | None: ...
