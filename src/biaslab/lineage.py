"""Which data a stage used, identified the way DVC identifies it: the datasets each MLflow run logs as inputs.

A :class:`DatasetRef` names one dataset a stage read, with

* ``digest`` - the digest DVC records for it in ``dvc.lock`` (:func:`dvc_digest`: the md5 of a file, or
  for a directory the md5 of its file listing plus ``.dir``), so a run's dataset and the DVC lock entry of
  the same data carry the same string. A *subset* of DVC-tracked data (GBEM-UA's fine-tune rows, a
  corpus's held-out documents; :func:`subset`) gets the md5 of ``<DVC digest>:<selection>`` and records
  the DVC digest and the selection as tags;
* ``source`` - where it comes from: its path as ``dvc.yaml`` names it (the data mirror, ``data/prepared``),
  or the pinned public origin (``https://github.com/<repo>/tree/<commit>``) when there is no mirror copy
  (:mod:`biaslab.data.provenance` makes the raw datasets' and corpora's refs);
* ``context`` - what the stage used it for: ``train``, ``validation``, ``eval``, or ``raw`` (the raw files
  ``prepare`` validates).

:func:`biaslab.tracking.log_datasets` turns them into MLflow dataset inputs (the runs table's *Dataset*
column). Nothing here imports MLflow or the data modules (stages that only read ``data/prepared`` do not
depend on how raw data are found).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

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
