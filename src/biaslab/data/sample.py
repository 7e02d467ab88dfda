"""A smaller copy of every benchmark table, for smoke runs: ``data.sample`` (off by default).

Reduced benchmark sizes without touching any benchmark: ``prepare`` keeps at most ``per_group`` *units*
of each *stratum* of a table, chosen by a seeded shuffle. A unit is what a benchmark's metric needs
whole (a GBEM-UA profession with all its male/female, feminitive and experience rows; a Winogender
occupation; a GenderLex sentence with its rows in all nine files, for the combined column; a sentence
pair elsewhere); strata are the groups a metric is reported for (GBEM-UA split, OccuGender job group,
CrowS-Pairs bias type, RuBia subdomain, WinoBias type and split, the ClozeGender authors' extracted
WinoBias/Winogender dataset and context type), so no reported group goes empty. The gender word pairs
are kept whole (the embedding edit's subspace), and ``gbem_ua_split.json`` lists the professions that remain.
"""

from __future__ import annotations

from typing import Any

# table -> (unit column or None = the row, stratum columns); tables not listed are kept whole
UNITS: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "gbem_ua.parquet": ("profession", ("split",)),
    "occugender_jobs.parquet": ("job", ("group",)),
    "rubia.parquet": (None, ("domain", "subdomain")),
    "crows_pairs.parquet": (None, ("bias_type",)),
    "winobias.parquet": (None, ("type", "split")),
    "winogender.parquet": ("occupation", ()),
    "genderlex.parquet": ("row", ()),  # a sentence in every folder and context file (the combined column)
    "genderlex_wino.parquet": (None, ("dataset", "context_type")),
    "lm_heldout.parquet": (None, ("language",)),
}


def sample_frame(frame: Any, unit: str | None, strata: tuple[str, ...], per_group: int, seed: int) -> Any:
    """The rows of at most ``per_group`` units per stratum of ``frame`` (pandas), in the original row order."""
    import numpy as np

    units = frame[unit] if unit else frame.index.to_series(index=frame.index)
    keys = frame[list(strata)].astype(str).agg("\x1f".join, axis=1) if strata else units.map(lambda _: "")
    rng = np.random.default_rng(seed)
    keep: set = set()
    for stratum in sorted(keys.unique()):
        members = sorted(units[keys == stratum].unique(), key=str)
        chosen = rng.permutation(len(members))[:per_group]
        keep |= {members[i] for i in chosen}
    return frame[units.isin(keep)]


def sample_tables(tables: dict[str, Any], per_group: int, seed: int) -> dict[str, Any]:
    """``{name: datasets.Dataset}`` with every listed table cut down by :func:`sample_frame`."""
    from datasets import Dataset

    out = {}
    for name, table in tables.items():
        if name not in UNITS:
            out[name] = table
            continue
        unit, strata = UNITS[name]
        frame = table.to_pandas()
        out[name] = Dataset.from_pandas(sample_frame(frame, unit, strata, per_group, seed), preserve_index=False,
                                        features=table.features)
    return out
