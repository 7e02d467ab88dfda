"""Credentials for a tracking server: MLflow reads them, biaslab never stores or prints them.

biaslab has no credential settings of its own. The MLflow client sends what it finds in
``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` (HTTP basic auth, what ``mlflow server
--app-name basic-auth`` checks; MLflow also reads them from ``~/.mlflow/credentials``) or
``MLFLOW_TRACKING_TOKEN`` (a bearer token, for servers behind a token-checking proxy). This module keeps
them out of everything biaslab writes:

* :func:`check_tracking_uri` refuses a tracking URI that carries a password (``http://user:pw@host``):
  a URI is printed in logs and process lists, and it would bypass MLflow's own credential lookup.
* :func:`redact` masks the password of any ``scheme://user:<password>@host`` URL (a PostgreSQL URL of
  the Optuna storage, say) and the current value of every secret variable below, in any text biaslab
  logs as a param, tag or artifact, or prints in an error line.

Nothing here imports MLflow at module import time.
"""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from biaslab.config import ConfigError

USERNAME_ENV = "MLFLOW_TRACKING_USERNAME"
PASSWORD_ENV = "MLFLOW_TRACKING_PASSWORD"
TOKEN_ENV = "MLFLOW_TRACKING_TOKEN"
# variables whose values are secrets wherever they show up (the tracking client's, the server admin's,
# the Hugging Face hub's, an object store's)
SECRET_ENVS = (PASSWORD_ENV, TOKEN_ENV, "MLFLOW_AUTH_ADMIN_PASSWORD", "MLFLOW_FLASK_SERVER_SECRET_KEY",
               "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
MASK = "***"
_MIN_SECRET_LENGTH = 4  # shorter values would mask ordinary text; MLflow itself requires longer passwords
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)(?P<password>[^@\s/]+)(?=@)")


class CredentialsInUriError(ConfigError):
    """A tracking URI with ``user:password@`` in it (use the MLflow variables instead)."""


def current_username() -> str | None:
    """The user MLflow authenticates as (``MLFLOW_TRACKING_USERNAME`` or ``~/.mlflow/credentials``), if any."""
    from mlflow.utils.credentials import read_mlflow_creds

    return read_mlflow_creds().username or None


def _secret_values() -> list[str]:
    values = [os.environ.get(name, "") for name in SECRET_ENVS]
    try:
        from mlflow.utils.credentials import read_mlflow_creds

        values.append(read_mlflow_creds().password or "")  # also the one from ~/.mlflow/credentials
    except Exception:  # noqa: BLE001 - an unreadable credentials file is MLflow's error to report, not ours
        pass
    # longest first, so a secret that contains another one is masked whole
    return sorted({v for v in values if len(v) >= _MIN_SECRET_LENGTH}, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with URL passwords and the values of the secret variables replaced by ``***``."""
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)
    for secret in _secret_values():
        text = text.replace(secret, MASK)
    return text


def check_tracking_uri(uri: str) -> str:
    """``uri`` unchanged, or :class:`CredentialsInUriError` when it embeds a password."""
    if "://" in uri:
        parts = urlsplit(uri)
        if parts.password is not None:
            raise CredentialsInUriError(
                f"tracking URI {redact(uri)!r} carries a password: remove 'user:password@' and set "
                f"{USERNAME_ENV} and {PASSWORD_ENV} (or {TOKEN_ENV}) instead - MLflow sends them, and a URI "
                "shows up in logs and process lists"
            )
    return uri
