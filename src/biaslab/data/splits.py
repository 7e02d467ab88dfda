"""Three disjoint item sets per benchmark a choice or the gate reads: ``train``, ``select``, ``test``.

* ``train`` - what LoRA fits (GBEM-UA's fine-tune professions);
* ``select`` - every choice: Optuna trials, any mitigation setting a person picks (GBEM-UA's validation
  professions, half of the OccuGender jobs, half of the lm_quality held-out documents);
* ``test`` - the gate, calibration and the report's headline (GBEM-UA's evaluation professions, the other
  OccuGender jobs and held-out documents).

The split is physical: ``prepare`` writes each set's items to their own folder of ``data/prepared``
(``train/``, ``select/``, ``test/``; :data:`FILES`), each with a ``manifest.json`` naming its split. The
``tune`` and ``finetune`` stages depend on ``data/prepared/train`` and ``data/prepared/select`` only
(``dvc.yaml``), and read them through :func:`read_split_table`, which refuses a test item: a test folder,
a folder whose manifest names another split, or a row whose ``split`` column says it belongs elsewhere
(:class:`SplitError`, naming the file, the row and the split). The evaluation reads ``test/``.

OccuGender jobs and held-out documents are split by :func:`stratified_selection`: seeded, stratified (jobs by
group and BLS female share, held-out documents by language and origin; a document's chunks all go with it:
:func:`document_split`). ``docs/splits.md``.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from biaslab.data.errors import DataError

TRAIN, SELECT, TEST = "train", "select", "test"
SPLITS = (TRAIN, SELECT, TEST)
MANIFEST = "manifest.json"
RECORD = "splits.json"  # data/prepared/splits.json: every split's sizes, params and members
# GBEM-UA's own split labels (column ``split`` of gbem_ua.parquet) -> the set they belong to
GBEM_UA_LABELS = {"finetune": TRAIN, "validation": SELECT, "eval": TEST}
# the files each set holds (a file absent from a set: that benchmark has no items there)
FILES: dict[str, tuple[str, ...]] = {
    TRAIN: ("gbem_ua.parquet",),
    SELECT: ("gbem_ua.parquet", "occugender_jobs.parquet", "occugender_spec.json", "lm_heldout.parquet"),
    TEST: ("gbem_ua.parquet", "occugender_jobs.parquet", "occugender_spec.json", "lm_heldout.parquet"),
}
# what a mitigation may read (tune, finetune): never the test set
MITIGATION_SPLITS = (TRAIN, SELECT)


class SplitError(DataError):
    """A stage asked for items of a split it may not read (a test item where a choice is made)."""


def stratified_selection(strata: Sequence[Hashable], order: Sequence[Any], fraction: float, seed: int,
                         where: str) -> list[str]:
    """Per item, :data:`SELECT` or :data:`TEST`.

    Within each stratum the items are sorted by ``order`` and cut into ``k = round_half_up(fraction × n)``
    consecutive runs of near-equal length (``k`` clamped to ``1 … n-1``); one item of each run, drawn with
    ``random.Random(seed)`` (strata in sorted order), goes to ``select``, the rest to ``test``. So both sets
    cover the whole range of ``order`` (e.g. the BLS female share) in every stratum. A stratum of fewer
    than two items cannot be split: a :class:`DataError` naming ``where``.
    """
    if len(strata) != len(order):
        raise ValueError("stratified_selection: strata and order differ in length")
    rng = random.Random(seed)
    out = [TEST] * len(strata)
    members: dict[Hashable, list[int]] = {}
    for i, stratum in enumerate(strata):
        members.setdefault(stratum, []).append(i)
    for stratum in sorted(members, key=str):
        items = sorted(members[stratum], key=lambda i: (order[i], i))
        n = len(items)
        if n < 2:
            raise DataError(where, f"stratum {stratum!r} has {n} item(s); a selection/test split needs at least 2")
        k = min(n - 1, max(1, math.floor(fraction * n + 0.5)))
        bounds = [j * n // k for j in range(k + 1)]
        for lo, hi in zip(bounds, bounds[1:]):
            out[items[lo + rng.randrange(hi - lo)]] = SELECT
    return out


def split_dir(prepared_dir: str | Path, split: str) -> Path:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; one of {SPLITS}")
    return Path(prepared_dir) / split


def manifest(split: str, files: dict[str, int], params: dict[str, Any]) -> dict[str, Any]:
    """What ``<split>/manifest.json`` holds: the split, its files with their row counts, the params that made it."""
    return {"split": split, "files": dict(sorted(files.items())), "params": params}


def _check_manifest(folder: Path, split: str) -> None:
    path = folder / MANIFEST
    if not path.is_file():
        raise SplitError(path, f"missing: {folder} is not a split folder written by prepare (dvc repro prepare)")
    named = json.loads(path.read_text(encoding="utf-8")).get("split")
    if named != split:
        raise SplitError(path, f"names split {named!r}, but {folder} was read as the {split!r} split")


def read_split_table(prepared_dir: str | Path, split: str, name: str,
                     allowed: Sequence[str] = MITIGATION_SPLITS) -> Any:
    """``<prepared_dir>/<split>/<name>`` as a pandas frame, refusing any item outside ``allowed``.

    Refused: a ``split`` not in ``allowed`` (the default: train and select, what tune and finetune may
    read), a folder whose manifest names another split, and a row whose ``split`` column (GBEM-UA's
    finetune/validation/eval, or a set name) maps to another set than ``split``.
    """
    import pandas as pd

    from biaslab.errors import MissingInputError

    folder = split_dir(prepared_dir, split)
    path = folder / name
    if split not in allowed:
        raise SplitError(path, f"is a {split}-split file; this stage may read only {', '.join(allowed)} items "
                               f"(the {split} items are kept for the gate and the report)")
    if not path.is_file():
        raise MissingInputError(f"{path}: prepared split table missing; run the prepare stage (dvc repro prepare)")
    _check_manifest(folder, split)
    frame = pd.read_parquet(path)
    if "split" in frame.columns:
        labels = frame["split"].map(lambda s: GBEM_UA_LABELS.get(s, s))
        wrong = (labels != split).to_numpy().nonzero()[0]
        if len(wrong):
            i = int(wrong[0])
            item = frame["item_id"].iloc[i] if "item_id" in frame.columns else i
            raise SplitError(path, f"item {item} belongs to the {labels.iloc[i]} split "
                                   f"(split={frame['split'].iloc[i]!r}), not {split}; refused",
                             row=i + 1, column="split")
    return frame


def read_mitigation_frame(prepared_dir: str | Path, name: str = "gbem_ua.parquet") -> Any:
    """The train and select rows of ``name`` in one frame (GBEM-UA: ``split`` finetune + validation),
    read through :func:`read_split_table`: what ``tune`` and ``finetune`` train and choose on."""
    import pandas as pd

    parts = [read_split_table(prepared_dir, split, name) for split in MITIGATION_SPLITS if name in FILES[split]]
    return pd.concat(parts, ignore_index=True)


def build(tables: dict[str, Any], spec: dict[str, Any], cfg: Any) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The split folders' contents ``{split: {file: pandas frame | JSON document}}`` and the record
    (``splits.json``: per benchmark the params, the sizes and the members of each set).

    ``tables``: prepare's ``{file: datasets.Dataset}`` (after any ``data.sample``); ``cfg``: params ``data``.
    GBEM-UA keeps its profession split (``data.gbem_ua``); OccuGender jobs are stratified by group and BLS
    female share, held-out documents (whole) by language and origin (``data.splits``).
    """
    s = cfg.splits
    out: dict[str, dict[str, Any]] = {split: {} for split in SPLITS}
    record: dict[str, Any] = {}
    gbem = tables["gbem_ua.parquet"].to_pandas()
    for label, split in GBEM_UA_LABELS.items():
        out[split]["gbem_ua.parquet"] = gbem[gbem["split"] == label].reset_index(drop=True)
    record["gbem_ua"] = {
        "params": {"data.gbem_ua": cfg.gbem_ua.model_dump()}, "unit": "profession",
        "sizes": {GBEM_UA_LABELS[k]: int(gbem.loc[gbem["split"] == k, "profession"].nunique()) for k in GBEM_UA_LABELS},
        "members": {GBEM_UA_LABELS[k]: sorted(gbem.loc[gbem["split"] == k, "profession"].unique()) for k in GBEM_UA_LABELS},
    }
    jobs = tables["occugender_jobs.parquet"].to_pandas()
    where = stratified_selection(list(jobs["group"]), list(zip(jobs["female_ratio"], jobs["job"])),
                                 s.occugender_selection_fraction, s.seed, "occugender_jobs.parquet (params data.splits)")
    _add(out, record, "occugender", "occugender_jobs.parquet", jobs, where, "job", list(jobs["job"]),
         {"data.splits.occugender_selection_fraction": s.occugender_selection_fraction, "data.splits.seed": s.seed,
          "strata": "group", "order": "female_ratio (BLS)"})
    for split in (SELECT, TEST):
        out[split]["occugender_spec.json"] = spec
    if "lm_heldout.parquet" in tables:
        chunks = tables["lm_heldout.parquet"].to_pandas()
        where = document_split(chunks, s.lm_heldout_selection_fraction, s.seed)
        keys = [f"{a}:{b}" for a, b in zip(chunks["language"], chunks["document"])]
        _add(out, record, "lm_quality", "lm_heldout.parquet", chunks, where, "language:document", keys,
             {"data.splits.lm_heldout_selection_fraction": s.lm_heldout_selection_fraction, "data.splits.seed": s.seed,
              "strata": "language, origin", "order": "document", "assigned": "whole documents"})
    return out, record


