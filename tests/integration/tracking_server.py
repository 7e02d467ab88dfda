"""``mlflow server`` on loopback for the server tests: plain, or with MLflow's basic-auth app.

:func:`running_server` starts ``<venv>/bin/mlflow server`` on a free 127.0.0.1 port with the given backend
store and a proxied artifact root under ``workdir``, waits for ``/health``, yields the URL and stops the
server (also when the test fails). With ``auth=AuthSettings(...)`` it runs ``--app-name basic-auth`` with
an auth config written the way docker-compose.yml's ``mlflow-auth`` config is (the auth store is its own
database), the admin's password and the secret key in the server's environment only, and the security
middleware's allowed hosts set as the compose file sets them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

START_TIMEOUT_S = 300  # slow to start on a loaded 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class AuthSettings:
    """What docker-compose.yml gives the basic-auth app (test values, never real secrets)."""

    database_uri: str  # the auth store (a database of its own)
    admin_password: str
    secret_key: str = "test-only-csrf-secret-key"
    default_permission: str = "READ"
    allowed_hosts: str = "mlflow:5000,localhost:*,127.0.0.1:*"
    auth_cache_ttl_seconds: int = 60  # as docker-compose.yml: a credential's scrypt check once a minute, not per request

    def ini(self) -> str:
        return ("[mlflow]\n"
                f"default_permission = {self.default_permission}\n"
                f"database_uri = {self.database_uri}\n"
                "admin_username = admin\n"
                "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
                "grant_default_workspace_access = false\n"
                f"auth_cache_ttl_seconds = {self.auth_cache_ttl_seconds}\n")


@contextlib.contextmanager
def running_server(workdir: Path, backend_store: str, *, auth: AuthSettings | None = None) -> Iterator[str]:
    """A started ``mlflow server`` (its log: ``workdir/server.log``); yields ``http://127.0.0.1:<port>``."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    command = [str(mlflow_bin), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
               "--backend-store-uri", backend_store, "--artifacts-destination", str(workdir / "artifacts")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_TRACKING_", "MLFLOW_AUTH_"))}
    if auth is not None:
        (workdir / "basic_auth.ini").write_text(auth.ini(), encoding="utf-8")
        command[2:2] = ["--app-name", "basic-auth"]
        env |= {"MLFLOW_AUTH_CONFIG_PATH": str(workdir / "basic_auth.ini"),
                "MLFLOW_AUTH_ADMIN_PASSWORD": auth.admin_password,
                "MLFLOW_FLASK_SERVER_SECRET_KEY": auth.secret_key,
                "MLFLOW_SERVER_ALLOWED_HOSTS": auth.allowed_hosts,
                "MLFLOW_SERVER_X_FRAME_OPTIONS": "SAMEORIGIN"}
    log = workdir / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=workdir, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + START_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"mlflow server exited at start-up:\n{log.read_text(errors='replace')[-3000:]}")
                if time.time() > deadline:
                    pytest.fail(f"mlflow server not healthy in {START_TIMEOUT_S} s:\n"
                                f"{log.read_text(errors='replace')[-3000:]}")
                time.sleep(0.5)
        yield url
    finally:
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """Terminate a test server, killing it if it has not exited within 30 s."""
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
