"""A variant directory (``models/<variant>/``): what makes up a model, its manifest, its fingerprint.

A variant directory is one of two kinds (:func:`kind`):

* ``"full"`` - a complete model (``config.json`` + ``*.safetensors`` + tokenizer): the base model,
  an embedding-edited checkpoint;
* ``"overlay"`` - ``variant.json`` (the manifest, :func:`write_manifest`) naming the ``base`` model
  directory it applies to, plus a LoRA adapter (``adapter_config.json``) and/or a runtime embedding
  hook (``embedding_hook.safetensors``).

A manifest with ``"skipped": "<reason>"`` and no model files records that the variant's mitigation does
not apply to this base model (LoRA on a masked LM, :mod:`biaslab.mitigation.applicability`): evaluation,
registry and report read :func:`skip_reason` and carry the reason instead of loading a model.

The *model files* (:func:`model_files`) are every file except hidden ones, trainer checkpoints
(``checkpoint-*``) and :data:`NOT_MODEL_FILES`. They are what the registry packages. The
*fingerprint* (:func:`fingerprint_dir`) hashes the model files except :data:`METADATA_FILES`
(human-readable reports that do not change the model), so re-running a stage that produces the same
weights gives the same fingerprint, and the same registry version. (Before this module the fingerprint
and the registry each had their own list; they differed on files inside hidden folders, which only the
fingerprint counted. Directories the pipeline writes have none, so their fingerprints are unchanged.)
Not to be confused with :func:`biaslab.models.weights.files.model_files`: the whitelist of files copied *into*
a model directory from a foreign checkpoint (hub snapshot, byte copy of the base); this module says what
a directory the pipeline wrote *consists of*.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

from biaslab.errors import BiaslabError

MANIFEST = "variant.json"
NOT_MODEL_FILES = frozenset({"run.json", "README.md"})
"""Never part of a model: a stage's run record, a hub model card."""
METADATA_FILES = frozenset({"training_summary.json", "snapshot.json", "edit_report.json"})
"""Packaged with the model (provenance), but not part of its identity (the fingerprint)."""

Kind = Literal["full", "overlay"]


class VariantDirError(BiaslabError):
    """A variant directory is missing, or its manifest is malformed."""


def model_files(directory: str | os.PathLike[str], *, metadata: bool = True) -> list[Path]:
    """The files that make up the model in ``directory``, sorted (``metadata=False``: the fingerprinted set)."""
    directory = Path(directory)
    excluded = NOT_MODEL_FILES if metadata else NOT_MODEL_FILES | METADATA_FILES
    found = []
    for path in directory.rglob("*"):
        rel = path.relative_to(directory)
        if not path.is_file() or any(part.startswith(".") for part in rel.parts):
            continue
        if path.name in excluded or "checkpoint-" in str(rel):
            continue
        found.append(path)
    return sorted(found)


def fingerprint_dir(path: str | os.PathLike[str], *, besides: frozenset[str] = frozenset()) -> str:
    """A content hash of a directory's fingerprinted model files (paths and bytes): its identity.

    ``besides``: names of files at the top of ``path`` that are not the model's (a registered package's own
    files around a checkpoint stored at its root), left out so the package's checkpoint hashes as its source."""
    path = Path(path)
    digest = hashlib.sha256()
    for file in model_files(path, metadata=False):
        if file.parent == path and file.name in besides:
            continue
        digest.update(str(file.relative_to(path)).encode())
        with file.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def overlay_fingerprint(base_fingerprint: str, overlay_dir: str | os.PathLike[str]) -> str:
    """The identity of an overlay applied to its base: both fingerprints hashed together."""
    return hashlib.sha256((base_fingerprint + fingerprint_dir(overlay_dir)).encode()).hexdigest()[:16]


def kind(directory: str | os.PathLike[str]) -> Kind | None:
    """``"overlay"`` (has ``variant.json``), ``"full"`` (has ``config.json``), or ``None`` (neither / missing)."""
    directory = Path(directory)
    if (directory / MANIFEST).is_file():
        return "overlay"
    if (directory / "config.json").is_file():
        return "full"
    return None


def write_manifest(directory: str | os.PathLike[str], *, base: str, method: str, **fields: Any) -> Path:
    """Write ``variant.json`` ``{"base", "method", **fields}`` into ``directory`` (an ``atomic_dir`` being built).

    ``base`` should be relative to the project root, so the variant loads from any checkout.
    """
    path = Path(directory) / MANIFEST
    manifest = {"base": base, "method": method, **fields}
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``variant.json`` of ``directory`` (``None`` for a full model); it must name its ``base``."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise VariantDirError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict) or "base" not in manifest:
        raise VariantDirError(f"{path}: no 'base' key naming the base model directory")
    return manifest


def skip_reason(directory: str | os.PathLike[str]) -> str | None:
    """Why the variant in ``directory`` was not built (its manifest's ``skipped``); ``None`` for a built variant."""
    manifest = read_manifest(directory)
    return None if manifest is None else manifest.get("skipped")


def variant_skip_reason(variant, root: str | os.PathLike[str] = ".", manifest: Any = ...) -> str | None:
    """Why ``variant`` (a :class:`biaslab.config.VariantConfig`) has no model; ``None`` when it has one.

    A prompt variant is never skipped: it shares its base model's directory, whose manifest (if any)
    speaks for the base. Any other variant is skipped when its own directory says so (:func:`skip_reason`).
    ``manifest``: the directory's :func:`read_manifest`, when the caller has read it already (it reads it
    once and passes it on to the model loader too).
    """
    if variant.method == "prompt":
        return None
    if manifest is ...:
        manifest = read_manifest(Path(root) / variant.model_dir)
    return None if manifest is None else manifest.get("skipped")


def base_dir(directory: str | os.PathLike[str], root: str | os.PathLike[str] = ".") -> Path | None:
    """The base model directory of an overlay (relative ``base`` resolved against ``root``), else ``None``."""
    manifest = read_manifest(directory)
    if manifest is None:
        return None
    base = Path(manifest["base"])
    return (base if base.is_absolute() else Path(root) / base).resolve()
