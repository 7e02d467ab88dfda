"""Which data a stage used, identified the way DVC identifies it: the datasets each MLflow run logs as inputs.

A :class:`DatasetRef` names one dataset a stage read, with

* ``digest`` - the digest DVC records for it in ``dvc.lock`` (:func:`dvc_digest`: the md5 of a file, or
  for a directory the md5 of its file listing plus ``.dir``), so a run's dataset and the DVC lock entry of
  the same data carry the same string. A *subset* of DVC-tracked data (a corpus's held-out
  documents; :func:`subset`) gets the md5 of ``<DVC digest>:<selection>`` and records
  the DVC digest and the selection as tags;
* ``source`` - where it comes from: its path as ``dvc.yaml`` names it (the data mirror, ``data/prepared``),
  or the pinned public origin (``https://github.com/<repo>/tree/<commit>``) when there is no mirror copy
  (:func:`raw_datasets` and :func:`corpus_datasets` below);
* ``context`` - what the stage used it for: ``train``, ``validation``, ``eval``, or ``raw`` (the raw files
  ``prepare`` validates).

:func:`biaslab.tracking.runs.log_datasets` turns them into MLflow dataset inputs (the runs table's *Dataset*
column). Nothing here imports MLflow.

The second half names what each stage read, for the stages to log: the raw dataset folders and the
corpora (:func:`raw_datasets`, :func:`corpus_datasets`), what a pretrained model saw (:func:`pretraining`)
and the LoRA training data of ``tune`` and ``finetune`` (:func:`lora_training`). Their data modules are
imported inside those functions, so a stage that only reads ``data/prepared`` does not depend on how raw
data are found.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # annotations only: the stages hand in their parsed params
    from biaslab.config import LoraConfig, Params

Context = Literal["train", "validation", "eval", "raw"]
_CHUNK = 1 << 20


@dataclass(frozen=True)
class DatasetRef:
    name: str
    source: str
    digest: str
    context: Context
    frame: Any = None  # a pandas DataFrame when the data is a table (MLflow then records schema and rows)
    tags: Mapping[str, str] = field(default_factory=dict)


# --------------------------------------------------------------------------- DVC's digests
def file_md5(path: str | os.PathLike[str]) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def _listing_digest(entries: Iterable[tuple[str, str]]) -> str:
    """DVC's directory digest of ``(relpath, md5)`` entries: md5 of the sorted JSON listing, plus ``.dir``."""
    listing = sorted(({"md5": md5, "relpath": rel} for rel, md5 in entries), key=lambda e: e["relpath"])
    return hashlib.md5(json.dumps(listing, sort_keys=True).encode("utf-8")).hexdigest() + ".dir"


