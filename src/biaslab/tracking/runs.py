"""The only module that talks to MLflow for logging.

Store: ``sqlite:///mlruns/mlflow.db`` with artifacts under ``mlruns/artifacts`` (current MLflow refuses
the bare ``./mlruns`` file store). One experiment per pipeline, one run per stage execution, Optuna
trials as nested runs. Every run is tagged with the git commit, the stage, the variant and (when
known) the model fingerprint; a run whose body raises is marked ``FAILED``, never ``FINISHED``.

Because a stage that DVC skips runs no code, each stage also writes a small ``run.json``
(:mod:`biaslab.outputs.run_file`) that downstream stages read to find the run and model it produced.

The bare SQLite file serialises writers: it is for one pipeline on one machine. Parallel workers
(Optuna on several machines, concurrent stages) should point ``MLFLOW_TRACKING_URI`` (or params
``tracking.tracking_uri``) at an ``mlflow server`` (see README "Scale-out").
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from biaslab.atomic import writer_token
from biaslab.tracking import access, run_status
from biaslab.config import TrackingConfig
from biaslab.config.workspace import origin_workspace
from biaslab.tracking.credentials import check_tracking_uri, redact
from biaslab.metrics.values import MetricValue
from biaslab.tracking.git_commit import git_commit  # noqa: F401  (tracking.git_commit: part of this module's API)

TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
# The experiment tag MLflow's UI reads for the kind of an experiment: its kind selector writes it, and
# "custom_model_development" is the value for a model-training project (runs table, Models tab) as opposed
# to "genai_development" (traces overview). MLflow 3.17's UI also keeps a global "GenAI / Model training"
# switch (browser local storage ``mlflow.workflowType``, or ``?workflowType=`` in the URL) that wins over
# the tag while its feature flag is on, so :func:`ui_url` names the workflow too.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
UI_WORKFLOW = "machine_learning"
METRICS_ARTIFACT = "metrics.json"  # every metric's record (direction, ideal, CI, description): log_metric_values
_SECRET_HINTS = ("token", "password", "secret", "key", "credential")


def _mlflow():
    import mlflow

    return mlflow


def resolve_tracking_uri(cfg: TrackingConfig, root: str | os.PathLike[str] = ".") -> str:
    """The store to use: ``MLFLOW_TRACKING_URI`` if set, else params; a relative SQLite path resolved against
    ``root`` - against the original workspace when ``root`` is a DVC experiment copy (``dvc exp run --queue``),
    whose own store DVC would delete (:func:`biaslab.config.workspace.origin_workspace`). A URI carrying a password is refused (credentials go in ``MLFLOW_TRACKING_USERNAME``/``PASSWORD``)."""
    uri = check_tracking_uri(os.environ.get(TRACKING_URI_ENV) or cfg.tracking_uri)
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = f"sqlite:///{origin_workspace(root) / uri[len('sqlite:///'):]}"
    return uri


def configure(cfg: TrackingConfig, root: str | os.PathLike[str] = ".") -> str:
    """Point MLflow at the store and make sure the experiment exists; returns the experiment id.

    ``MLFLOW_TRACKING_URI`` in the environment wins over params (scale-out to a tracking server).
    Relative SQLite paths and the artifact location are resolved against ``root``. Against a tracking
    server (``http(s)://``) a missing experiment is created without an artifact location, so it gets
    the server's own root (proxied ``mlflow-artifacts:``, an object store in production) - a local path
    would keep every remote worker's artifacts on that worker's disk. A server's 401/403 is raised as
    :class:`~biaslab.tracking.access.AccessDenied` naming the experiment and the permission.
    """
    mlflow = _mlflow()
    root = Path(root).resolve()
    uri = resolve_tracking_uri(cfg, root)
    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    access.name_resources(experiment=cfg.experiment)
    with access.refusals(uri):
        experiment = mlflow.get_experiment_by_name(cfg.experiment)
        if experiment is not None:
            experiment_id = experiment.experiment_id
        else:
            location = None
            if not uri.startswith(("http://", "https://")):
                artifact_root = origin_workspace(root) / cfg.artifact_location  # absolute stays absolute
                artifact_root.mkdir(parents=True, exist_ok=True)
                location = artifact_root.as_uri()
            try:
                experiment_id = mlflow.create_experiment(cfg.experiment, artifact_location=location,
                                                         tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
                experiment = mlflow.get_experiment(experiment_id)
            except Exception as exc:  # another process created it first (a refusal is not that)
                if access.is_refusal(exc):
                    raise
                experiment = mlflow.get_experiment_by_name(cfg.experiment)
                experiment_id = experiment.experiment_id
        _mark_model_development(mlflow, experiment_id, experiment)
        mlflow.set_experiment(experiment_id=experiment_id)
    return experiment_id


def _mark_model_development(mlflow: Any, experiment_id: str, experiment: Any) -> None:
    """Tag an experiment made before the tag existed as model development, so the UI opens on its runs.

    New experiments get the tag when they are created. Several stages may start at once against one
    server (``dvc exp run --queue`` workers): when two of them tag the same experiment, the loser's
    insert fails on the store's unique key - harmless once the tag is there, so it is read back.
    """
    if experiment.tags.get(EXPERIMENT_KIND_TAG) == EXPERIMENT_KIND:
        return
    client = mlflow.MlflowClient()
    try:
        client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    except Exception as exc:  # a reader of a team server (the promoter) may not tag; a writer or the admin does
        if access.is_refusal(exc):
            return
        if client.get_experiment(experiment_id).tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
            raise


def ui_url(base_url: str, experiment_id: str) -> str:
    """The MLflow UI address of the experiment's runs table (model-training view, not the GenAI overview)."""
    return f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType={UI_WORKFLOW}"


def ui_command(cfg: TrackingConfig, root: str | os.PathLike[str] = ".", *, host: str = "127.0.0.1",
               port: int = 5000) -> list[str] | None:
    """The ``mlflow ui`` command line for the local store, or ``None`` when the store is a tracking server.

    Call after :func:`configure` (which resolved the store URI). A server already has its own UI.
    """
    import sys

    uri = _mlflow().get_tracking_uri()
    if uri.startswith(("http://", "https://")):
        return None
    artifact_root = origin_workspace(root) / cfg.artifact_location
    return [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
            "--default-artifact-root", artifact_root.as_uri(), "--host", host, "--port", str(port)]


def _safe_tags(tags: Mapping[str, Any]) -> dict[str, str]:
    """Stringify tags and refuse anything that looks like a credential (never log secrets); values are redacted."""
    clean = {}
    for key, value in tags.items():
        if value is None:
            continue
        if any(h in key.lower() for h in _SECRET_HINTS) and key not in {"model_fingerprint"}:
            raise ValueError(f"refusing to log tag {key!r}: looks like a credential")
        clean[key] = redact(str(value))[:5000]
    return clean


@contextlib.contextmanager
def stage_run(
    stage: str,
    *,
    variant: str | None = None,
    tags: Mapping[str, Any] | None = None,
    nested: bool = False,
    run_name: str | None = None,
) -> Iterator[Any]:
    """Start a run for one stage execution; the run ends ``FAILED`` if the body raises, ``KILLED`` on a signal.

    A top-level run first ends the same stage/variant's runs left ``RUNNING`` by a killed process, and is
    tagged with its own process so the next start can do the same for it (:mod:`biaslab.tracking.run_status`).
    A 401/403 of a tracking server, here or in the body, is raised as :class:`~biaslab.tracking.access.AccessDenied`.

    Yields the active ``mlflow.ActiveRun``.
    """
    mlflow = _mlflow()
    all_tags = {"stage": stage, "variant": variant, "git_commit": git_commit(),
                run_status.WRITER_TAG: writer_token(), **(tags or {})}
    name = run_name or (f"{stage}@{variant}" if variant else stage)
    if not nested:
        run_status.mark_dead_runs(stage, variant)
    with access.refusals():
        run = mlflow.start_run(run_name=name, nested=nested, tags=_safe_tags(all_tags))
    try:
        yield run
    except BaseException as exc:
        with access.refusals():
            mlflow.end_run(status=run_status.end_status(exc))
        denied = access.explain(exc) if isinstance(exc, Exception) and not isinstance(exc, access.AccessDenied) \
            else None
        if denied is not None:  # a 401/403 inside the run: one line naming the resource and permission
            raise denied from exc
        raise
    else:
        with access.refusals():
            mlflow.end_run(status="FINISHED")


def set_tags(tags: Mapping[str, Any]) -> None:
    _mlflow().set_tags(_safe_tags(tags))


def _flat_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A (possibly nested) mapping as flat ``a.b.c`` keys with redacted string values (MLflow's param limit)."""
    flat: dict[str, str] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Mapping):
            for k, v in node.items():
                walk(v, f"{path}.{k}" if path else str(k))
        else:
            flat[path] = redact(str(node))[:6000]

    walk(params, prefix)
    return flat


def log_params(params: Mapping[str, Any], prefix: str = "") -> None:
    """Log a (possibly nested) mapping as flat ``a.b.c`` params."""
    mlflow = _mlflow()
    items = list(_flat_params(params, prefix).items())
    for start in range(0, len(items), 100):
        mlflow.log_params(dict(items[start : start + 100]))


def bind_evidence(variant: str, model_fingerprint: str | None, datasets: Any) -> dict[str, str]:
    """Last in an evaluate run: log the params that bind its evidence (:mod:`biaslab.tracking.evidence`)."""
    from biaslab.tracking.evidence import evidence_params

    mlflow = _mlflow()
    bound = evidence_params(mlflow.MlflowClient(), mlflow.active_run().info.run_id, variant=variant,
                            model_fingerprint=model_fingerprint, datasets=datasets)
    log_params(bound)
    return bound


def _metric_key(name: str) -> str:
    # MLflow keys allow / - . _ and alphanumerics; keep names readable
    return "".join(c if c.isalnum() or c in "/-._ " else "_" for c in name)


def log_metric_values(metrics: Mapping[str, MetricValue], *, model_id: str | None = None) -> None:
    """Log each value with its CI bounds, and every metric's record as one artifact, ``metrics.json``.

    The record (value, direction, ideal, CI, n, description: what ``metrics/<variant>.json`` holds) says
    whether higher is better and what the number is. It is one artifact, not a tag per metric: some 600
    ``direction.*`` / ``ideal.*`` / ``description.*`` tags buried the run's Overview page (its description
    and its run-level tags) under a wall of chips. A metric that could not be computed (no valid items) has
    no value to log; its record says so (``value`` null, ``note``).

    With ``model_id`` (a :func:`variant_model`) the values are also the logged model's metrics (the UI's
    *Models* tab and ``mlflow.search_logged_models``); the CI bounds stay on the run only.
    """
    mlflow = _mlflow()
    flat: dict[str, float] = {}
    records: dict[str, dict[str, Any]] = {}
    for name, mv in metrics.items():
        key = _metric_key(name)
        if mv.value is None or not math.isfinite(mv.value):
            records[key] = {"value": None, "direction": mv.direction, "ideal": mv.ideal,
                            "note": "metric could not be computed (no valid items)"}
            continue
        flat[key] = float(mv.value)
        if mv.ci_low is not None and mv.ci_high is not None:
            flat[f"{key}.ci_low"] = float(mv.ci_low)
            flat[f"{key}.ci_high"] = float(mv.ci_high)
        records[key] = {"value": float(mv.value), "direction": mv.direction, "ideal": mv.ideal,
                        "ci_low": _finite(mv.ci_low), "ci_high": _finite(mv.ci_high), "n": mv.n,
                        "description": mv.description}
    bounds = {k: v for k, v in flat.items() if k.endswith((".ci_low", ".ci_high"))}
    values = {k: v for k, v in flat.items() if k not in bounds}
    if values:
        mlflow.log_metrics(values, model_id=model_id)
    if bounds:
        mlflow.log_metrics(bounds)
    if records:
        mlflow.log_dict(records, METRICS_ARTIFACT)


def _finite(x: float | None) -> float | None:
    """``x`` as a float, or None where it is missing or not finite (strict JSON has no NaN)."""
    return float(x) if x is not None and math.isfinite(x) else None


def log_series(name: str, values: list[tuple[int, float]]) -> None:
    """A training curve: ``(step, value)`` points."""
    mlflow = _mlflow()
    for step, value in values:
        mlflow.log_metric(_metric_key(name), float(value), step=int(step))


def log_metric(name: str, value: float, step: int | None = None) -> None:
    _mlflow().log_metric(_metric_key(name), float(value), step=step)


def log_table(frame: Any, artifact_file: str) -> None:
    """A per-item predictions table, browsable in the MLflow UI (``artifact_file`` ends in .json)."""
    _mlflow().log_table(data=frame, artifact_file=artifact_file)


def _redacted(node: Any) -> Any:
    """A copy of a JSON-like tree with every string passed through :func:`~biaslab.tracking.credentials.redact`."""
    if isinstance(node, str):
        return redact(node)
    if isinstance(node, Mapping):
        return {k: _redacted(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [_redacted(v) for v in node]
    return node


def log_dict(data: Mapping[str, Any], artifact_file: str) -> None:
    _mlflow().log_dict(_redacted(dict(data)), artifact_file)


def log_text(text: str, artifact_file: str) -> None:
    _mlflow().log_text(redact(text), artifact_file)


def log_figure(figure: Any, artifact_file: str) -> None:
    _mlflow().log_figure(figure, artifact_file)


def log_artifact(path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
    p = Path(path)
    if p.is_dir():
        _mlflow().log_artifacts(str(p), artifact_path=artifact_path)
    else:
        _mlflow().log_artifact(str(p), artifact_path=artifact_path)


def log_datasets(datasets: Iterable[Any]) -> None:
    """Log :class:`biaslab.tracking.datasets.DatasetRef` s as MLflow dataset inputs of the active run.

    Each becomes a dataset with the DVC digest as its digest and the ref's source and context (a table as a
    ``PandasDataset``, so MLflow records its schema and row count; a folder as a ``MetaDataset``), so the
    runs table's *Dataset* column shows which data version the run used.
    """
    import warnings

    mlflow = _mlflow()
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.http_dataset_source import HTTPDatasetSource
    from mlflow.data.meta_dataset import MetaDataset

    logged, contexts, tags = [], [], []
    for ref in datasets:
        if ref.source.startswith(("http://", "https://")):
            source = HTTPDatasetSource(ref.source)
        else:
            with warnings.catch_warnings():  # a local path matches several registered local sources
                warnings.simplefilter("ignore")
                source = resolve_dataset_source(ref.source)
        if ref.frame is not None:
            with warnings.catch_warnings():  # schema inference's hint about integer columns is for model inputs
                warnings.simplefilter("ignore", UserWarning)
                dataset = mlflow.data.from_pandas(ref.frame, source=source, name=ref.name, digest=ref.digest)
        else:
            dataset = MetaDataset(source, name=ref.name, digest=ref.digest)
        logged.append(dataset)
        contexts.append(ref.context)
        tags.append(_safe_tags(ref.tags) or None)
    if not logged:
        return
    with warnings.catch_warnings():  # the schema (computed when logged) hints about integer columns of model inputs
        warnings.simplefilter("ignore", UserWarning)
        with access.refusals():
            mlflow.log_inputs(datasets=logged, contexts=contexts, tags_list=tags)


# --------------------------------------------------------------------------- variants as MLflow 3 logged models
VARIANT_MODEL_TYPE = "biaslab-variant"
MODEL_VERSIONS_TAG = "mlflow.modelVersions"  # a logged model's registered versions, as MLflow's UI reads them
VERSION_MODEL_TAG = "model_id"  # a registered version's logged model (MLflow's SQL registry drops model_id)


def variant_model(variant: str, *, tags: Mapping[str, Any] | None = None,
                  params: Mapping[str, Any] | None = None) -> str:
    """A ``LoggedModel`` for one evaluated variant, output of the active run; returns its ``model_id``.

    External (``mlflow.create_external_model``): the weights stay where DVC keeps them and the registry
    holds the servable package, so the logged model carries only identity (name = the variant, tags such as
    the model fingerprint, the variant's params) and, through :func:`log_metric_values` with its id, the
    evaluation metrics. It is recorded as the run's model output, so the run's *Models* column shows it.
    """
    mlflow = _mlflow()
    from mlflow.entities import LoggedModelOutput

    run = mlflow.active_run()
    with access.refusals():
        model = mlflow.create_external_model(name=variant, model_type=VARIANT_MODEL_TYPE,
                                             tags=_safe_tags({"variant": variant, **(tags or {})}),
                                             params=_flat_params(params or {}))
        if run is not None:
            mlflow.MlflowClient().log_outputs(run.info.run_id, [LoggedModelOutput(model.model_id, step=0)])
    return model.model_id


def run_model_id(run_id: str) -> str | None:
    """The logged model a run produced (its newest model output), or ``None`` (a run from before logged models,
    or one this store does not have)."""
    from mlflow.exceptions import MlflowException

    with access.refusals():
        try:
            run = _mlflow().MlflowClient().get_run(run_id)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
            return None
    outputs = run.outputs.model_outputs if run.outputs else []
    return outputs[-1].model_id if outputs else None


def link_version(model_name: str, version: str, model_id: str) -> None:
    """Point registered ``version`` at logged model ``model_id`` and list the version on the model.

    MLflow 3.17's SQL registry store does not keep a version's ``model_id`` (its table has no such column),
    so the link is a version tag (:data:`VERSION_MODEL_TAG`) plus the ``mlflow.modelVersions`` tag of the
    logged model, which the UI's *Models* tab reads (what ``mlflow.register_model`` writes too).
    """
    import json

    client = _mlflow().MlflowClient()
    with access.refusals():
        client.set_model_version_tag(model_name, version, VERSION_MODEL_TAG, model_id)
        listed = json.loads(client.get_logged_model(model_id).tags.get(MODEL_VERSIONS_TAG) or "[]")
        entry = {"name": model_name, "version": str(version)}
        if entry not in listed:
            client.set_logged_model_tags(model_id, {MODEL_VERSIONS_TAG: json.dumps([*listed, entry])})


def metric_history(run_id: str, keys: Iterable[str]) -> dict[str, list[tuple[int, float]]]:
    """``{key: [(step, value), ...]}`` of a run's metrics named in ``keys`` (a key ending in ``_`` or ``/``
    is a prefix: ``val/ppl_`` = every language), for the keys the run has."""
    client = _mlflow().MlflowClient()
    wanted = tuple(keys)
    with access.refusals():
        logged = sorted(client.get_run(run_id).data.metrics)
        chosen = [k for k in logged if any(k == w or (w.endswith(("_", "/")) and k.startswith(w)) for w in wanted)]
        return {k: [(m.step, m.value) for m in client.get_metric_history(run_id, k)] for k in chosen}


def active_run_id() -> str | None:
    run = _mlflow().active_run()
    return run.info.run_id if run else None