def document_split(chunks: Any, fraction: float, seed: int) -> list[str]:
    """Per chunk of ``lm_heldout.parquet``, :data:`SELECT` or :data:`TEST` - **its whole document's** set.

    The documents (``language``, ``document``) are split by :func:`stratified_selection`, stratified by language
    and ``origin`` (a validation document or a training document's untrained tail, where the table says),
    in document order; every chunk goes with its document, so the selection and the test set never share a
    document (issue 43: chunks of two documents were shared between the sets)."""
    has_origin = "origin" in chunks.columns
    docs = chunks.drop_duplicates(["language", "document"])
    strata = [(lang, o) for lang, o in zip(docs["language"], docs["origin"] if has_origin else [""] * len(docs))]
    lone = {lang for lang, o in set(strata) if strata.count((lang, o)) < 2}  # an origin of one document:
    strata = [(lang, "") if lang in lone else (lang, o) for lang, o in strata]  # that language by language only
    sets = stratified_selection(strata, list(docs["document"]), fraction, seed,
                                "lm_heldout.parquet documents (params data.splits)")
    of_doc = dict(zip(zip(docs["language"], docs["document"]), sets))
    return [of_doc[key] for key in zip(chunks["language"], chunks["document"])]


def _add(out: dict[str, dict[str, Any]], record: dict[str, Any], benchmark: str, name: str, frame: Any,
         where: list[str], unit: str, keys: list[str], params: dict[str, Any]) -> None:
    import pandas as pd

    labels = pd.Series(where, index=frame.index)
    for split in (SELECT, TEST):
        out[split][name] = frame[labels == split].reset_index(drop=True)
    record[benchmark] = {
        "params": params, "unit": unit,
        "sizes": {split: int((labels == split).sum()) for split in (SELECT, TEST)},
        "members": {split: [k for k, w in zip(keys, where) if w == split] for split in (SELECT, TEST)},
    }

