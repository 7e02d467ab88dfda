"""The directory uploaded for a variant, and the check that the artifact store holds exactly it
(file list, sizes, SHA-256) before a version is created.

The package is staged in a temporary folder, but its weight files are not copied there: each is a symbolic
link to the source file (:func:`stage_file`), which the upload reads through - MLflow's artifact
repositories copy or send a linked file's bytes - so registering a checkpoint writes one copy of it (the
stored artifact), not two, and hashes it twice: the source once (the copy check, whose hash both manifests
reuse) and the stored upload once (:func:`verify_logged`). A source changed between the two is caught there.
Every other file (configuration, tokenizer, an overlay's own files) is copied: small, and written to by the
packaging steps that follow (a write through a link would change the source)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from biaslab.outputs import variant_dir
from biaslab.registry.errors import RegistryError
from biaslab.registry.sources import VariantSource


# packages a full-model version needs at load time; passed explicitly because MLflow's default probe
# imports optional packages (torchvision...) and fails
_PIP_PACKAGES = ("transformers", "torch", "tokenizers", "safetensors")


def _sha256(path: Path) -> str:
    from biaslab.serving.manifest import sha256_file

    return sha256_file(path)


def file_manifest(directory: Path, known: Mapping[str, str] | None = None) -> dict[str, tuple[int, str]]:
    """``{relative posix path: (size, sha256)}`` of every file under ``directory``.

    ``known``: sha256 values the caller computed from these very files a moment ago (the package's serving
    manifest, the copy check), not read again: a checkpoint-sized file costs one pass less per reuse."""
    known = known or {}
    manifest = {}
    for p in sorted(directory.rglob("*")):
        if p.is_file():
            rel = p.relative_to(directory).as_posix()
            manifest[rel] = (p.stat().st_size, known.get(rel) or _sha256(p))
    return manifest


def pip_requirements(extra: tuple[str, ...] = ()) -> list[str]:
    """Pinned requirements from the installed versions (no probing imports)."""
    reqs = []
    for name in (*_PIP_PACKAGES, *extra):
        try:
            reqs.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return reqs


def _link(file: Path, target: Path) -> None:
    """``target`` a symbolic link to the resolved ``file``; a copy where the file system makes no links (some
    Windows accounts, some mounts)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.symlink(file.resolve(), target)
    except OSError:
        shutil.copy2(file, target)


def stage_file(file: Path, target: Path) -> None:
    """``file`` at ``target`` in the package being staged: a tensor file
    (:func:`biaslab.models.weights.files.is_tensor_file`) linked (:func:`_link`), so the staging folder holds no
    copy of it (the upload reads through the link); anything else copied."""
    from biaslab.models.weights.files import is_tensor_file

    if is_tensor_file(file.name):
        _link(file, target)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)


def _copy_model_files(src: Path, dst: Path) -> None:
    for file in variant_dir.model_files(src):
        stage_file(file, dst / file.relative_to(src))


def _check_copy(src: Path, dst: Path, prefix: str = "") -> dict[str, str]:
    """Every model file of ``src`` is in ``dst`` (under ``prefix``) with identical bytes; the staged files' sha256
    (``{path in dst: sha256}``), so the package's manifests need not read them again. A staged link to the
    source file itself is its bytes: the source is read once for it (the upload is read back by
    :func:`verify_logged`)."""
    hashes = {}
    for file in variant_dir.model_files(src):
        rel = file.relative_to(src).as_posix()
        staged = dst / prefix / rel
        source = _sha256(file)
        if staged.is_symlink() and staged.resolve() == file.resolve():
            digest = source
        else:
            digest = _sha256(staged) if staged.is_file() and not staged.is_symlink() else None
        if digest is None or digest != source:
            raise RegistryError(f"package of {src} is incomplete: {prefix}{rel} missing or different")
        hashes[f"{prefix}{rel}"] = digest
    return hashes


def package_variant(src: VariantSource, dst: Path, *, flavor: str, base_reference: dict[str, Any]) -> dict[str, str]:
    """Build the directory that will be uploaded for ``src`` and check it against the source; the sha256 of
    the copied model files (``{path in dst: sha256}``, computed by the check) for the manifests to reuse."""
    dst.mkdir(parents=True, exist_ok=True)
    if src.kind == "prompt":
        (dst / "prompt.json").write_text(
            json.dumps({"variant": src.name, "prompt_prefix": src.prompt_prefix, "base": base_reference},
                       ensure_ascii=False, indent=2, sort_keys=True) + "\n",
            encoding="utf-8",
        )
        return {}
    if src.kind == "overlay":
        _copy_model_files(src.model_dir, dst)
        (dst / "base_reference.json").write_text(json.dumps(base_reference, indent=2, sort_keys=True) + "\n",
                                                 encoding="utf-8")
        return _check_copy(src.model_dir, dst)
    if flavor == "artifacts":
        _copy_model_files(src.model_dir, dst)
        return _check_copy(src.model_dir, dst)
    return _save_transformers_flavor(src.model_dir, dst)


