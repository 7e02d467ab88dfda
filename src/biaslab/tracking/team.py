"""Roles on a shared tracking server (``mlflow server --app-name basic-auth``), and what MLflow enforces.

Two roles, granted per resource with MLflow's own permissions (READ < USE < EDIT < MANAGE):

======================  =================================  =================================
resource                ``worker`` (runs ``dvc repro``)    ``promoter`` (runs ``biaslab promote``)
======================  =================================  =================================
experiment (runs)       EDIT: create runs, log to them     READ
registered model        EDIT: create versions, tag them,   EDIT: tag the decision, set
                        set ``candidate``                  ``champion``
promotions experiment   READ                               EDIT: write the gate's record
======================  =================================  =================================

What MLflow 3.17 enforces, read from ``mlflow/server/auth/__init__.py``: ``CreateModelVersion`` and
``SetRegisteredModelAlias`` both need *update* (EDIT) on the registered model, and there is no
permission per alias. So a worker able to register versions can also move ``champion``; MLflow alone
cannot stop it. Neither can it tell who set an alias (aliases carry no author or history, a model
version's ``user_id`` is empty and a run's is whatever the client claims). The guard is therefore
detection: ``biaslab promote`` writes each gate decision as a run in the *promotions experiment*, where
only promoters can write, and ``biaslab promote --verify`` (and ``biaslab variants``) flag a champion
that no such record approves (:mod:`biaslab.registry`). What MLflow does enforce: nobody without EDIT
writes runs or versions at all, workers cannot delete versions or the model (MANAGE), and workers cannot
forge a gate record.

The resources are created by the admin (:func:`create_resources`) *before* any worker starts: MLflow
gives the creator of an experiment or registered model MANAGE on it, so a worker that created the
promotions experiment could write records into it. :func:`grant_role` replaces whatever grant the user
had on the three resources (a creator's MANAGE included) with the role's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from biaslab.config import ConfigError, Params

WORKER, PROMOTER = "worker", "promoter"
MODEL_DESCRIPTION = "biaslab variants: one version per (variant, content). Aliases: candidate, champion."


@dataclass(frozen=True)
class Grant:
    """One permission of a role: ``permission`` on the resource of ``resource_type`` named by ``resource``."""

    resource_type: str  # MLflow's: "experiment" | "registered_model"
    resource: str  # which one: "runs" (tracking.experiment), "promotions" (registry.promotions_experiment),
    # "model" (registry.model_name)
    permission: str  # "READ" | "EDIT" | "MANAGE"


ROLES: dict[str, tuple[Grant, ...]] = {
    WORKER: (Grant("experiment", "runs", "EDIT"), Grant("registered_model", "model", "EDIT"),
             Grant("experiment", "promotions", "READ")),
    PROMOTER: (Grant("experiment", "runs", "READ"), Grant("registered_model", "model", "EDIT"),
               Grant("experiment", "promotions", "EDIT")),
}


@dataclass(frozen=True)
class Resources:
    """The three resources a team shares, as MLflow names them in grants (experiments by id)."""

    experiment_id: str
    promotions_experiment_id: str
    model_name: str

    def resource_id(self, grant: Grant) -> str:
        return {"runs": self.experiment_id, "promotions": self.promotions_experiment_id,
                "model": self.model_name}[grant.resource]


def _ensure_experiment(client: Any, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    return client.create_experiment(name)  # no artifact location: the server's own (proxied) root


def create_resources(client: Any, params: Params) -> Resources:
    """As the admin: the experiment, the promotions experiment and the registered model, if missing."""
    from mlflow.exceptions import MlflowException

    from biaslab.tracking.runs import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG

    experiment_id = _ensure_experiment(client, params.tracking.experiment)
    promotions_id = _ensure_experiment(client, params.registry.promotions_experiment)
    for eid in (experiment_id, promotions_id):  # the UI opens both on their runs table (model development)
        if client.get_experiment(eid).tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
            client.set_experiment_tag(eid, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    try:
        client.get_registered_model(params.registry.model_name)
    except MlflowException:
        client.create_registered_model(params.registry.model_name, description=MODEL_DESCRIPTION)
    return Resources(experiment_id, promotions_id, params.registry.model_name)


def ensure_user(auth: Any, username: str, password: str | None) -> bool:
    """Create ``username`` unless it exists; returns whether it was created. A new user needs a password."""
    from mlflow.exceptions import MlflowException

    try:
        auth.get_user(username)
        return False
    except MlflowException as exc:
        if exc.get_http_status_code() != 404:
            raise
    if not password:
        raise ConfigError(f"user {username!r} does not exist on the tracking server; give a password to create it")
    auth.create_user(username, password)
    return True


def grant_role(auth: Any, username: str, role: str, resources: Resources) -> list[tuple[str, str, str]]:
    """Give ``username`` exactly the role's permission on each shared resource; returns what was granted."""
    from mlflow.exceptions import MlflowException

    if role not in ROLES:
        raise ConfigError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
    granted = []
    for grant in ROLES[role]:
        resource_id = resources.resource_id(grant)
        try:
            auth.grant_user_permission(username, grant.resource_type, resource_id, grant.permission)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            # replace, never keep, an earlier grant (e.g. the MANAGE MLflow gives a resource's creator)
            auth.revoke_user_permission(username, grant.resource_type, resource_id)
            auth.grant_user_permission(username, grant.resource_type, resource_id, grant.permission)
        granted.append((grant.resource_type, resource_id, grant.permission))
    return granted


def auth_client(tracking_uri: str) -> Any:
    """MLflow's client of the basic-auth app (user and permission management) for ``tracking_uri``."""
    import warnings

    with warnings.catch_warnings():  # importing mlflow.server: a Starlette deprecation notice, not the user's
        warnings.simplefilter("ignore", DeprecationWarning)
        from mlflow.server import get_app_client

        return get_app_client("basic-auth", tracking_uri=tracking_uri)
