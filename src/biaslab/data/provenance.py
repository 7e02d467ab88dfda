"""Where the raw data a stage read came from, as :class:`biaslab.lineage.DatasetRef` s for MLflow.

Kept next to :mod:`biaslab.data.sources` (which knows each dataset's pinned origin) so that
:mod:`biaslab.lineage`, which every stage logging datasets imports, needs no data module:

* :func:`raw_datasets` - the raw dataset folders ``prepare`` reads (context ``raw``), each with the digest
  DVC records for the same ``${mirror}/<dataset>`` dependency in ``dvc.lock``;
* :func:`corpus_datasets` - the pretraining corpora as the train and validation documents the
  ``base_model`` / ``control_model`` stages split them into.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from biaslab import lineage
from biaslab.lineage import DatasetRef

RAW_DATASETS = ("gbem_ua", "occugender", "rubia", "crows_pairs", "winobias", "winogender", "genderlex", "corpora")
"""The mirror folders ``prepare`` reads, in the order of its ``dvc.yaml`` dependencies (a test checks both agree)."""


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


def raw_datasets(data_cfg: Any, *, corpora: bool = True) -> list[DatasetRef]:
    """Every raw dataset folder of :data:`RAW_DATASETS` that ``prepare`` could read (``data_cfg``: params ``data``).

    ``corpora=False`` leaves the corpora out (``prepare`` reads them only for the held-out text of
    ``lm_quality``).
    """
    from biaslab.data.sources import download_dir

    mirror, downloads = data_cfg.resolved_mirror_dir(), download_dir(data_cfg)
    refs = (raw_dataset(mirror, name, download_dir=downloads)
            for name in RAW_DATASETS if corpora or name != "corpora")
    return [ref for ref in refs if ref is not None]


def corpus_datasets(corpus_dir: str | os.PathLike[str], pretrain_cfg: Any) -> list[DatasetRef]:
    """The corpora folder as the ``train`` and ``validation`` documents pretraining used.

    The split is a function of the corpus and the params ``model.pretrain`` keys named in the selection
    (whole documents held out per language with ``seed``, then budgets per language), so each part's
    digest is :func:`lineage.subset_digest` of the folder's DVC digest and those settings (recorded as the
    ``selection`` tag).
    """
    whole = lineage.directory(corpus_dir, "corpora", "train")
    settings = {"languages": list(pretrain_cfg.languages), "seed": pretrain_cfg.seed}
    validation = {**settings, "validation_documents": pretrain_cfg.validation_documents,
                  "validation_chars": pretrain_cfg.validation_chars}
    train = {**validation, "chars_per_language": pretrain_cfg.chars_per_language}
    return [lineage.subset(whole, json.dumps(train, sort_keys=True), "train"),
            lineage.subset(whole, json.dumps(validation, sort_keys=True), "validation")]
