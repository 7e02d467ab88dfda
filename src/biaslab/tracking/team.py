"""Roles on a shared tracking server (``mlflow server --app-name basic-auth``), and what MLflow enforces.

Two roles, granted per resource with MLflow's own permissions (READ < USE < EDIT < MANAGE):

======================  =================================  =================================
resource                ``worker`` (runs ``dvc repro``)    ``promoter`` (runs ``biaslab promote``)
======================  =================================  =================================
experiment (runs)       EDIT: create runs, log to them     READ
registered model        EDIT: create versions, tag them,   EDIT: tag the decision
(candidates)            set ``candidate``
champion model          READ                               EDIT: register the approved copy,
                                                           set ``champion``
promotions experiment   READ                               EDIT: write the gate's record and
                                                           the copy of the approved files
======================  =================================  =================================

What MLflow 3.17 enforces, read from ``mlflow/server/auth/__init__.py``: ``CreateModelVersion``,
``SetRegisteredModelAlias`` and ``RenameRegisteredModel`` need *update* (EDIT) on the registered model,
there is no permission per alias, and whoever creates a model gets MANAGE on it. So on the candidates
model a worker can do anything but delete; that is why the champion lives elsewhere: ``biaslab promote``
copies the approved files into a run of the promotions experiment and registers that copy in the champion
model (``registry.champion_model``), both of which workers may only read - they cannot overwrite the
files, add a version, move ``champion`` or rename the model away (:mod:`biaslab.registry.champion`).

The resources are created by the admin (:func:`create_resources`) *before* any worker starts: a worker
that created the promotions experiment or the champion model would hold MANAGE on it. :func:`grant_role`
replaces whatever grant the user had on the four resources (a creator's MANAGE included) with the role's.

"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from biaslab.config import ConfigError, Params

WORKER, PROMOTER, EVALUATOR = "worker", "promoter", "evaluator"
MODEL_DESCRIPTION = "biaslab variants: one version per (variant, content). Alias: candidate."
CHAMPION_DESCRIPTION = "biaslab champions: copies of approved versions, written by `biaslab promote` only. Alias: champion."


@dataclass(frozen=True)
class Grant:
    """One permission of a role: ``permission`` on the resource of ``resource_type`` named by ``resource``."""

    resource_type: str  # MLflow's: "experiment" | "registered_model"
    resource: str  # which one: "runs" (tracking.experiment), "promotions" (registry.promotions_experiment),
    # "model" (registry.model_name), "champion" (registry.champion_model)
    permission: str  # "READ" | "EDIT" | "MANAGE"


ROLES: dict[str, tuple[Grant, ...]] = {
    WORKER: (Grant("experiment", "runs", "EDIT"), Grant("registered_model", "model", "EDIT"),
             Grant("experiment", "promotions", "READ"), Grant("registered_model", "champion", "READ"),
             Grant("experiment", "evaluations", "READ")),
    PROMOTER: (Grant("experiment", "runs", "READ"), Grant("registered_model", "model", "EDIT"),
               Grant("experiment", "promotions", "EDIT"), Grant("registered_model", "champion", "EDIT"),
               Grant("experiment", "evaluations", "READ")),
    # the credentials of the job that evaluates for the gate (CI, the promoter's evaluation job): its evaluate runs
    # live where no worker writes, and are the only evidence `biaslab promote` accepts on a team server
    EVALUATOR: (Grant("experiment", "runs", "READ"), Grant("registered_model", "model", "READ"),
                Grant("experiment", "promotions", "READ"), Grant("registered_model", "champion", "READ"),
                Grant("experiment", "evaluations", "EDIT")),
}


@dataclass(frozen=True)
class Resources:
    """The four resources a team shares, as MLflow names them in grants (experiments by id)."""

    experiment_id: str
    promotions_experiment_id: str
    model_name: str
    champion_model: str
    evaluations_experiment_id: str

    def resource_id(self, grant: Grant) -> str:
        return {"runs": self.experiment_id, "promotions": self.promotions_experiment_id,
                "model": self.model_name, "champion": self.champion_model,
                "evaluations": self.evaluations_experiment_id}[grant.resource]


def _ensure_experiment(client: Any, name: str, existing: set[str]) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        existing.add(name)
        return experiment.experiment_id
    return client.create_experiment(name)  # no artifact location: the server's own (proxied) root


def create_resources(client: Any, params: Params, existing: set[str] | None = None) -> Resources:
    """As the admin: the experiments (runs, promotions, evaluations), the candidates and the champion model, if
    missing; ``existing`` collects the names of those that were there already (see :func:`adoption_problems`)."""
    from mlflow.exceptions import MlflowException

    from biaslab.tracking.runs import EXPERIMENT_KIND, EXPERIMENT_KIND_TAG

    existing = set() if existing is None else existing
    experiment_id = _ensure_experiment(client, params.tracking.experiment, existing)
    promotions_id = _ensure_experiment(client, params.registry.promotions_experiment, existing)
    evaluations_id = _ensure_experiment(client, params.registry.evaluations_experiment, existing)
    for eid in (experiment_id, promotions_id, evaluations_id):  # the UI opens them on their runs table
        if client.get_experiment(eid).tags.get(EXPERIMENT_KIND_TAG) != EXPERIMENT_KIND:
            client.set_experiment_tag(eid, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    for name, description in ((params.registry.model_name, MODEL_DESCRIPTION),
                              (params.registry.champion_model, CHAMPION_DESCRIPTION)):
        try:
            client.get_registered_model(name)
            existing.add(name)
        except MlflowException:
            client.create_registered_model(name, description=description)
    return Resources(experiment_id, promotions_id, params.registry.model_name, params.registry.champion_model,
                     evaluations_id)


# what only promoters and evaluators write: a worker that created one of them first would hold MANAGE on it
GUARDED = (Grant("experiment", "promotions", "EDIT"), Grant("experiment", "evaluations", "EDIT"),
           Grant("registered_model", "champion", "EDIT"))


def require_admin(auth: Any, tracking_uri: str) -> None:
    """Refuse, as MLflow would at the first admin-only call, unless the caller is MLflow's admin: setup reads every
    user's grants (:func:`adoption_problems`), which a non-admin may partly see."""
    from biaslab.tracking import access
    from biaslab.tracking.credentials import current_username, redact

    user = current_username()
    if not user or not getattr(auth.get_user(user), "is_admin", False):
        raise access.AccessDenied(f"user {user or '(anonymous)'!r} may not manage users and permissions on "
                                  f"{redact(tracking_uri)}: only MLflow's admin may", 403)


