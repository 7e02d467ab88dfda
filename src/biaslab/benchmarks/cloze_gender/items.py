"""ClozeGender inputs: the prepared tables it reads and the ClozeLast items built from GenderLex rows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from biaslab.errors import MissingInputError

REQUIRED_COLUMNS = {
    "genderlex": ["subject", "context_type", "row", "sent_m", "sent_w", "context", "hb", "is_duplicate"],
    "winobias": ["pair_id", "type", "pro_sentence", "anti_sentence", "pro_pronoun", "anti_pronoun",
                 "occupation", "minimal_pair"],
    "winogender": ["item_id", "occupation", "sentence_male", "sentence_female", "sentence_neutral",
                   "bls_pct_female"],
    "crows_pairs": ["pair_id", "sent_more", "sent_less", "stereo_antistereo", "bias_type", "is_duplicate"],
    "gender_pairs": ["language", "male", "female"],
    "genderlex_wino": ["dataset", "context_type", "row", "sent_m", "sent_w", "context", "pronoun_m", "pronoun_w",
                       "hb", "is_duplicate"],
}


def read_table(prepared_dir: Path, dataset: str) -> pd.DataFrame:
    """Read ``<dataset>.parquet`` and check its columns (error names the file and what is missing)."""
    path = Path(prepared_dir) / f"{dataset}.parquet"
    if not path.is_file():
        raise MissingInputError(f"{path}: prepared table missing; run the prepare stage (or drop {dataset!r} "
                                f"from cloze_gender options.datasets)")
    frame = pd.read_parquet(path)
    missing = [c for c in REQUIRED_COLUMNS[dataset] if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; see docs/prepared_schema.md")
    return frame.reset_index(drop=True)


def split_last_word(sentence: str) -> tuple[str, str]:
    """``"... crafted by him"`` -> ``("... crafted by", "him")`` (the authors' ``text.split()[:-1]``)."""
    words = sentence.split()
    if len(words) < 2:
        raise ValueError(f"sentence needs a context and a last word: {sentence!r}")
    return " ".join(words[:-1]), words[-1]


def pronoun_word(token: str) -> str:
    """The word used for sim(): the last word without surrounding punctuation, lowercased."""
    return token.strip(".,;:!?\"'").lower()


def cloze_items(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``prefix``, ``last_m``/``last_w`` (scored tokens) and ``pronoun_m``/``pronoun_w`` (for sim)."""
    prefixes, last_m, last_w = [], [], []
    for i, row in enumerate(frame.itertuples(index=False)):
        prefix_m, word_m = split_last_word(row.sent_m)
        prefix_w, word_w = split_last_word(row.sent_w)
        if prefix_m != prefix_w:
            raise ValueError(
                f"genderlex.parquet row {i} ({row.subject}/{row.context_type}, source row {row.row}): sent_m and "
                f"sent_w differ before the last word; ClozeLast needs the same prefix"
            )
        prefixes.append(prefix_m)
        last_m.append(word_m)
        last_w.append(word_w)
    out = frame.copy()
    out["prefix"], out["last_m"], out["last_w"] = prefixes, last_m, last_w
    out["pronoun_m"] = [pronoun_word(w) for w in last_m]
    out["pronoun_w"] = [pronoun_word(w) for w in last_w]
    return out
