"""A tracking server's 401/403, said in one line: who was refused, what they tried, which permission it needs.

MLflow's client reports a refusal as ``MlflowException`` (``API request to endpoint /api/2.0/mlflow/
registered-models/alias failed with error code 403 != 200. Response body: 'Permission denied'``) or, for
an artifact upload or download through the server's proxy, as ``requests.HTTPError``. Neither names the
experiment or model, nor the permission. :func:`explain` turns either into :class:`AccessDenied`, whose
message names them:

    user 'worker' may not set aliases of registered model 'biaslab-debiased' on http://127.0.0.1:5000:
    that needs EDIT on it (an admin grants it; README "Team server")

The REST endpoint says what was attempted and which permission MLflow's basic-auth app checks for it
(the table below, read from ``BEFORE_REQUEST_HANDLERS`` in ``mlflow/server/auth/__init__.py``); the names
come from :func:`name_resources`, which :func:`biaslab.tracking.runs.configure` and the registry call with the
experiment and registered model they work on. :func:`refusals` converts inside a block.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterator
from typing import Any

from biaslab.tracking.credentials import PASSWORD_ENV, TOKEN_ENV, USERNAME_ENV, current_username, redact
from biaslab.errors import BiaslabError


class AccessDenied(BiaslabError, RuntimeError):
    """The tracking server refused a request (401: who are you; 403: you may not).

    A :class:`~biaslab.errors.BiaslabError`: a stage reports it as one line, without a traceback."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


# (path pattern after /api/2.0/ or /ajax-api/2.0/, resource kind, permission MLflow checks, what it does)
_ENDPOINTS: list[tuple[re.Pattern[str], str | None, str, str]] = [
    (re.compile(p), kind, permission, what) for p, kind, permission, what in [
        (r"^mlflow/runs/create$", "experiment", "EDIT", "create runs in"),
        (r"^mlflow/runs/(update|log-metric|log-parameter|log-batch|set-tag|delete-tag|log-inputs|log-outputs"
         r"|log-model)$", "experiment", "EDIT", "log to runs of"),
        (r"^mlflow/runs/(delete|restore)$", "experiment", "MANAGE", "delete runs of"),
        (r"^mlflow/(runs/(get|search)|metrics/get-history|artifacts/list)$", "experiment", "READ", "read runs of"),
        (r"^mlflow/experiments/(update|set-experiment-tag|delete-experiment-tag)$", "experiment", "EDIT",
         "change"),
        (r"^mlflow/experiments/(delete|restore)$", "experiment", "MANAGE", "delete"),
        (r"^mlflow/experiments/create$", None, "USE", "create experiments"),
        (r"^mlflow/experiments/", "experiment", "READ", "read"),
        (r"^mlflow/logged-models", "experiment", "EDIT", "log models to"),
        (r"^mlflow/model-versions/create$", "registered_model", "EDIT", "create versions of"),
        (r"^mlflow/model-versions/(set-tag|delete-tag|update|transition-stage)$", "registered_model", "EDIT",
         "tag versions of"),
        (r"^mlflow/registered-models/alias$", "registered_model", "EDIT", "set aliases of"),
        (r"^mlflow/(registered-models/set-tag|registered-models/delete-tag|registered-models/update"
         r"|registered-models/rename)$", "registered_model", "EDIT", "change"),
        (r"^mlflow/(registered-models|model-versions)/delete$", "registered_model", "MANAGE", "delete"),
        (r"^mlflow/registered-models/create$", None, "USE", "create registered models"),
        (r"^mlflow/(registered-models|model-versions)/", "registered_model", "READ", "read"),
        (r"^mlflow/users/", None, "admin", "manage users and permissions"),
    ]
]
_KIND_WORDS = {"experiment": "experiment", "registered_model": "registered model"}
_ENDPOINT_IN_MESSAGE = re.compile(r"endpoint (\S+) failed with error code (\d{3})")
_API_PREFIX = re.compile(r"^/?(?:ajax-)?api/2\.0/")

_names: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("biaslab_access_names", default={})


