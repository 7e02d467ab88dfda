"""CrowS-Pairs inputs: the prepared pairs (``sent_more``, ``sent_less``, direction, bias type)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from biaslab.benchmarks.base import read_prepared_table

REQUIRED_COLUMNS = ("pair_id", "sent_more", "sent_less", "stereo_antistereo", "bias_type", "is_duplicate")


def load_pairs(prepared_dir: Path, drop_duplicates: bool) -> pd.DataFrame:
    frame = read_prepared_table(prepared_dir, "crows_pairs", REQUIRED_COLUMNS)
    if drop_duplicates:
        frame = frame[~frame["is_duplicate"].astype(bool)]
    return frame.reset_index(drop=True)
