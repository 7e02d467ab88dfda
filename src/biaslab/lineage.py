"""Which data a stage used, identified the way DVC identifies it: the datasets each MLflow run logs as inputs.

A :class:`DatasetRef` names one dataset a stage read, with

* ``digest`` - the digest DVC records for it in ``dvc.lock`` (:func:`dvc_digest`: the md5 of a file, or
  for a directory the md5 of its file listing plus ``.dir``), so a run's dataset and the DVC lock entry of
  the same data carry the same string. A *subset* of a DVC-tracked file (GBEM-UA's fine-tune rows, a
  corpus's held-out documents) gets the md5 of ``<file digest>:<selection>`` and records both as tags;
* ``source`` - where it comes from: its path as ``dvc.yaml`` names it (the data mirror, ``data/prepared``),
  or the pinned public origin (``https://github.com/<repo>/tree/<commit>``) when there is no mirror copy;
* ``context`` - what the stage used it for: ``train``, ``validation``, ``eval``, or ``raw`` (the raw files
  ``prepare`` validates).

:func:`biaslab.tracking.log_datasets` turns them into MLflow dataset inputs (the runs table's *Dataset*
column). Nothing here imports MLflow.
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


def dvc_digest(path: str | os.PathLike[str], only: Iterable[str] | None = None) -> str:
    """The digest DVC 3 records for ``path`` (``md5`` in ``dvc.lock``).

    A file: the md5 of its bytes. A directory: the md5 of the JSON list of ``{"md5", "relpath"}`` of its
    files sorted by path (what ``dvc_data``'s ``Tree.digest`` hashes), with ``.dir`` appended. ``only``
    restricts a directory to these relative paths (the digest DVC would give a directory holding just them).
    The project's ``.dvcignore`` ignores nothing, so every file counts.
    """
    path = Path(path)
    if path.is_file():
        return file_md5(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or directory (cannot compute its DVC digest)")
    wanted = None if only is None else set(only)
    entries = []
    for directory, _, files in os.walk(path):
        for name in files:
            full = Path(directory) / name
            rel = full.relative_to(path).as_posix()
            if wanted is None or rel in wanted:
                entries.append((rel, file_md5(full)))
    if wanted is not None and len(entries) != len(wanted):
        missing = sorted(wanted - {rel for rel, _ in entries})
        raise FileNotFoundError(f"{path}: missing {', '.join(missing[:5])}")
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


def prepared_subset(prepared_dir: str | os.PathLike[str], filename: str, frame: Any, selection: str,
                    context: Context, *, name: str | None = None) -> DatasetRef:
    """Rows ``selection`` (e.g. ``split == 'finetune'``) of a ``data/prepared`` table, already in ``frame``."""
    path = Path(prepared_dir) / filename
    parent = dvc_digest(path)
    return DatasetRef(name or Path(filename).stem, path.as_posix(), subset_digest(parent, selection), context,
                      frame, {"dvc_path": path.as_posix(), "dvc_md5": parent, "selection": selection})


def directory(path: str | os.PathLike[str], name: str, context: Context, *, source: str | None = None,
              only: Iterable[str] | None = None, selection: str | None = None) -> DatasetRef:
    """A directory (a mirror folder, a corpus); ``only`` + ``selection``: a subset of its files."""
    path = Path(path)
    if only is None:
        return DatasetRef(name, source or path.as_posix(), dvc_digest(path), context, None,
                          {"dvc_path": path.as_posix()})
    parent = dvc_digest(path)
    return DatasetRef(name, source or path.as_posix(), subset_digest(parent, selection or ",".join(sorted(only))),
                      context, None, {"dvc_path": path.as_posix(), "dvc_md5": parent,
                                      "selection": selection or f"{len(list(only))} files"})


def pinned_origin(dataset: str) -> str | None:
    """``https://github.com/<repo>/tree/<commit>`` of the repository a mirror folder was copied from."""
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
    if mirror.is_dir():
        ref = directory(mirror, dataset, "raw")
        origin = pinned_origin(dataset)
        return DatasetRef(ref.name, ref.source, ref.digest, "raw", None,
                          {**ref.tags, **({"pinned_origin": origin} if origin else {})})
    if download_dir is not None and (Path(download_dir) / dataset).is_dir():
        origin = pinned_origin(dataset)
        ref = directory(Path(download_dir) / dataset, dataset, "raw", source=origin)
        return DatasetRef(ref.name, ref.source, ref.digest, "raw", None, {**ref.tags, "downloaded": "true"})
    return None