def name_resources(**names: str) -> None:
    """Remember which ``experiment`` / ``registered_model`` the coming requests are about (for messages)."""
    _names.set({**_names.get(), **names})


@contextlib.contextmanager
def naming(**names: str) -> Iterator[None]:
    """Within the block, refusals name these resources (e.g. the promotions experiment instead of the runs')."""
    token = _names.set({**_names.get(), **names})
    try:
        yield
    finally:
        _names.reset(token)


def _status_and_request(exc: BaseException) -> tuple[int | None, str | None, str | None]:
    """(HTTP status, request path, method) of an MLflow or requests error, where it says."""
    try:
        from mlflow.exceptions import MlflowException
    except ImportError:  # pragma: no cover - MLflow is a locked dependency
        MlflowException = ()  # type: ignore[assignment]  # noqa: N806
    if MlflowException and isinstance(exc, MlflowException):
        status = exc.get_http_status_code()
        found = _ENDPOINT_IN_MESSAGE.search(str(exc))
        return status, (found.group(1) if found else None), None
    try:
        import requests
    except ImportError:  # pragma: no cover
        return None, None, None
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        request = exc.request or exc.response.request
        path = requests.utils.urlparse(request.url).path if request is not None and request.url else None
        return exc.response.status_code, path, request.method if request is not None else None
    return None, None, None


def _describe_endpoint(path: str | None, method: str | None) -> tuple[str | None, str, str]:
    """(resource kind, permission, what it does) for a REST path; a generic answer when unknown."""
    if path:
        if "mlflow-artifacts/" in path:
            if method in (None, "PUT", "POST"):
                return "experiment", "EDIT", "upload artifacts to runs of" if method else "read or write artifacts of"
            return "experiment", "READ", "download artifacts of"
        api_path = _API_PREFIX.sub("", path)
        for pattern, kind, permission, what in _ENDPOINTS:
            if pattern.search(api_path):
                return kind, permission, what
    return None, "a permission", f"call {path or 'this endpoint'}"  # "that needs a permission"


def explain(exc: BaseException, tracking_uri: str | None = None) -> AccessDenied | None:
    """The :class:`AccessDenied` for a 401/403 from the tracking server, or ``None`` for any other error."""
    status, path, method = _status_and_request(exc)
    if status not in (401, 403):
        return None
    if tracking_uri is None:
        with contextlib.suppress(Exception):
            import mlflow

            tracking_uri = mlflow.get_tracking_uri()
    server = f" on {redact(tracking_uri)}" if tracking_uri else ""
    user = current_username()
    if status == 401:
        who = (f"the server does not accept the credentials of user {user!r} (wrong password, or no such user)"
               if user else f"no credentials: set {USERNAME_ENV} and {PASSWORD_ENV} (or {TOKEN_ENV})")
        return AccessDenied(f"not authenticated{server}: {who}", 401)
    kind, permission, what = _describe_endpoint(path, method)
    if permission == "admin":
        return AccessDenied(f"user {user or '(anonymous)'!r} may not {what}{server}: only MLflow's admin may", 403)
    if kind is None:
        target, needs = what, f"that needs {permission}"
    else:
        name = _names.get().get(kind)
        target = f"{what} {_KIND_WORDS[kind]}" + (f" {name!r}" if name else "")
        needs = f"that needs {permission} on it"
    return AccessDenied(f"user {user or '(anonymous)'!r} may not {target}{server}: {needs} "
                        "(an admin grants it; README \"Team server\")", 403)


@contextlib.contextmanager
def refusals(tracking_uri: str | None = None) -> Iterator[None]:
    """Within the block, a 401/403 from the tracking server is raised as :class:`AccessDenied`."""
    try:
        yield
    except AccessDenied:
        raise
    except Exception as exc:  # noqa: BLE001 - only 401/403 are converted; everything else is re-raised as is
        denied = explain(exc, tracking_uri)
        if denied is None:
            raise
        raise denied from exc


def is_refusal(exc: Any) -> bool:
    """Whether ``exc`` is a 401/403 of the tracking server (converted or not)."""
    return isinstance(exc, AccessDenied) or _status_and_request(exc)[0] in (401, 403)
