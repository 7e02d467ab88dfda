"""Where the raw data a stage read came from, as :class:`biaslab.lineage.DatasetRef` s for MLflow.

Kept next to :mod:`biaslab.data.sources` (which knows each dataset's pinned origin) so that
:mod:`biaslab.lineage`, which every stage logging datasets imports, needs no data module:

* :func:`raw_datasets` - the raw dataset folders ``prepare`` reads (context ``raw``), each with DVC's digest
  of the folder it was read from (the mirror's, or the download cache's);
* :func:`corpus_datasets` - the pretraining corpora as the train and validation documents the
  ``base_model`` / ``control_model`` stages split them into.

The raw folders are outside DVC's view (a fresh clone has no mirror): DVC tracks them through the records
of the ``raw_data`` stage (``data/raw_inputs/*.json``, sha256 of every raw file), which the reading stage
depends on. Given that record, each ref carries it as tags - ``raw_inputs`` (its path) and
``raw_inputs_md5`` (its md5, the stage's entry for it in ``dvc.lock``) - so a run's dataset and the DVC
lock of the same pipeline run are linked (:func:`record_tags`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from biaslab import lineage
from biaslab.lineage import DatasetRef

RAW_DATASETS = ("gbem_ua", "occugender", "rubia", "crows_pairs", "winobias", "winogender", "genderlex", "corpora")
"""The mirror folders ``prepare`` reads (a test checks they are those of ``sources.dataset_files()`` + the corpora)."""


def record_tags(record: str | os.PathLike[str] | None) -> dict[str, str]:
    """``{"raw_inputs": path, "raw_inputs_md5": md5}`` of a ``raw_data`` record; ``{}`` without one."""
    if record is None or not Path(record).is_file():
        return {}
    return {"raw_inputs": Path(record).as_posix(), "raw_inputs_md5": lineage.file_md5(record)}


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
        ref = lineage.directory(mirror, dataset, "raw")
        return DatasetRef(ref.name, ref.source, ref.digest, "raw", None,
                          {**ref.tags, **({"pinned_origin": origin} if origin else {})})
    if download_dir is not None and (Path(download_dir) / dataset).is_dir():
        ref = lineage.directory(Path(download_dir) / dataset, dataset, "raw", source=origin)
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
    digest is :func:`lineage.subset_digest` of the folder's DVC digest and those settings (recorded as the
    ``selection`` tag). ``record``: the ``raw_data`` record the stage depends on (:func:`record_tags`).
    """
    whole = lineage.directory(corpus_dir, "corpora", "train")
    whole = DatasetRef(whole.name, whole.source, whole.digest, whole.context, None, {**whole.tags, **record_tags(record)})
    settings = {"languages": list(pretrain_cfg.languages), "seed": pretrain_cfg.seed}
    validation = {**settings, "validation_documents": pretrain_cfg.validation_documents,
                  "validation_chars": pretrain_cfg.validation_chars}
    train = {**validation, "chars_per_language": pretrain_cfg.chars_per_language}
    return [lineage.subset(whole, json.dumps(train, sort_keys=True), "train"),
            lineage.subset(whole, json.dumps(validation, sort_keys=True), "validation")]
