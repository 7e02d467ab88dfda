"""How a stage's MLflow run ends when its process does not end by itself.

* **SIGTERM / SIGINT.** The stage's signal handler raises :class:`~biaslab.errors.Terminated` (SIGINT raises
  ``KeyboardInterrupt``); :func:`biaslab.tracking.runs.stage_run` ends the run ``KILLED`` (:func:`end_status`),
  not ``FAILED``: nothing was wrong with the inputs, someone stopped it.
* **SIGKILL / power loss.** Nothing runs in the dying process, so the run stays ``RUNNING``. Every run is tagged
  with its process (:data:`WRITER_TAG`, :func:`biaslab.atomic.writer_token`: host, pid, start time), and the
  next start of the same stage and variant (:func:`mark_dead_runs`) ends the ``RUNNING`` ones whose process is
  gone - and their nested runs (Optuna trials) - as ``KILLED``. Only processes of this host can be judged: a
  run of another machine (a team server's other worker) is left alone, as is a run without the tag.
"""

from __future__ import annotations

import logging
from typing import Any

from biaslab.atomic import writer_alive
from biaslab.errors import Terminated
from biaslab.tracking import access

WRITER_TAG = "biaslab.writer"
KILLED_TAG = "biaslab.killed"
_log = logging.getLogger(__name__)


def end_status(exc: BaseException) -> str:
    """``KILLED`` for a signal (SIGTERM's :class:`Terminated`, SIGINT's ``KeyboardInterrupt``), else ``FAILED``."""
    return "KILLED" if isinstance(exc, (Terminated, KeyboardInterrupt)) else "FAILED"


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def mark_dead_runs(stage: str, variant: str | None) -> list[str]:
    """End as ``KILLED`` the active experiment's RUNNING runs of ``stage``/``variant`` whose process is gone.

    Returns their run ids (nested runs included). A store that refuses (a team server's reader) is skipped:
    the stage itself still starts.
    """
    import mlflow

    client = mlflow.MlflowClient()
    try:
        with access.refusals():
            running = mlflow.search_runs(filter_string=f"attributes.status = 'RUNNING' and tags.stage = {_quote(stage)}",
                                         output_format="list")
            dead = [r for r in running if r.data.tags.get("variant") == variant
                    and writer_alive(r.data.tags.get(WRITER_TAG, "")) is False]
            killed: list[str] = []
            for run in dead:
                children = mlflow.search_runs(
                    experiment_ids=[run.info.experiment_id], output_format="list",
                    filter_string=f"attributes.status = 'RUNNING' and tags.mlflow.parentRunId = {_quote(run.info.run_id)}")
                for ended in [*children, run]:
                    _kill(client, ended)
                    killed.append(ended.info.run_id)
    except access.AccessDenied as exc:
        _log.warning("could not check for runs left RUNNING by a killed %s: %s", stage, exc)
        return []
    return killed


def _kill(client: Any, run: Any) -> None:
    client.set_tag(run.info.run_id, KILLED_TAG, "process gone while RUNNING (SIGKILL, OOM or power loss); "
                                                "marked at the next start of the stage")
    client.set_terminated(run.info.run_id, status="KILLED")
