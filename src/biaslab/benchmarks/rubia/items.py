"""RuBia inputs: the prepared pairs and which masked-LM scoring (PPLL / MPLL) each pair gets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.benchmarks.base import read_prepared_table

REQUIRED_COLUMNS = ("pair_id", "pro", "anti", "domain", "subdomain", "is_duplicate")


def load_pairs(prepared_dir: Path, drop_defective: bool = False) -> pd.DataFrame:
    frame = read_prepared_table(prepared_dir, "rubia", REQUIRED_COLUMNS)
    if drop_defective and "is_defective" in frame.columns:
        frame = frame[~frame["is_defective"].astype(bool)]
    return frame.reset_index(drop=True)


def masked_methods(frame: pd.DataFrame, options: dict[str, Any]) -> list[str]:
    """``ppll`` or ``mpll`` per pair, from the domain/subdomain lists in ``options``."""
    key = frame["domain"] + "/" + frame["subdomain"]
    use_ppll = frame["domain"].isin(options["ppll_domains"]) | key.isin(options["ppll_subdomains"])
    return ["ppll" if p else "mpll" for p in use_ppll]