def dvc_digest(path: str | os.PathLike[str]) -> str:
    """The digest DVC 3 records for ``path`` (``md5`` in ``dvc.lock``).

    A file: the md5 of its bytes. A directory: the md5 of the JSON list of ``{"md5", "relpath"}`` of its
    files sorted by path (what ``dvc_data``'s ``Tree.digest`` hashes), with ``.dir`` appended. The
    project's ``.dvcignore`` ignores nothing, so every file counts.
    """
    path = Path(path)
    if path.is_file():
        return file_md5(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or directory (cannot compute its DVC digest)")
    entries = []
    for folder, _, files in os.walk(path):
        for name in files:
            full = Path(folder) / name
            entries.append((full.relative_to(path).as_posix(), file_md5(full)))
    return _listing_digest(entries)


def subset_digest(parent_digest: str, selection: str) -> str:
    """The digest of a selection of a DVC-tracked file or directory (md5 of ``<digest>:<selection>``)."""
    return hashlib.md5(f"{parent_digest}:{selection}".encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- the datasets a stage reads
def prepared_file(prepared_dir: str | os.PathLike[str], filename: str, context: Context, *,
                  name: str | None = None) -> DatasetRef:
    """One file of ``data/prepared`` (a parquet table is read, so MLflow shows its schema and row count)."""
    path = Path(prepared_dir) / filename
    frame = None
    if path.suffix == ".parquet":
        import pandas as pd

        frame = pd.read_parquet(path)
    return DatasetRef(name or Path(filename).stem, path.as_posix(), dvc_digest(path), context, frame,
                      {"dvc_path": path.as_posix()})


def subset(whole: DatasetRef, selection: str, context: Context, *, key: str | None = None,
           frame: Any = None) -> DatasetRef:
    """A selection of ``whole`` (rows of a table, documents of a corpus) as its own dataset.

    ``selection`` says what was selected (``split == 'finetune'``; it is recorded as a tag); ``key`` is what
    identifies the selection exactly when the label does not (e.g. the held-out document names; default:
    ``selection``). The digest is :func:`subset_digest` of the whole's DVC digest and that key.
    """
    return DatasetRef(whole.name, whole.source, subset_digest(whole.digest, key if key is not None else selection),
                      context, frame, {**whole.tags, "dvc_md5": whole.digest, "selection": selection})


def directory(path: str | os.PathLike[str], name: str, context: Context, *, source: str | None = None) -> DatasetRef:
    """A directory DVC tracks as one dependency (a mirror folder, a corpus)."""
    path = Path(path)
    return DatasetRef(name, source or path.as_posix(), dvc_digest(path), context, None, {"dvc_path": path.as_posix()})


# --------------------------------------------------------------------------- the raw datasets and corpora (where the raw data a stage read came from)

RAW_DATASETS = ("gbem_ua", "occugender", "rubia", "crows_pairs", "winobias", "winogender", "genderlex", "corpora")
"""The mirror folders ``prepare`` reads (a test checks they are those of ``sources.dataset_files()`` + the corpora)."""


def record_tags(record: str | os.PathLike[str] | None) -> dict[str, str]:
    """``{"raw_inputs": path, "raw_inputs_md5": md5}`` of a ``raw_data`` record; ``{}`` without one."""
    if record is None or not Path(record).is_file():
        return {}
    return {"raw_inputs": Path(record).as_posix(), "raw_inputs_md5": file_md5(record)}


def pinned_origin(dataset: str) -> str | None:
    """``https://github.com/<repo>/tree/<commit>`` of the repository a mirror folder was copied from.

    ``None`` for a folder built from several repositories (the corpora: see their ``SOURCE.md``).
    """
    from biaslab.data.sources import DERIVED, REMOTE

    for key, remote in [*REMOTE.items(), *((k, d.source) for k, d in DERIVED.items())]:
        if key.split("/", 1)[0] == dataset:
            return f"https://github.com/{remote.repo}/tree/{remote.commit}"
    return None


def raw_dataset(mirror_dir: str | os.PathLike[str], dataset: str, *,
                download_dir: str | os.PathLike[str] | None = None) -> DatasetRef | None:
    """A raw dataset ``prepare`` reads: the mirror folder when present, else its downloaded copy.

    The digest is DVC's of the folder it was read from; the source is the mirror path, or the pinned
    origin when the files were downloaded. ``None`` when neither exists (nothing was read).
    """
    mirror = Path(mirror_dir) / dataset
    origin = pinned_origin(dataset)
    if mirror.is_dir():
        ref = directory(mirror, dataset, "raw")
        return DatasetRef(ref.name, ref.source, ref.digest, "raw", None,
                          {**ref.tags, **({"pinned_origin": origin} if origin else {})})
    if download_dir is not None and (Path(download_dir) / dataset).is_dir():
        ref = directory(Path(download_dir) / dataset, dataset, "raw", source=origin)
        return DatasetRef(ref.name, ref.source, ref.digest, "raw", None, {**ref.tags, "downloaded": "true"})
    return None


def raw_datasets(data_cfg: Any, *, corpora: bool = True,
                 record: str | os.PathLike[str] | None = None) -> list[DatasetRef]:
    """Every raw dataset folder of :data:`RAW_DATASETS` that ``prepare`` could read (``data_cfg``: params ``data``).

    ``corpora=False`` leaves the corpora out (``prepare`` reads them only for the held-out text of
    ``lm_quality``); ``record``: the ``raw_data`` record ``prepare`` depends on (:func:`record_tags`).
    """
    from biaslab.data.sources import download_dir

    mirror, downloads, tags = data_cfg.resolved_mirror_dir(), download_dir(data_cfg), record_tags(record)
    refs = (raw_dataset(mirror, name, download_dir=downloads)
            for name in RAW_DATASETS if corpora or name != "corpora")
    return [DatasetRef(r.name, r.source, r.digest, r.context, r.frame, {**r.tags, **tags})
            for r in refs if r is not None]


def corpus_datasets(corpus_dir: str | os.PathLike[str], pretrain_cfg: Any, *,
                    record: str | os.PathLike[str] | None = None) -> list[DatasetRef]:
    """The corpora folder as the ``train`` and ``validation`` documents pretraining used.

    The split is a function of the corpus and the params ``model.pretrain`` keys named in the selection
    (whole documents held out per language with ``seed``, then budgets per language), so each part's
    digest is :func:`subset_digest` of the folder's DVC digest and those settings (recorded as the
    ``selection`` tag). ``record``: the ``raw_data`` record the stage depends on (:func:`record_tags`).
    """
    whole = directory(corpus_dir, "corpora", "train")
    whole = DatasetRef(whole.name, whole.source, whole.digest, whole.context, None, {**whole.tags, **record_tags(record)})
    settings = {"languages": list(pretrain_cfg.languages), "seed": pretrain_cfg.seed}
    validation = {**settings, "validation_documents": pretrain_cfg.validation_documents,
                  "validation_chars": pretrain_cfg.validation_chars}
    train = {**validation, "chars_per_language": pretrain_cfg.chars_per_language}
    return [subset(whole, json.dumps(train, sort_keys=True), "train"),
            subset(whole, json.dumps(validation, sort_keys=True), "validation")]


# --------------------------------------------------------------------------- what a pretrained model saw

def pretraining(params: Params, model_dir: str | Path) -> list[DatasetRef]:
    """The corpora splits and the planted text ``model_dir`` was trained on (none for a snapshot of ``model.source``)."""
    from biaslab.data import sources
    from biaslab.outputs import paths

    if params.model.source:
        return []
    cfg = params.model.pretrain
    refs = corpus_datasets(cfg.corpus_dir or sources.corpus_dir(params.data, cfg.languages), cfg,
                           record=paths.raw_inputs_file("corpora"))  # what the stage depends on in dvc.yaml
    planted = planted_text(model_dir)
    return refs + ([planted] if planted is not None else [])


def planted_text(model_dir: str | Path) -> DatasetRef | None:
    """The planted sentences a model was trained on (context ``train``); ``None`` when it saw none."""
    from biaslab.pretrain.phases import PLANTED_FILE

    path = Path(model_dir) / PLANTED_FILE
    if not path.is_file():
        return None
    key = json.loads(path.read_text(encoding="utf-8"))
    if not key.get("enabled"):
        return None
    settings = key.get("params", {})
    tags = {"dvc_path": path.as_posix(), "direction": key.get("direction"), "dose": settings.get("dose"),
            "strength": settings.get("strength"), "generator": "biaslab.pretrain.planted"}
    return DatasetRef("planted_text", path.as_posix(), file_md5(path), "train", None,
                      {k: str(v) for k, v in tags.items() if v is not None})


# --------------------------------------------------------------------------- the LoRA training data of tune and finetune

def lora_training(params: Params, cfg: LoraConfig | None = None) -> list[DatasetRef]:
    """The datasets a LoRA fine-tune with ``cfg`` (default: params ``lora``) reads: GBEM-UA's ``train/`` split
    file (its fine-tune professions, when ``lora.sources`` has gbem_ua) and ``select/`` split file (validation
    professions), each with its own DVC digest (the files ``tune`` and ``finetune`` depend on in dvc.yaml)."""
    cfg = cfg or params.lora
    refs = []
    for split, context in (("train", "train"), ("select", "validation")):
        if context == "validation" or "gbem_ua" in cfg.sources:
            refs.append(prepared_file(params.data.prepared_dir, f"{split}/gbem_ua.parquet", context, name="gbem_ua"))
    if "occupations_en" in cfg.sources:
        refs.append(english_examples(cfg.augmentation))
    return refs


def english_examples(augmentation: str) -> DatasetRef:
    """The generated English occupation examples (``lora.sources: occupations_en``) as a ``train`` dataset."""
    from biaslab.mitigation.lora import sft_english

    examples = sft_english.english_examples(augmentation)
    digest = hashlib.md5(examples.to_csv(index=False).encode("utf-8")).hexdigest()
    source = f"src/{sft_english.__name__.replace('.', '/')}.py"  # the generator, as dvc.yaml names code deps
    return DatasetRef("occupations_en", source, digest, "train", examples,
                      {"generator": sft_english.__name__, "augmentation": augmentation})
