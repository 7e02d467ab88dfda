"""DVC stage ``raw_data``: every raw input resolved (the data mirror, else its pinned source) and fingerprinted.

    python -m pipelines.raw_data --params params.yaml

DVC reruns a stage when a dependency's bytes change, but the raw inputs live outside the project: in the
data mirror, which a fresh clone does not have (DVC stops at a missing dependency), or in the download
cache. So ``prepare``, ``base_model`` and ``control_model`` do not depend on the mirror's folders; they depend
on the two small files this stage writes, and this stage always runs (``always_changed`` in ``dvc.yaml``; it
reads and hashes ≈ 50 MB, seconds). It resolves every raw file the pipeline reads through
:mod:`biaslab.data.sources` (the mirror first, else downloaded once from its pinned, checksummed source) and
writes their sha256:

* ``data/raw_inputs/datasets.json`` - what ``prepare`` reads: the benchmark files
  (``sources.dataset_files()``; an optional file that cannot be had is ``null``, ``prepare`` then skips its
  table) and the held-out text of ``lm_quality`` (``data.lm_heldout``, ``lm_heldout/<lang>/<file>``);
* ``data/raw_inputs/corpora.json`` - the corpus files the default model trains on (``model.pretrain``;
  ``{}`` when ``model.source`` is set: a snapshotted model needs no corpus, and none is downloaded), what
  ``base_model`` and ``control_model`` depend on.

Only content is recorded, never where it came from or when: the mirror's file and the pinned source's are the
same bytes, so switching between them reruns nothing, a second ``dvc repro`` reruns nothing after this
stage, and an edited mirror file reruns exactly its consumers. No MLflow run: the stage runs on every
``dvc repro`` and trains or measures nothing; ``prepare`` logs where each raw dataset came from and, as a
tag of each, the md5 of the record it depended on (the ``dvc.lock`` entry).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from biaslab.atomic import atomic_write_text
from biaslab.config import Params, load_params
from biaslab.data import sources
from biaslab.outputs import paths
from pipelines.stage.entry import stage_main

_CHUNK = 1 << 20


def main(argv: list[str] | None = None) -> int:
    return stage_main("raw_data", __doc__, run, argv)


def run(args: argparse.Namespace) -> dict[str, dict[str, str | None]]:
    params = load_params(args.params)
    indexes = {"datasets": dataset_index(params), "corpora": corpus_index(params)}
    for name, index in indexes.items():
        atomic_write_text(paths.raw_inputs_file(name), json.dumps(index, indent=2, sort_keys=True) + "\n")
    missing = sum(digest is None for digest in indexes["datasets"].values())
    print(f"raw_data: {len(indexes['datasets']) - missing} dataset files ({missing} optional ones not available), "
          f"{len(indexes['corpora'])} corpus files -> {paths.RAW_INPUTS_DIR}")
    return indexes


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def dataset_index(params: Params) -> dict[str, str | None]:
    """``{path: sha256}`` of every raw file ``prepare`` reads.

    The benchmark files by mirror-relative path (an optional one that cannot be had: ``None``), and the
    held-out text of ``lm_quality`` as ``lm_heldout/<lang>/<file>`` (:func:`heldout_folder`).
    """
    index: dict[str, str | None] = {rel: sha256(sources.resolve(params.data, rel)) for rel in sources.dataset_files()}
    for rel in sources.OPTIONAL_REMOTE:
        path, _ = sources.resolve_optional(params.data, rel)  # why not: prepare's report says; not recorded here
        index[rel] = sha256(path) if path is not None else None
    heldout = params.data.lm_heldout
    if heldout.languages:
        index.update(folder_index(heldout_folder(params), heldout.languages, "lm_heldout/"))
    return index


def corpus_index(params: Params) -> dict[str, str]:
    """``{<lang>/<file>: sha256}`` of the corpora the default model trains on; ``{}`` with ``model.source`` set."""
    if params.model.source:
        return {}
    cfg = params.model.pretrain
    folder = Path(cfg.corpus_dir or sources.corpus_dir(params.data, cfg.languages))
    return folder_index(folder, cfg.languages)


def heldout_folder(params: Params) -> Path:
    """The corpus-layout folder ``prepare`` takes ``lm_quality``'s held-out text from, found as it finds it."""
    heldout, pretrain = params.data.lm_heldout, params.model.pretrain
    return Path(heldout.texts_dir or pretrain.corpus_dir or sources.corpus_dir(params.data, heldout.languages))


def folder_index(folder: Path, languages: Iterable[str], prefix: str = "") -> dict[str, str]:
    """``{<prefix><lang>/<file>: sha256}`` of the two files the corpus reader takes per language
    (``<lang>_corpus.txt``, ``MANIFEST.tsv``: the mirror's ``SOURCE.md`` notes are not content). A missing
    language is left out: the stage that reads it fails naming the file."""
    from biaslab.data.corpus import CorpusError, corpus_files

    index = {}
    for lang in languages:
        try:
            files = corpus_files(folder, lang)
        except CorpusError:
            continue
        index.update({f"{prefix}{lang}/{path.name}": sha256(path) for path in files})
    return index


if __name__ == "__main__":
    sys.exit(main())
