"""The record of the promotion gate, and the check that the current ``champion`` has one.

MLflow has no permission per alias: whoever may create versions of the registered model (EDIT) may also
move ``champion``, and an alias keeps no author or history (:mod:`biaslab.tracking.team`). So ``biaslab promote``
writes every decision as a run of its own in the *promotions experiment* (``registry.
promotions_experiment``), where on a team server only promoters may write, and :func:`verify_champion`
checks the champion against those records:

* the champion's version has an ``approved`` record (a champion set by hand has none);
* the newest record for that version approves it (a later refusal means the gate no longer passes it);
* the record's ``content_hash`` and ``model_fingerprint`` are the version's (a record of other bytes does
  not approve these).

Version tags (``promotion.*``) are written too, for the registry page, but they are not evidence: anyone
with EDIT on the model can write them. ``mlflow`` is imported inside functions.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
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


def record_tags(decision: Any, version: Any) -> dict[str, str]:
    """The tags of one gate record: what was decided, about which bytes, on which evidence."""
    evidence = [{k: v for k, v in asdict(r).items() if v is not None} for r in decision.results]
    return {
        RECORD_TAG: "1",
        f"{_PREFIX}model_name": decision.model_name,
        f"{_PREFIX}version": str(decision.version),
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
        client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


@dataclass
class ChampionCheck:
    """What :func:`verify_champion` found: the champion, its newest gate record, and the problems."""

    model_name: str
    version: str | None  # None: no champion
    variant: str | None = None
    record_run_id: str | None = None
    record_decision: str | None = None
    record_time: str | None = None
    record_user: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.version is not None and not self.problems


def _records(client: Any, experiment_id: str, model_name: str, version: str) -> list[Any]:
    flt = (f"tags.`{RECORD_TAG}` = '1' and tags.`{_PREFIX}model_name` = '{model_name}' "
           f"and tags.`{_PREFIX}version` = '{version}'")
    runs = client.search_runs([experiment_id], filter_string=flt, max_results=1000)
    return sorted(runs, key=lambda r: (r.info.start_time or 0, r.data.tags.get(f"{_PREFIX}timestamp", "")),
                  reverse=True)


def verify_champion(client: Any, params: Params) -> ChampionCheck:
    """Check that the ``champion`` of ``registry.model_name`` is a version the gate approved (see module doc)."""
    from mlflow.exceptions import MlflowException

    from biaslab.tracking import access

    model_name = params.registry.model_name
    with access.naming(registered_model=model_name), access.refusals():
        try:
            mv = client.get_model_version_by_alias(model_name, CHAMPION)
        except MlflowException as exc:
            if access.is_refusal(exc):
                raise
            return ChampionCheck(model_name, None)
    check = ChampionCheck(model_name, str(mv.version), variant=mv.tags.get("variant"))
    with access.naming(experiment=params.registry.promotions_experiment), access.refusals():
        experiment_id = promotions_experiment_id(client, params.registry.promotions_experiment, create=False)
        records = _records(client, experiment_id, model_name, check.version) if experiment_id else []
    if not records:
        check.problems.append(f"no gate record: version {check.version} became @{CHAMPION} without "
                              f"`biaslab promote` (nothing in experiment {params.registry.promotions_experiment!r})")
        return check
    newest = records[0]
    tags = newest.data.tags
    check.record_run_id = newest.info.run_id
    check.record_decision = tags.get(f"{_PREFIX}decision")
    check.record_time = tags.get(f"{_PREFIX}timestamp")
    check.record_user = newest.info.user_id or None
    if check.record_decision != "approved":
        approved_before = any(r.data.tags.get(f"{_PREFIX}decision") == "approved" for r in records[1:])
        check.problems.append(f"the newest gate record of version {check.version} ({check.record_time}) refused it"
                              + ("; an older one approved it" if approved_before else "; none approved it"))
    for key in ("content_hash", "model_fingerprint"):
        recorded, current = tags.get(f"{_PREFIX}{key}", ""), mv.tags.get(key, "")
        if recorded != current:
            check.problems.append(f"version {check.version}'s {key} is {current or '(none)'!r}, the gate "
                                  f"approved {recorded or '(none)'!r}")
    return check
