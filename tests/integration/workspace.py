"""The tiny LoRA workspace the fine-tune and tuning integration tests train on in subprocesses.

Both need the same on-disk layout, small enough for CPU training in seconds: the session's tiny
causal model and tokenizer saved as ``<root>/base``, and ``<root>/gbem.parquet`` with the real
GBEM-UA train items of a few professions, shaped like the prepared table ``finetune`` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd


def write_workspace(root: Path, mirror: Path, model, tokenizer, splits: Sequence[str]) -> Path:
    """Write ``root/base`` and ``root/gbem.parquet``; returns ``root``.

    ``splits[i]`` is the split (``finetune`` / ``validation``) of the i-th profession in sorted order;
    only the first ``len(splits)`` professions are kept.
    """
    model.save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    raw = pd.read_csv(mirror / "gbem_ua" / "acc_dataset" / "train_dataset_acc.csv")
    professions = sorted(raw["profession"].unique())[: len(splits)]
    df = raw[raw["profession"].isin(professions)].rename(columns={"sentence": "qa_sentence"}).reset_index(drop=True)
    df["item_id"] = [f"train:{i}" for i in range(len(df))]
    df["split"] = df["profession"].map(dict(zip(professions, splits)))
    df.to_parquet(root / "gbem.parquet")
    return root
