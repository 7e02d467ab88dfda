"""The record of the promotion gate, and the check that the current ``champion`` is what the gate approved.

``biaslab promote`` writes every decision as a run of its own in the *promotions experiment*
(``registry.promotions_experiment``), where on a team server only promoters may write; an approval also
copies the version's files into that run and registers the copy as a version of ``registry.
champion_model`` (:mod:`biaslab.registry.champion`), which workers may only read. :func:`verify_champion`
checks the champion model's ``champion``:

* its version was created from a gate record (its run is an ``approved`` record of the promotions
  experiment, its files are that record's copy);
* the newest record for the candidate version it came from still approves it (a later refusal means the
  gate no longer passes it);
* with ``files_to``: every file, downloaded and hashed again, is the one in the promoter's manifest, and
  that manifest is the one whose sha256 the record logged as a param (MLflow never changes a logged param).

Version tags (``promotion.*``) are written too, for the registry page, but they are not evidence: anyone
with EDIT on the candidates can write them. ``mlflow`` is imported inside functions.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from biaslab.config import Params

CHAMPION = "champion"
RECORD_TAG = "biaslab.promotion"  # marks a run of the promotions experiment as a gate record
_PREFIX = "promotion."


def promotions_experiment_id(client: Any, name: str, *, create: bool) -> str | None:
    """The id of the promotions experiment ``name``; created when missing and ``create`` (a local store)."""
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    if not create:
        return None
    from mlflow.exceptions import MlflowException

    from biaslab.tracking.runs import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG

    try:
        return client.create_experiment(name, tags={EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})
    except MlflowException:
        experiment = client.get_experiment_by_name(name)
        if experiment is None:  # not a race with another process: re-raise (a 403 names the permission)
            raise
        return experiment.experiment_id


GATE_CONDITIONS = "gate_conditions.json"  # artifact of a record: the gate's conditions; their sha256 a param


def gate_conditions(params: Params) -> dict[str, Any]:
    """The gate's conditions a record was decided under: ``registry.gate``, its bootstrap and spill-over setting,
    and the package and evidence checks (``biaslab promote`` on a team server, or what a local store skips)."""
    registry = params.registry
    return {"gate": [c.model_dump(mode="json") for c in registry.gate],
            "bootstrap": registry.bootstrap.model_dump(mode="json"), "spill_over": registry.spill_over,
            "evaluations_experiment": registry.evaluations_experiment,
            "package_checks": ["registered_bytes", "kind", "mlmodel", "evaluated_bytes", "content_hash", "base_pin",
                               "base registered_bytes", "base evaluated_bytes"],
            "evidence_checks": ["evaluator_runs", "same_items"]}


def _json_sha256(body: Any) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def load_champion(params: Params, workdir: str | Path | None = None) -> Any:
    """The champion as a ``python_function`` model, verified against the promoter's record first: the documented
    way to load it in Python (docs/serving.md). The files are downloaded into ``workdir`` (default: a new temporary
    folder, left for the loaded model's lifetime), every file hashed against the manifest whose sha256 is a param of
    the gate record (a hash from outside the package), the ``MLmodel`` checked to name biaslab's loader and nothing
    else, and that verified copy is what loads. ``mlflow.pyfunc.load_model("models:/<champion>@champion")`` checks
    the package against its own manifest only: unverified."""
    import tempfile

    import mlflow.pyfunc
    from mlflow import MlflowClient

    from biaslab.registry.errors import RegistryError
    from biaslab.registry.package_check import mlmodel_problems

    folder = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="biaslab-champion-"))
    check = verify_champion(MlflowClient(), params, files_to=folder)
    if check.version is None:
        raise RegistryError(f"no @{CHAMPION} on {check.model_name}; promote a variant first (`biaslab promote`)")
    problems = check.problems or mlmodel_problems(check.local_dir)
    if problems:
        raise RegistryError(f"refusing to load {check.model_name} version {check.version}: " + "; ".join(problems))
    return mlflow.pyfunc.load_model(str(check.local_dir))


def record_tags(decision: Any, version: Any) -> dict[str, str]:
    """The tags of one gate record: what was decided, about which bytes, on which evidence."""
    evidence = [{k: v for k, v in asdict(r).items() if v is not None} for r in decision.results]
    return {
        RECORD_TAG: "1",
        f"{_PREFIX}model_name": decision.model_name,
        f"{_PREFIX}version": str(decision.version),
        f"{_PREFIX}run_id": version.run_id or "",  # the registering run: names the bytes even after a rename
        f"{_PREFIX}variant": decision.variant,
        f"{_PREFIX}decision": "approved" if decision.approved else "refused",
        f"{_PREFIX}timestamp": decision.timestamp,
        f"{_PREFIX}content_hash": version.tags.get("content_hash", ""),
        f"{_PREFIX}model_fingerprint": version.tags.get("model_fingerprint", ""),
        f"{_PREFIX}reasons": "; ".join(decision.reasons)[:5000],
        f"{_PREFIX}evidence": json.dumps(evidence, sort_keys=True)[:5000],
    }


def write_record(client: Any, params: Params, decision: Any, version: Any, *, create: bool = True) -> str:
    """Log ``decision`` as a finished run of the promotions experiment; returns its run id."""
    from biaslab.tracking import access

    name = params.registry.promotions_experiment
    with access.naming(experiment=name), access.refusals():  # converted here, while the names are these
        experiment_id = promotions_experiment_id(client, name, create=create)
        if experiment_id is None:
            from biaslab.registry.errors import RegistryError

            raise RegistryError(f"promotions experiment {name!r} does not exist on the tracking server; "
                              "an admin creates it with `biaslab team setup`")
        run = client.create_run(experiment_id, run_name=f"promote@{decision.variant} v{decision.version}",
                                tags=record_tags(decision, version))
        client.log_metric(run.info.run_id, "approved", 1.0 if decision.approved else 0.0)
        conditions = gate_conditions(params)  # what the gate asked, as run (the promoter's params.yaml)
        client.log_dict(run.info.run_id, conditions, GATE_CONDITIONS)
        client.log_param(run.info.run_id, "gate_conditions_sha256", _json_sha256(conditions))
        client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


@dataclass
class ChampionCheck:
    """What :func:`verify_champion` found: the champion, the gate record it was copied by, and the problems."""

    model_name: str  # registry.champion_model
    version: str | None  # None: no champion
    variant: str | None = None
    source: str | None = None  # "<candidates model> version <n>": what was approved
    record_run_id: str | None = None
    record_decision: str | None = None
    record_time: str | None = None
    record_user: str | None = None
    local_dir: Path | None = None  # with files_to: the verified files
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.version is not None and not self.problems


def _records(client: Any, experiment_id: str, model_name: str, version: str, run_id: str) -> list[Any]:
    """The gate records of one registration (model, version and the run that registered it), newest first."""
    flt = (f"tags.`{RECORD_TAG}` = '1' and tags.`{_PREFIX}model_name` = '{model_name}' "
           f"and tags.`{_PREFIX}version` = '{version}' and tags.`{_PREFIX}run_id` = '{run_id}'")
    runs = client.search_runs([experiment_id], filter_string=flt, max_results=1000)
    return sorted(runs, key=lambda r: (r.info.start_time or 0, r.data.tags.get(f"{_PREFIX}timestamp", "")),
                  reverse=True)


def verify_champion(client: Any, params: Params, *, files_to: str | Path | None = None) -> ChampionCheck:
    """Check the ``champion`` of ``registry.champion_model`` (see the module doc); ``files_to``: also download
    its files there and recompute every hash."""
    from mlflow.exceptions import MlflowException

    from biaslab.registry.champion import ARTIFACT_PATH, champion_files
    from biaslab.tracking import access

    model_name = params.registry.champion_model
    with access.naming(registered_model=model_name), access.refusals():
        try:
            mv = client.get_model_version_by_alias(model_name, CHAMPION)
        except MlflowException as exc:
            if access.is_refusal(exc):
                raise
            return ChampionCheck(model_name, None)
    check = ChampionCheck(model_name, str(mv.version), variant=mv.tags.get("variant"))
    experiments = params.registry.promotions_experiment
    with access.naming(experiment=experiments), access.refusals():
        experiment_id = promotions_experiment_id(client, experiments, create=False)
        try:
            record = client.get_run(mv.run_id) if mv.run_id else None
        except MlflowException:
            record = None
        tags = record.data.tags if record is not None else {}
        if record is None or record.info.experiment_id != experiment_id or tags.get(RECORD_TAG) != "1":
            check.problems.append(f"no gate record: version {check.version} of {model_name} was not created by "
                                  f"`biaslab promote` (its run {mv.run_id or '(none)'} is no record of experiment "
                                  f"{experiments!r})")
            return check
        check.record_run_id, check.record_user = record.info.run_id, record.info.user_id or None
        check.record_decision, check.record_time = tags.get(f"{_PREFIX}decision"), tags.get(f"{_PREFIX}timestamp")
        source_model, source_version = tags.get(f"{_PREFIX}model_name", ""), tags.get(f"{_PREFIX}version", "")
        check.source = f"{source_model} version {source_version}"
        if check.record_decision != "approved":
            check.problems.append(f"gate record {record.info.run_id} of version {check.version} refused it")
        newest = _records(client, experiment_id, source_model, source_version, tags.get(f"{_PREFIX}run_id", ""))[:1]
        if newest and newest[0].info.run_id != record.info.run_id and \
                newest[0].data.tags.get(f"{_PREFIX}decision") != "approved":
            check.problems.append(f"the newest gate record of {check.source} ({newest[0].data.tags.get(f'{_PREFIX}timestamp')}) "
                                  "refused it")
    if files_to is not None:
        with access.naming(experiment=experiments), access.refusals():
            check.problems += champion_files(client, mv, record, files_to)
        check.local_dir = Path(files_to) / ARTIFACT_PATH
    return check
