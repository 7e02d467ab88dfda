"""A package's manifest: every file's sha256, written into the package, checked by recomputing.

``biaslab_manifest.json`` at a package's root lists every other file of the package with its sha256
(``{"files": {"<posix path>": "<sha256>"}, ...}`` plus what its writer adds: the promoter records the gate's
inputs there). The register stage writes one into every package it uploads; ``biaslab promote`` writes its
own into the champion copy. :func:`verify_package` recomputes every file's hash and compares: a changed,
missing or extra file is refused, naming it. The manifest's own sha256 is recorded where its writer's
readers cannot rewrite it (a param of the run that uploaded the package: MLflow never changes a logged
param), so a rewritten manifest is caught too when the caller passes ``expected_sha256``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biaslab.errors import BiaslabError

MANIFEST_FILE = "biaslab_manifest.json"
# what MLflow itself writes into a model's folder when it loads ``models:/<name>/<version>`` (the name and
# version, read by nobody that builds the model): not part of any package, so not hashed
MLFLOW_LOAD_FILES = ("registered_model_meta",)


class PackageIntegrityError(BiaslabError):
    """A package's files are not the ones its manifest lists (or it has no manifest)."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_hashes(package: str | Path, known: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{posix path: sha256}`` of every file under ``package`` except the manifest itself (and MLflow's
    :data:`MLFLOW_LOAD_FILES`). ``known``: values the writer of ``package`` computed from these very files
    (its copy check), used instead of reading the file again."""
    package = Path(package)
    skipped = (MANIFEST_FILE, *MLFLOW_LOAD_FILES)
    known = known or {}
    hashes = {}
    for p in sorted(package.rglob("*")):
        rel = p.relative_to(package).as_posix()
        if p.is_file() and rel not in skipped:
            hashes[rel] = known.get(rel) or sha256_file(p)
    return hashes


def write_manifest(package: str | Path, known: Mapping[str, str] | None = None, **extra: Any) -> str:
    """Hash every file of ``package`` into its ``biaslab_manifest.json`` (plus ``extra``; ``known``: see
    :func:`file_hashes`); returns the manifest's sha256."""
    package = Path(package)
    body = {"files": file_hashes(package, known), **extra}
    path = package / MANIFEST_FILE
    path.write_text(json.dumps(body, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return sha256_file(path)


def read_manifest(package: str | Path) -> dict[str, Any]:
    path = Path(package) / MANIFEST_FILE
    if not path.is_file():
        raise PackageIntegrityError(f"{package}: no {MANIFEST_FILE}; not a verified biaslab package (register it again "
                                    "with `dvc repro register`, promote it again with `biaslab promote`)")
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackageIntegrityError(f"{path}: not a readable manifest ({exc})") from None
    if not isinstance(body, dict) or not isinstance(body.get("files"), dict):
        raise PackageIntegrityError(f"{path}: no 'files' mapping")
    return body


def verify_package(package: str | Path, expected_sha256: str | None = None) -> dict[str, Any]:
    """Recompute every file's sha256 and compare with the manifest; returns the manifest.

    ``expected_sha256``: the manifest's own hash as recorded by its writer; a different manifest is refused.
    Raises :class:`PackageIntegrityError` naming the first files that differ, are missing or are not listed.
    """
    package = Path(package)
    links = sorted(p.relative_to(package).as_posix() for p in package.rglob("*") if p.is_symlink())
    if links:
        raise PackageIntegrityError(f"{package}: symbolic links {links[:5]} in the package; files must lie inside it")
    body = read_manifest(package)
    if expected_sha256 is not None:
        found = sha256_file(package / MANIFEST_FILE)
        if found != expected_sha256:
            raise PackageIntegrityError(f"{package / MANIFEST_FILE}: sha256 {found} is not the recorded {expected_sha256}; "
                                        "the manifest was rewritten after it was recorded")
    listed: dict[str, str] = body["files"]
    present = file_hashes(package)
    changed = sorted(p for p in listed if p in present and present[p] != listed[p])
    missing = sorted(set(listed) - set(present))
    extra = sorted(set(present) - set(listed))
    problems = ([f"{p} changed (sha256 {present[p][:12]}…, manifest {listed[p][:12]}…)" for p in changed]
                + [f"{p} missing" for p in missing] + [f"{p} not in the manifest" for p in extra])
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise PackageIntegrityError(f"{package}: files differ from {MANIFEST_FILE}: {shown}; refusing to load")
    return body

