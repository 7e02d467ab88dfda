"""A variant directory (``models/<variant>/``): what makes up a model, its manifest, its fingerprint.

A variant directory is one of two kinds (:func:`kind`):

* ``"full"`` - a complete model (``config.json`` + ``*.safetensors`` + tokenizer): the base model,
  an embedding-edited checkpoint (``embedding_apply: checkpoint``), a gate control;
* ``"overlay"`` - ``variant.json`` (the manifest, :func:`write_manifest`) naming the ``base`` model
  directory it applies to, plus a LoRA adapter (``adapter_config.json``), edited embedding rows
  (``embedding_rows.safetensors``) and/or a runtime embedding hook (``embedding_hook.safetensors``).

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
import time
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


HASHED = {"bytes": 0, "files": 0, "cache_hits": 0}
"""What :func:`fingerprint_dir` read in this process (bytes and files hashed, cache hits): the measurement
of ``docs/bytes.md`` and the tests' proof that a cached fingerprint reads nothing."""


def _file_chunks(file: Path):
    with file.open("rb") as fh:
        yield from iter(lambda: fh.read(1 << 20), b"")


def fingerprint_dir(path: str | os.PathLike[str], *, besides: frozenset[str] = frozenset(),
                    verify: bool = False) -> str:
    """A content hash of a directory's fingerprinted model files (paths and bytes): its identity.

    ``besides``: names of files at the top of ``path`` that are not the model's (a registered package's own
    files around a checkpoint stored at its root), left out so the package's checkpoint hashes as its source.

    The value is remembered under the files' stat signature (:mod:`biaslab.outputs.fingerprint_cache`): a
    directory whose files did not change is not read again. ``verify=True`` reads every byte whatever the
    cache says (and refreshes it): for a check that must prove the content, not find it (registry, promote)."""
    from biaslab.outputs import fingerprint_cache

    path = Path(path)
    files = [f for f in model_files(path, metadata=False) if not (f.parent == path and f.name in besides)]
    key, stable = fingerprint_cache.signature(path, files, extra=",".join(sorted(besides)))
    if not verify and (cached := fingerprint_cache.lookup(key)) is not None:
        HASHED["cache_hits"] += 1
        return cached
    if not stable and fingerprint_cache.worth_settling(files):  # just written and large: wait (<= 2 s), then
        time.sleep(fingerprint_cache.settle_seconds(files))     # read once and remember it for the next stage
        key, stable = fingerprint_cache.signature(path, files, extra=",".join(sorted(besides)))
    digest, nbytes = hashlib.sha256(), 0
    for file in files:
        digest.update(str(file.relative_to(path)).encode())
        for chunk in _file_chunks(file):
            digest.update(chunk)
            nbytes += len(chunk)
    HASHED["bytes"] += nbytes
    HASHED["files"] += len(files)
    fingerprint = digest.hexdigest()[:16]
    # a file written while it was read changes the signature: remember only what was read as it is now
    if stable and fingerprint_cache.signature(path, files, extra=",".join(sorted(besides)))[0] == key:
        fingerprint_cache.store(key, path, fingerprint, nbytes)
    return fingerprint


def overlay_fingerprint(base_fingerprint: str, overlay_dir: str | os.PathLike[str], own: str | None = None) -> str:
    """The identity of an overlay applied to its base: both fingerprints hashed together.

    ``own``: the overlay directory's :func:`fingerprint_dir` when the caller has it already."""
    own = fingerprint_dir(overlay_dir) if own is None else own
    return hashlib.sha256((base_fingerprint + own).encode()).hexdigest()[:16]


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


class ResolvedVariant:
    """A variant directory read once: its manifest, its files, its base, its fingerprints (each computed once).

    What evaluate loads (:func:`biaslab.models.load.load_variant_model` takes it) and what register and promote
    can hash: one object per directory instead of each step reading ``variant.json`` and hashing the
    checkpoint again. Build it with :func:`resolve`.

    * ``manifest``: ``variant.json`` (``None``: a full model, or no directory);
    * ``base``: an overlay's base directory, resolved the same way (``None`` for a full model, and for a base
      that is not a local directory - a hub id, which the loader fingerprints by its commit);
    * ``files``: the model files (:func:`model_files`), what a package holds;
    * ``own_fingerprint``: :func:`fingerprint_dir` of this directory alone;
    * ``fingerprint``: the identity of the model it loads - a full model's own fingerprint, an overlay's
      :func:`overlay_fingerprint` on its base's.
    """

    def __init__(self, directory: str | os.PathLike[str], manifest: dict[str, Any] | None,
                 base: ResolvedVariant | None = None, base_ref: str | None = None):
        self.directory = Path(directory)
        self.manifest = manifest
        self.base = base
        self.base_ref = base_ref  # the manifest's ``base`` as written (a path or a hub id)
        self._files: list[Path] | None = None
        self._own: str | None = None

    def __repr__(self) -> str:
        return f"ResolvedVariant({str(self.directory)!r}, kind={self.kind!r}, base={self.base_ref!r})"

    @property
    def kind(self) -> Kind | None:
        return "overlay" if self.manifest is not None else kind(self.directory)

    @property
    def skipped(self) -> str | None:
        """The manifest's ``skipped`` reason (:func:`skip_reason`)."""
        return None if self.manifest is None else self.manifest.get("skipped")

    @property
    def files(self) -> list[Path]:
        if self._files is None:
            self._files = model_files(self.directory)
        return self._files

    @property
    def own_fingerprint(self) -> str:
        if self._own is None:
            self._own = fingerprint_dir(self.directory)
        return self._own

    @property
    def fingerprint(self) -> str:
        if self.manifest is None:
            return self.own_fingerprint
        if self.base is None:
            raise VariantDirError(f"{self.directory}: its base {self.base_ref!r} is not a local directory; "
                                  "its fingerprint is known once the base is loaded")
        return overlay_fingerprint(self.base.fingerprint, self.directory, own=self.own_fingerprint)


def resolve(directory: str | os.PathLike[str], root: str | os.PathLike[str] = ".",
            manifest: Any = ...) -> ResolvedVariant:
    """Read ``directory``'s manifest once and resolve its base (relative to ``root``): a :class:`ResolvedVariant`.

    Nothing is hashed here; the fingerprints are computed on first use and then kept. ``manifest``: the
    directory's :func:`read_manifest` when the caller has it."""
    directory = Path(directory)
    if manifest is ...:
        manifest = read_manifest(directory)
    if manifest is None:
        return ResolvedVariant(directory, None)
    ref = str(manifest["base"])
    base_path = Path(ref) if Path(ref).is_absolute() else Path(root) / ref
    base = ResolvedVariant(base_path, None) if base_path.is_dir() else None  # a base is a full model
    return ResolvedVariant(directory, manifest, base, ref)
