"""The base an overlay or prompt version is built on: pinned at registration, resolved at load time.

An overlay (LoRA adapter, embedding hook) or prompt version stores no base weights. Its ``biaslab``
flavour names the base's registered version - ``registered_model``, ``version`` and that version's
``content_hash`` tag - and :func:`resolve_base` finds it in the registry the loading process talks to
(``MLFLOW_TRACKING_URI``/``MLFLOW_REGISTRY_URI``):

* the version named, if its ``content_hash`` is still the pinned one;
* otherwise the version of that model holding the pinned content (a registry rebuilt with other
  version numbers); none -> :class:`BaseResolutionError`, never a different base.

The base's files are copied into a folder of the loading process (a local artifact store) or downloaded there,
hashed and compared with the base's manifest, whose sha256 the pin records (``manifest_sha256``), and that copy
is what loads: nothing is read twice from a store someone else may write.

A caller that has already downloaded and verified the pinned base into a folder of its own (the promoter,
:mod:`biaslab.registry.promote`) hands it over as a :class:`VerifiedBase`; it is used only when it is exactly
the pinned version (model name, version and manifest hash), so the base is not downloaded and hashed again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from biaslab.errors import BiaslabError


class BaseResolutionError(BiaslabError):
    """The pinned base version cannot be found, or holds other content than the one pinned."""


@dataclass(frozen=True)
class VerifiedBase:
    """A full base version's package that the caller has already checked: ``package`` is a folder of the
    caller's own (a private download or copy, never a path in the store, which whoever writes the store could
    change between the check and the load), whose files the caller hashed against the manifest whose sha256 is
    ``manifest_sha256``, the one version ``version`` of ``registered_model`` was registered with.

    Why: the promoter verifies the base before its re-scoring check loads an overlay or prompt version on it;
    resolving the pin again would download and hash the same checkpoint a second time (docs/bytes.md)."""

    registered_model: str
    version: str
    manifest_sha256: str
    package: Path

    def is_package(self, path: str | Path) -> bool:
        """Whether ``path`` is this verified package itself (the base's own load in the promoter's re-scoring
        check): its files were hashed against the pinned manifest already, so the loader need not hash them
        again."""
        return Path(path).resolve() == Path(self.package).resolve()

    def checkpoint_for(self, pin: dict[str, Any]) -> Path:
        """This package's checkpoint folder, if ``pin`` (an overlay's or prompt's ``base``) names exactly this
        version by model, version and manifest hash; else :class:`BaseResolutionError` - never another base
        than the pinned one, and never a quiet fallback that would hide a caller's mix-up."""
        wanted = (pin.get("registered_model"), str(pin.get("version")), pin.get("manifest_sha256"))
        held = (self.registered_model, str(self.version), self.manifest_sha256)
        if not self.manifest_sha256 or wanted != held:
            raise BaseResolutionError(
                f"base of this version: pinned {wanted[0]} version {wanted[1]} (manifest {wanted[2]}), the verified "
                f"base handed to the loader is {held[0]} version {held[1]} (manifest {held[2]}); refusing to load "
                "it on another base")
        return loadable_checkpoint(self.package, f"base {held[0]} version {held[1]}")


def base_pin(base_reference: dict[str, Any], model_name: str, client: Any = None) -> dict[str, Any] | None:
    """The pin of a registration's base reference.

    The base registered in the same ``register`` call, else (an overlay registered on its own) the newest
    registered full model whose ``model_fingerprint`` tag is the base directory's fingerprint; ``None``
    when the base has no registered version.
    """
    if not base_reference:
        return None
    if base_reference.get("base_version"):
        return {
            "registered_model": model_name,
            "version": str(base_reference["base_version"]),
            "content_hash": base_reference.get("content_hash"),
            "variant": base_reference.get("base_variant"),
            "manifest_sha256": base_reference.get("manifest_sha256"),
        }
    fingerprint = base_reference.get("base_fingerprint")
    if not fingerprint:
        return None
    from mlflow import MlflowClient

    client = client or MlflowClient()
    found = client.search_model_versions(
        f"name = '{model_name}' and tags.kind = 'full' and tags.model_fingerprint = '{fingerprint}'")
    if not found:
        return None
    mv = max(found, key=lambda v: int(v.version))
    manifest = client.get_run(mv.run_id).data.params.get("manifest_sha256") if mv.run_id else None
    return {"registered_model": model_name, "version": str(mv.version), "content_hash": mv.tags.get("content_hash"),
            "variant": mv.tags.get("variant"), "manifest_sha256": manifest}


