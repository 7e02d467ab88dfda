"""The champion copy: the approved files, copied where only the promoter writes, with the promoter's manifest.

``MlflowClient.copy_model_version`` is not used: it creates a version whose ``source`` is
``models:/<candidates>/<n>``, a pointer back to the worker's run, so a worker could still rewrite the served
bytes. Instead :func:`copy_to_champion` uploads the files the promoter has just verified as artifacts of the
gate's record run (a run of the promotions experiment: only promoters may write there), with a new
``biaslab_manifest.json`` (every file's sha256, the version it came from, the gate's inputs), logs that
manifest's sha256 as a param of the record run (never changeable), checks the upload, and registers the
copy as a version of ``registry.champion_model`` (workers: READ) with alias ``champion``.

:func:`champion_files` downloads the champion and recomputes every hash against that manifest: what
``biaslab promote --verify`` and ``biaslab serve champion`` run; the pyfunc loader checks the manifest of
the directory it loads (:mod:`biaslab.serving.manifest`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biaslab.config import Params
from biaslab.registry.package import file_manifest, verify_logged

CHAMPION = "champion"
ARTIFACT_PATH = "champion"  # the copy, under the record run's artifacts


def ensure_champion_model(client: Any, name: str) -> None:
    """Create the champion model if missing (a local store; on a team server the admin created it)."""
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        from biaslab.tracking.team import CHAMPION_DESCRIPTION

        try:
            client.create_registered_model(name, description=CHAMPION_DESCRIPTION)
        except MlflowException as created:
            if created.error_code != "RESOURCE_ALREADY_EXISTS":
                raise


def copy_to_champion(client: Any, params: Params, decision: Any, package: Path, registration: dict[str, str],
                     known: dict[str, str] | None = None) -> str:
    """Upload the verified ``package`` into the record run, register it in the champion model, move the alias;
    returns the champion model's version. ``known``: sha256 of files of ``package`` the promoter has verified
    already (:func:`biaslab.registry.package_check.build_champion`), not read again for the manifests; the
    upload is read back in full whatever they say (``verify_logged``)."""
    from biaslab.serving.manifest import MANIFEST_FILE, read_manifest, write_manifest
    from biaslab.tracking import access

    model = params.registry.champion_model
    run_id = decision.record_run_id
    manifest_sha256 = write_manifest(
        package, known, role="champion", variant=decision.variant, record_run_id=run_id, gate_inputs=decision.gate_inputs,
        source={"registered_model": decision.model_name, "version": decision.version,
                "content_hash": registration["content_hash"], "manifest_sha256": registration["manifest_sha256"]})
    with access.naming(experiment=params.registry.promotions_experiment), access.refusals():
        client.log_artifacts(run_id, str(package), ARTIFACT_PATH)
        client.log_param(run_id, "manifest_sha256", manifest_sha256)
        verify_logged(client, run_id, ARTIFACT_PATH,
                      file_manifest(package, {**read_manifest(package)["files"], MANIFEST_FILE: manifest_sha256}))
    source = client.get_run(run_id).info.artifact_uri.rstrip("/") + "/" + ARTIFACT_PATH
    tags = {"variant": decision.variant, "content_hash": registration["content_hash"],
            "source_model": decision.model_name, "source_version": decision.version,
            "manifest_sha256": manifest_sha256, "record_run_id": run_id}
    with access.naming(registered_model=model), access.refusals():
        ensure_champion_model(client, model)
        mv = client.create_model_version(model, source, run_id=run_id, tags=tags,
                                         description=f"{decision.variant}: copy of {decision.model_name} "
                                                     f"version {decision.version}, approved by the gate")
        client.set_registered_model_alias(model, CHAMPION, mv.version)
        client.set_tag(run_id, "promotion.champion_version", str(mv.version))
    return str(mv.version)


def champion_files(client: Any, mv: Any, record: Any, dst: str | Path) -> list[str]:
    """Download the champion version ``mv`` into ``dst`` and check it against its record run ``record``.

    Returns the problems (empty: the files are the promoter's, hash for hash)."""
    from biaslab.serving.manifest import PackageIntegrityError, verify_package

    expected = record.info.artifact_uri.rstrip("/") + "/" + ARTIFACT_PATH
    if (mv.source or "").rstrip("/") != expected:
        return [f"version {mv.version}'s files are at {mv.source}, not in its gate record's copy {expected}"]
    recorded = record.data.params.get("manifest_sha256")
    if not recorded:
        return [f"gate record {record.info.run_id} logged no manifest hash; the copy is incomplete"]
    local = Path(client.download_artifacts(record.info.run_id, ARTIFACT_PATH, str(dst)))
    try:
        verify_package(local, recorded)
    except PackageIntegrityError as exc:
        return [str(exc)]
    return []