@contextlib.contextmanager
def _pipeline_classes_for_mlflow():
    """Within the block, ``transformers.pipelines.check_task`` names the pipeline *class*, not its dotted path.

    MLflow 3.17 builds the flavour of a local checkpoint with ``check_task(task)[1]["impl"].__name__``;
    transformers 5 registers ``impl`` as a dotted string, so that fails with ``'str' object has no attribute
    '__name__'``. The patch imports the class the string names, for MLflow's call only.
    """
    import importlib

    from transformers import pipelines

    original = pipelines.check_task

    def check_task(task: str):
        name, meta, options = original(task)
        impl = meta.get("impl")
        if isinstance(impl, str):
            module, _, cls = impl.rpartition(".")
            meta = {**meta, "impl": getattr(importlib.import_module(module), cls)}
        return name, meta, options

    pipelines.check_task = check_task
    try:
        yield
    finally:
        pipelines.check_task = original


LICENSE_FILE = "LICENSE.txt"  # what MLflow's transformers flavour writes beside the model


def local_model_card(model_dir: Path) -> Any:
    """The checkpoint's own model card (``README.md`` of a hub snapshot), else a short one naming it.

    Given no card, MLflow asks the Hub for one under the checkpoint's local path as if it were a repository
    id, logs two warnings (no card, no licence) and writes a ``LICENSE.txt`` that points at
    ``https://huggingface.co/<absolute local path>``. A card of our own keeps the Hub out of it.
    """
    from huggingface_hub import ModelCard

    readme = model_dir / "README.md"
    if readme.is_file():
        try:
            return ModelCard.load(readme)
        except Exception:  # noqa: BLE001 - an unreadable card is replaced by ours, never a failed registration
            pass
    return ModelCard(f"---\n---\n# {model_dir.name}\n\nA checkpoint registered by biaslab; its lineage is in the "
                     "registered version's tags and in the run that logged it.\n")


def licence_note(card: Any) -> str:
    """``LICENSE.txt`` of a registered full model: the licence its card declares, or where to look for one."""
    declared = getattr(getattr(card, "data", None), "license", None)
    if declared:
        return (f"The model card of this checkpoint declares the licence: {declared}. The card is model_card.md "
                "beside this file.\n")
    return ("No licence travels with this checkpoint. A model from the Hugging Face Hub is under the licence "
            "of its repository (model.source at model.revision, in the params of the run that logged it); "
            "biaslab's own default model is trained on public corpora (English and Russian novels in the public "
            "domain, Ukrainian UA-GEC texts under CC BY 4.0; docs/data.md names each source and its licence).\n")


def _save_transformers_flavor(model_dir: Path, dst: Path) -> dict[str, str]:
    """``mlflow.transformers.save_model`` of the checkpoint *directory*: MLflow copies its files.

    The weights are never loaded or re-serialised: MLflow's local-checkpoint path copies the directory
    into ``<dst>/model`` (and saves the tokenizer under ``components/``), so the registered version has the
    checkpoint's own bytes and dtype (bf16 stays bf16, recorded as the flavour's ``torch_dtype``), and
    registering costs no model-sized memory. The copy is checked byte for byte against the source.
    """
    import mlflow.transformers
    from transformers import AutoConfig

    from biaslab.models.load import detect_kind
    from biaslab.models.weights.index import SafetensorsIndex

    try:
        kind = detect_kind(AutoConfig.from_pretrained(str(model_dir)))
        dtype = SafetensorsIndex(model_dir).floating_dtype()
    except Exception as exc:  # noqa: BLE001 - any failure means the flavour cannot be built
        raise RegistryError(
            f"{model_dir}: cannot read the model to log it with the transformers flavour ({type(exc).__name__}: "
            f"{exc}); fix the model directory, or register a byte copy with --flavor artifacts"
        ) from exc
    shutil.rmtree(dst)  # save_model wants to create the directory itself
    card = local_model_card(model_dir)
    with tempfile.TemporaryDirectory(prefix="biaslab-checkpoint-") as tmp:
        view, weights = _checkpoint_without_weights(model_dir, Path(tmp))
        with _pipeline_classes_for_mlflow():
            mlflow.transformers.save_model(
                str(view),
                path=str(dst),
                task="fill-mask" if kind == "masked" else "text-generation",
                torch_dtype=dtype,
                pip_requirements=pip_requirements(),
                model_card=card,
            )
    for file in weights:
        stage_file(file, dst / "model" / file.relative_to(model_dir))
    _name_source(dst, model_dir)
    (dst / LICENSE_FILE).write_text(licence_note(card), encoding="utf-8")
    return _check_copy(model_dir, dst, prefix="model/")


