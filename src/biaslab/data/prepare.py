"""The ``prepare`` stage: every raw dataset → validated tables in ``data.prepared_dir``.

All loaders run first; the output directory is then written through
:func:`biaslab.atomic.atomic_dir`, so a failure anywhere leaves no partial ``data/prepared/``.
Tables and columns: ``docs/prepared_schema.md``. The ``train/``, ``select/`` and ``test/`` folders hold the
items of each set of the benchmarks a choice or the gate reads, ``splits.json`` records them
(:mod:`biaslab.data.splits`, ``docs/splits.md``). ``prepare_report.json`` says, per raw file, how many
rows were read, dropped and fixed and why; its ``tables`` section gives each table's row count.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from biaslab.atomic import atomic_dir
from biaslab.config import Params
from biaslab.data import (
    crows_pairs,
    gbem_ua,
    gender_pairs,
    genderlex,
    genderlex_wino,
    lm_heldout,
    occugender,
    rubia,
    winobias,
    splits,
    winogender,
)
from biaslab.data.report import PrepareReport

REPORT_FILE = "prepare_report.json"


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def prepare(params: Params) -> dict[str, Any]:
    """Load, validate and write all prepared tables; returns the report (also written as JSON)."""
    import pyarrow.parquet as pq

    cfg = params.data
    report = PrepareReport()
    tables = {  # file name -> datasets.Dataset, loaded (and validated) before anything is written
        "gbem_ua.parquet": gbem_ua.load(cfg, report),
        "gender_pairs.parquet": gender_pairs.load(cfg, report),
        "occugender_jobs.parquet": occugender.load(cfg, report),
        "rubia.parquet": rubia.load(cfg, report),
        "crows_pairs.parquet": crows_pairs.load(cfg, report),
        "winobias.parquet": winobias.load(cfg, report),
        "winogender.parquet": winogender.load(cfg, report),
        "genderlex.parquet": genderlex.load(cfg, report),
    }
    if params.data.lm_heldout.languages:  # the lm_quality benchmark's held-out text (none when no language is asked)
        tables["lm_heldout.parquet"] = lm_heldout.load(params, report)
    optional = genderlex_wino.load(cfg, report)  # the ClozeGender authors' WinoBias/Winogender sentences
    if optional is not None:
        tables["genderlex_wino.parquet"] = optional
    split = gbem_ua.split_professions(tables["gbem_ua.parquet"]["profession"], cfg.gbem_ua)  # of the full table
    if cfg.sample is not None:  # a smoke run: fewer items per reported group (biaslab.data.sample)
        from biaslab.data.sample import sample_tables

        tables = sample_tables(tables, cfg.sample.per_group, cfg.sample.seed)
        kept = set(tables["gbem_ua.parquet"]["profession"])
        split = {name: [p for p in professions if p in kept] for name, professions in split.items()}
    documents = {
        "gbem_ua_split.json": split,
        "occugender_spec.json": occugender.load_spec(cfg, report),
        "winobias_occupations.json": winobias.load_occupations(cfg, report),
    }
    split_files, split_record = splits.build(tables, documents["occugender_spec.json"], cfg)
    documents[splits.RECORD] = split_record
    for name, table in tables.items():
        report.tables[name] = table.num_rows
    result = report.to_dict()
    result["gbem_ua_split"] = {k: len(v) for k, v in documents["gbem_ua_split.json"].items()}
    result["splits"] = {benchmark: entry["sizes"] for benchmark, entry in split_record.items()}
    result["sample"] = cfg.sample.model_dump() if cfg.sample is not None else None
    with atomic_dir(cfg.prepared_dir) as out:
        for name, table in tables.items():
            pq.write_table(table.with_format("arrow")[:], out / name)
        for name, document in documents.items():
            _write_json(out / name, document)
        for split, files in split_files.items():
            folder = out / split
            folder.mkdir()
            for name, content in files.items():
                if name.endswith(".parquet"):
                    content.to_parquet(folder / name, index=False)
                else:
                    _write_json(folder / name, content)
            rows = {name: len(c) for name, c in files.items() if name.endswith(".parquet")}
            params_used = {"data.gbem_ua": cfg.gbem_ua.model_dump(), "data.splits": cfg.splits.model_dump()}
            _write_json(folder / splits.MANIFEST, splits.manifest(split, rows, params_used))
        _write_json(out / REPORT_FILE, result)
    return result
