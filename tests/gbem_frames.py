"""Small GBEM-UA tables in the prepared schema, built from the mirror's real rows (for LoRA data tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd


def gbem_frame(mirror: Path, professions: int, split_of: Callable[[int], str]) -> pd.DataFrame:
    """The first ``professions`` professions of the GBEM-UA training file; profession ``i`` gets ``split_of(i)``.

    ``prob_sentence`` is a stand-in (``"BLANK " + qa_sentence``): the item selection requires the column,
    the LoRA examples and pairs never read it.
    """
    raw = pd.read_csv(mirror / "gbem_ua" / "acc_dataset" / "train_dataset_acc.csv")
    names = sorted(raw["profession"].unique())[:professions]
    frame = raw[raw["profession"].isin(names)].rename(columns={"sentence": "qa_sentence"}).reset_index(drop=True)
    frame["experience"] = frame["experience"].str.strip()
    frame["item_id"] = [f"train:{i}" for i in range(len(frame))]
    frame["prob_sentence"] = "BLANK " + frame["qa_sentence"]
    frame["split"] = frame["profession"].map({p: split_of(i) for i, p in enumerate(names)})
    return frame