def _checkpoint_without_weights(model_dir: Path, tmp: Path) -> tuple[Path, list[Path]]:
    """A folder ``tmp/<name of model_dir>`` of links to every file of ``model_dir`` but its weights, and the
    weight files left out: what ``mlflow.transformers.save_model`` copies (it copies a local checkpoint folder
    whole, links read through) without the gigabytes, which :func:`stage_file` then links into the package."""
    from biaslab.models.weights.files import is_tensor_file

    view = tmp / model_dir.name
    view.mkdir(parents=True)
    weights = []
    for file in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        if is_tensor_file(file.name):
            weights.append(file)
        else:
            _link(file, view / file.relative_to(model_dir))
    return view, weights


def _name_source(dst: Path, model_dir: Path) -> None:
    """The transformers flavour's ``source_model_name`` in ``dst``'s ``MLmodel``: the checkpoint folder, as
    ``save_model`` records it when handed that folder (here it was handed the view without the weights)."""
    from mlflow.models import Model

    model = Model.load(str(dst / "MLmodel"))
    model.flavors["transformers"]["source_model_name"] = str(model_dir)
    model.save(str(dst / "MLmodel"))


def local_artifact_dir(client: Any, run_id: str, artifact_path: str) -> Path | None:
    """Where ``artifact_path`` of run ``run_id`` lies on this machine when the run's artifact store is a local
    folder (``file://`` or a plain path), else ``None`` (a server's proxied store, an object store).

    Downloading from a local store copies the files MLflow serves into a temporary folder - for a checkpoint,
    a full copy written only to be hashed (docs/bytes.md); the stored files themselves are what a later
    download returns, so a check reads them in place."""
    from urllib.parse import urlparse

    from mlflow.utils.file_utils import local_file_uri_to_path

    uri = client.get_run(run_id).info.artifact_uri
    scheme = urlparse(uri).scheme
    if scheme not in ("", "file") or (scheme == "" and not Path(uri).is_absolute()):
        return None
    stored = Path(local_file_uri_to_path(uri)) / artifact_path
    return stored if stored.is_dir() else None


def _list_artifacts_recursive(client: Any, run_id: str, path: str) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for info in client.list_artifacts(run_id, path):
        if info.is_dir:
            found |= _list_artifacts_recursive(client, run_id, info.path)
        else:
            found[info.path] = info.file_size
    return found


def verify_logged(client: Any, run_id: str, artifact_path: str, manifest: dict[str, tuple[int, str]],
                  *, check_hashes: bool = True) -> None:
    """The artifacts under ``artifact_path`` are exactly ``manifest`` (paths, sizes, and hashes)."""
    found = _list_artifacts_recursive(client, run_id, artifact_path)
    listed = {k[len(artifact_path) + 1:]: v for k, v in found.items()}
    missing = sorted(set(manifest) - set(listed))
    wrong_size = sorted(p for p in manifest if p in listed and listed[p] is not None and listed[p] != manifest[p][0])
    if missing or wrong_size:
        raise RegistryError(
            f"run {run_id}: artifacts under {artifact_path!r} are incomplete - missing {missing[:5]}, "
            f"wrong size {wrong_size[:5]}; not registering"
        )
    if check_hashes:
        import mlflow

        stored = local_artifact_dir(client, run_id, artifact_path)
        if stored is not None:  # a local store: the files MLflow serves are these, read where they lie
            bad = sorted(p for p, (_, sha) in manifest.items() if _sha256(stored / p) != sha)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                local = Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=artifact_path,
                                                                 dst_path=tmp))
                bad = sorted(p for p, (_, sha) in manifest.items() if _sha256(local / p) != sha)
        if bad:
            raise RegistryError(f"run {run_id}: artifacts {bad[:5]} differ from what was uploaded; not registering")