def find_base_version(client: Any, pin: dict[str, Any]) -> Any:
    """The model version the pin names (checked by content hash), or the one holding the pinned content."""
    from mlflow.exceptions import MlflowException

    name, version, chash = pin["registered_model"], str(pin["version"]), pin.get("content_hash")
    try:
        mv = client.get_model_version(name, version)
    except MlflowException:
        mv = None
    if mv is not None and (chash is None or mv.tags.get("content_hash") == chash):
        return mv
    found = client.search_model_versions(f"name = '{name}' and tags.content_hash = '{chash}'") if chash else []
    if not found:
        held = f"holds content {mv.tags.get('content_hash')}" if mv is not None else "does not exist"
        raise BaseResolutionError(
            f"base of this version: {name} version {version} (content {chash}) - that version {held}, and no "
            f"version of {name} holds content {chash}; register the base variant again (`dvc repro register`) "
            "against this registry")
    return min(found, key=lambda v: int(v.version))


def _local_path(uri: str) -> Path | None:
    """The local directory an artifact URI points at, if it is one (``file://`` or a plain path)."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        path = Path(unquote(parsed.path))
    elif parsed.scheme == "" or (len(parsed.scheme) == 1 and uri[1:3] == ":\\"):  # a path (Windows drive too)
        path = Path(uri)
    else:
        return None
    return path if path.is_dir() else None


def checkpoint_dir(version_dir: Path) -> Path:
    """Where the checkpoint of a full version's files is, by its layout: ``model/`` (the transformers flavour)
    or the root (a byte copy). Never a path the package's ``MLmodel`` names: that is the registrant's to write."""
    version_dir = Path(version_dir).resolve()
    nested = version_dir / "model"
    checkpoint = nested if (nested / "config.json").is_file() else version_dir
    if not checkpoint.resolve().is_relative_to(version_dir):
        raise BaseResolutionError(f"{version_dir}: the checkpoint folder leads outside the package")
    return checkpoint


def loadable_checkpoint(package: Path, label: str) -> Path:
    """``package``'s checkpoint folder (:func:`checkpoint_dir`), which must hold a ``config.json``; else
    :class:`BaseResolutionError` naming ``label`` (the base version) and the folder."""
    checkpoint = checkpoint_dir(package)
    if not (checkpoint / "config.json").is_file():
        raise BaseResolutionError(f"{label}: no config.json in {checkpoint}")
    return checkpoint


def resolve_base(pin: dict[str, Any], client: Any = None, private_dir: Path | None = None) -> Path:
    """The local checkpoint directory of the pinned base version.

    ``private_dir``: a folder of the loading process's own; the base's files are copied (a local store) or
    downloaded there, and that copy is both checked and loaded - files in the store, which whoever writes the store
    could change between the check and the load, are read once. Without it a local store is read in place."""
    import mlflow
    from mlflow import MlflowClient

    client = client or MlflowClient()
    mv = find_base_version(client, pin)
    if mv.tags.get("kind", "full") != "full":
        raise BaseResolutionError(
            f"base of this version: {pin['registered_model']} version {mv.version} is a {mv.tags.get('kind')} "
            "variant, not a full model")
    uri = client.get_model_version_download_uri(pin["registered_model"], mv.version)
    local = _local_path(uri)
    if local is not None and private_dir is not None:
        import shutil

        local = Path(shutil.copytree(local, Path(private_dir) / "base", symlinks=True))
    elif local is None:
        local = Path(mlflow.artifacts.download_artifacts(
            artifact_uri=uri, dst_path=str(private_dir) if private_dir is not None else None))
    from biaslab.serving.manifest import PackageIntegrityError, verify_package

    if not pin.get("manifest_sha256"):
        raise BaseResolutionError(f"base of this version: {pin['registered_model']} version {mv.version} is pinned "
                                  "without its manifest hash; register the variant again (`dvc repro register`)")
    try:
        verify_package(local, pin["manifest_sha256"])
    except PackageIntegrityError as exc:
        raise BaseResolutionError(f"base of this version: {pin['registered_model']} version {mv.version}: {exc}") from None
    return loadable_checkpoint(local, f"base {pin['registered_model']} version {mv.version}")

