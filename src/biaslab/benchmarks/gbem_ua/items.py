"""GBEM-UA items: the prepared rows to score, their three groups and the matched male/female pairs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from biaslab.data.splits import GBEM_UA_LABELS

NAME = "gbem_ua"
QA_PROMPT = "Відповідай так чи ні: "
BLANK = "BLANK "
NEGATION = "не "

# group name -> (is_male, is_feminitive)
GROUPS: dict[str, tuple[bool, bool]] = {
    "man_nofem": (True, False),
    "woman_nofem": (False, False),
    "woman_fem": (False, True),
}
# pairing name -> female group compared with man_nofem
PAIRINGS: dict[str, str] = {"fem": "woman_fem", "nofem": "woman_nofem"}
PAIR_KEY = ["profession", "experience", "is_correct"]
REQUIRED_COLUMNS = [
    "item_id", "profession", "experience", "is_male", "is_correct", "is_feminitive", "qa_sentence", "prob_sentence",
]
ITEMS = ("heldout", "all")


def load_items(path: Path, items: str = "heldout", source_file: str = "test", split: str = "test") -> pd.DataFrame:
    """Rows of the prepared table from ``source_file``: the professions of item set ``split`` (``test`` =
    ``split == "eval"``, ``select`` = ``"validation"``; :data:`biaslab.data.splits.GBEM_UA_LABELS`) or all."""
    frame = pd.read_parquet(path)
    for column in ("split", "source_file"):
        if column not in frame.columns:
            raise ValueError(f"{path}: missing column {column!r} (see docs/prepared_schema.md)")
    keep = frame["source_file"] == source_file
    if items == "heldout":
        keep &= frame["split"].map(GBEM_UA_LABELS) == split
    selected = frame[keep]
    if selected.empty:
        raise ValueError(f"{path}: no rows with source_file={source_file!r} (items={items!r})")
    return selected.reset_index(drop=True)


def select_items(frame: pd.DataFrame, max_professions: int | None = None) -> pd.DataFrame:
    """The scored items (three groups) with a ``group`` column, in the frame's order."""
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"gbem_ua frame: missing column(s) {missing}")
    if max_professions is not None:
        keep = sorted(frame["profession"].unique())[: int(max_professions)]
        frame = frame[frame["profession"].isin(keep)]
    group = pd.Series(None, index=frame.index, dtype=object)
    for name, (is_male, is_fem) in GROUPS.items():
        group[(frame["is_male"] == is_male) & (frame["is_feminitive"] == is_fem)] = name
    items = frame.assign(group=group)
    items = items[items["group"].notna()].reset_index(drop=True)
    for column in ("is_male", "is_correct", "is_feminitive"):
        items[column] = items[column].astype(bool)
    return items


def match_pairs(items: pd.DataFrame) -> pd.DataFrame:
    """One row per (pairing, man/no-fem item, matching female item): ``male_item_id``, ``female_item_id``.

    Items are matched on profession, experience and relevance (and source file, when the frame mixes
    train and test rows); a repeated key (e.g. a duplicated block) is matched by order of appearance.
    An unmatched item raises, naming it.
    """
    key = PAIR_KEY + (["source_file"] if "source_file" in items.columns else [])

    def keyed(group: str) -> pd.DataFrame:
        part = items.loc[items["group"] == group, key + ["item_id"]]
        return part.assign(occurrence=part.groupby(key, sort=False).cumcount())

    male = keyed("man_nofem")
    pairs = []
    for pairing, female_group in PAIRINGS.items():
        merged = male.merge(
            keyed(female_group), on=key + ["occurrence"], how="outer", suffixes=("_male", "_female"),
            indicator=True,
        )
        lonely = merged[merged["_merge"] != "both"]
        if not lonely.empty:
            ids = lonely["item_id_male"].fillna(lonely["item_id_female"]).tolist()
            raise ValueError(
                f"gbem_ua: {len(ids)} item(s) without a man_nofem/{female_group} partner "
                f"(same profession, experience, is_correct): {ids[:10]}"
            )
        merged = merged.rename(columns={"item_id_male": "male_item_id", "item_id_female": "female_item_id"})
        pairs.append(merged[PAIR_KEY + ["male_item_id", "female_item_id"]].assign(pairing=pairing))
    return pd.concat(pairs, ignore_index=True)[["pairing"] + PAIR_KEY + ["male_item_id", "female_item_id"]]


def prob_sentences(items: pd.DataFrame) -> tuple[list[str], list[str]]:
    """(positive, negative) sentences; every ``prob_sentence`` must contain ``"BLANK "``."""
    bad = items.loc[~items["prob_sentence"].str.contains(BLANK, regex=False), "item_id"].tolist()
    if bad:
        raise ValueError(f"gbem_ua: prob_sentence without {BLANK!r} in item(s) {bad[:10]}")
    sentences = items["prob_sentence"]
    positive = sentences.str.replace(BLANK, "", regex=False).tolist()
    negative = sentences.str.replace(BLANK, NEGATION, regex=False).tolist()
    return positive, negative