def _users(auth: Any) -> list[dict[str, Any]]:
    """Every user of the server (MLflow's ``GET users/list``, admin only; its client has no call for it)."""
    from mlflow.server.auth.routes import LIST_USERS

    return list(auth._request(LIST_USERS, "GET").get("users") or [])


def adoption_problems(client: Any, auth: Any, resources: Resources, names: dict[str, str],
                      existing: set[str]) -> list[str]:
    """Why setup must not adopt a promotions experiment, evaluations experiment or champion model it found already
    there (empty: it may): an experiment whose artifacts are not in the server's proxied store (``mlflow-artifacts:``,
    where every write passes MLflow's permission check) or any non-admin user holding MANAGE on it (MLflow gives a
    resource's creator MANAGE; setup never grants it). ``names``: resource key -> its name (for the message)."""
    problems = []
    users = None
    for grant in GUARDED:
        name = names[grant.resource]
        if name not in existing:
            continue
        resource_id = resources.resource_id(grant)
        what = f"{grant.resource_type.replace('_', ' ')} {name!r}"
        if grant.resource_type == "experiment":
            location = (client.get_experiment(resource_id).artifact_location or "").rstrip("/")
            if location != f"mlflow-artifacts:/{resource_id}":
                problems.append(f"{what} stores its artifacts at {location!r}, not in the server's proxied store "
                                f"(mlflow-artifacts:/{resource_id})")
        users = _users(auth) if users is None else users
        for user in users:
            if user.get("is_admin"):
                continue
            found = auth.get_user_permission(user["username"], grant.resource_type, resource_id).permission
            if found == "MANAGE":
                problems.append(f"{what}: user {user['username']!r} holds MANAGE on it (it created it, or was "
                                "granted it)")
    return problems


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
