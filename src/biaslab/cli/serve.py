"""``biaslab serve``: the ``mlflow models serve`` command for a registered version, and how to call it.

``champion`` is the champion model's version, verified file by file before it is served
(:func:`verified_champion`). Another *target* is a variant of ``params.yaml`` (its registered version: ``runs/register.json``, else the newest
version tagged with it), a version number, or an alias (``champion``, ``candidate``). The server runs
in the current environment (``--env-manager local``: biaslab's loader must be importable) with
``MLFLOW_TRACKING_URI`` pointing at the project's store, so an overlay's pinned base resolves there.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biaslab.errors import BiaslabError


class ServeTargetError(BiaslabError):
    """The target names no registered version."""


def resolve_target(client: Any, model_name: str, target: str, variants: list[str],
                   register_json: Path | None = None) -> tuple[str, str]:
    """``(model URI, version)`` of ``target``: a variant name, a version number, or an alias."""
    from mlflow.exceptions import MlflowException

    from biaslab.registry import RegistryError, find_variant_version

    if target in variants:
        try:
            mv = find_variant_version(client, model_name, target, register_json)
        except RegistryError as exc:
            raise ServeTargetError(str(exc)) from None
        return f"models:/{model_name}/{mv.version}", str(mv.version)
    try:
        if target.isdigit():
            mv = client.get_model_version(model_name, target)
            return f"models:/{model_name}/{mv.version}", str(mv.version)
        mv = client.get_model_version_by_alias(model_name, target)
    except MlflowException:
        raise ServeTargetError(
            f"{target!r} is no variant of params.yaml ({', '.join(variants)}), no version and no alias of "
            f"registered model {model_name!r}; run `dvc repro register` (and `biaslab promote <variant>` for "
            "@champion)") from None
    return f"models:/{model_name}@{target}", str(mv.version)


def verified_champion(client: Any, params: Any, workdir: str) -> tuple[str, str]:
    """``(local directory, version)`` of the champion model's ``champion``, downloaded into ``workdir`` and
    checked (:func:`biaslab.registry.promotions.verify_champion` with every file's hash): the bytes served
    are the bytes just verified. Any problem is a :class:`ServeTargetError` listing them."""
    from biaslab.registry import promotions

    check = promotions.verify_champion(client, params, files_to=workdir)
    if check.version is None:
        raise ServeTargetError(f"no @{promotions.CHAMPION} on {check.model_name}; promote a variant first "
                               "(`biaslab promote <variant>`, as the promoter)")
    if not check.ok:
        raise ServeTargetError(f"refusing to serve {check.model_name} version {check.version}: "
                               + "; ".join(check.problems))
    refuse_foreign_code(check.local_dir, f"{check.model_name} version {check.version}")
    return str(check.local_dir), check.version


def refuse_foreign_code(local_dir: Any, what: str) -> None:
    """Refuse to serve a package whose ``MLmodel`` would run anything but biaslab's loader (another
    ``loader_module``, ``code``, a pickled ``python_model``, ``model_code_path``, ``artifacts``, ``data``):
    ``mlflow models serve`` imports what the ``MLmodel`` names before biaslab's checks could run."""
    from biaslab.registry.package_check import mlmodel_problems

    problems = mlmodel_problems(Path(local_dir))
    if problems:
        raise ServeTargetError(f"refusing to serve {what}: " + "; ".join(problems))


def downloaded_version(model_uri: str, what: str, workdir: str) -> str:
    """A candidate version (``models:/…``) downloaded into ``workdir``, its files checked against its own manifest
    and its ``MLmodel`` against :func:`refuse_foreign_code`; the local directory is what is served. A candidate's
    manifest is its registrant's: this says the files are whole, not that anyone approved them."""
    import mlflow

    from biaslab.serving.manifest import PackageIntegrityError, verify_package

    local = mlflow.artifacts.download_artifacts(artifact_uri=model_uri, dst_path=str(Path(workdir) / "version"))
    try:
        verify_package(local)
    except PackageIntegrityError as exc:
        raise ServeTargetError(f"refusing to serve {what}: {exc}") from None
    refuse_foreign_code(local, what)
    return str(local)


def serve_target(params: Any, target: str, root: Path, workdir: str) -> tuple[str, str, str]:
    """``(registered model, model URI or verified local directory, version)`` of ``target``."""
    from mlflow import MlflowClient

    from biaslab.registry import REGISTER_JSON

    if target == "champion":
        uri, version = verified_champion(MlflowClient(), params, workdir)
        return params.registry.champion_model, uri, version
    uri, version = resolve_target(MlflowClient(), params.registry.model_name, target, list(params.variants),
                                  root / REGISTER_JSON)
    local = downloaded_version(uri, f"{params.registry.model_name} version {version}", workdir)
    return params.registry.model_name, local, version


def serve_command(model_uri: str, host: str = "127.0.0.1", port: int = 5001) -> list[str]:
    """``mlflow models serve`` of ``model_uri`` in this environment."""
    return [sys.executable, "-m", "mlflow", "models", "serve", "-m", model_uri, "--env-manager", "local",
            "-h", host, "-p", str(port)]


def serve_env(environ: Mapping[str, str], **extra: str) -> dict[str, str]:
    """The environment for :func:`serve_command`: ``environ`` plus ``extra``, with this interpreter's
    ``bin`` directory first on ``PATH``.

    MLflow starts the scoring server with ``exec uvicorn …`` through the shell, so ``uvicorn`` must be on
    ``PATH``; run as ``.venv/bin/biaslab serve`` (or ``.venv/bin/python -m pytest``) without an activated
    virtualenv it is not, and the server dies with "uvicorn: not found"."""
    bin_dir = str(Path(sys.executable).parent)
    path = environ.get("PATH", "")
    return {**environ, **extra, "PATH": os.pathsep.join([bin_dir, path]) if path else bin_dir}


def describe_serving(name: str, uri: str, version: str, command: list[str], env: Mapping[str, str], host: str,
                     port: int, *, kept: str | None) -> list[str]:
    """What ``biaslab serve`` prints: the version, the command, a curl example; ``kept``: the folder of the checked
    copy when the command is only printed (``--print-command``): it is left in place for that command."""
    lines = [f"{name} version {version}: {uri}",
             f"MLFLOW_TRACKING_URI={env['MLFLOW_TRACKING_URI']} {shlex.join(command)}",
             f"then: {curl_example(host, port)}"]
    if kept:
        lines.append(f"the checked copy stays in {kept} for that command; remove the folder when done")
    return lines


def example_request(masked: bool = False) -> dict[str, Any]:
    """A request body for ``/invocations`` in MLflow's ``dataframe_records`` form."""
    if masked:
        return {"dataframe_records": [{"sentence": "The nurse said that she would come."}]}
    return {
        "dataframe_records": [
            {"context": "The nurse said that", "continuation": " she"},
            {"context": "The nurse said that", "continuation": " he"},
            {"prompt": "The doctor said that"},
        ],
        "params": {"max_new_tokens": 10},
    }


def curl_example(host: str = "127.0.0.1", port: int = 5001, masked: bool = False) -> str:
    """The ``curl`` line that sends :func:`example_request` to a running server."""
    body = json.dumps(example_request(masked), ensure_ascii=False)
    return (f"curl -s http://{host}:{port}/invocations -H 'Content-Type: application/json' "
            f"-d {shlex.quote(body)}")
