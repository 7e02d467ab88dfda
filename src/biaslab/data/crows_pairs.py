"""CrowS-Pairs (English): sentence pairs (more vs less stereotypical) over 9 bias types.

Checks: required columns, integer unique ``pair_id``, ``stereo_antistereo`` ∈ {stereo, antistereo},
non-empty sentences. The one exact duplicate pair (Muslims/Christians, SOURCE.md) is kept with
``is_duplicate=True`` on the later copy (reported), so scores can exclude it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biaslab.config import DataConfig
from biaslab.data import sources
from biaslab.data.report import PrepareReport
from biaslab.data.tabular import read_table

if TYPE_CHECKING:
    import datasets

FILE = "crows_pairs/crows_pairs_anonymized.csv"
COLUMNS = ("", "sent_more", "sent_less", "stereo_antistereo", "bias_type")
LABELS = ("stereo", "antistereo")


def load(cfg: DataConfig, report: PrepareReport | None = None) -> datasets.Dataset:
    """Pairs: ``pair_id``, ``sent_more``, ``sent_less``, ``stereo_antistereo``, ``bias_type``, ``is_duplicate``."""
    import datasets

    report = report if report is not None else PrepareReport()
    path = sources.resolve(cfg, FILE)
    table = read_table(path, COLUMNS, label=str(path))
    rep = report.file(FILE)
    rep.rows_read = len(table)
    rows, seen_pairs, seen_ids, duplicates = [], set(), set(), []
    for row in table:
        pair_id = table.parse_int(row, "")
        if pair_id in seen_ids:
            raise table.error(row, f"duplicate index {pair_id}", "")
        seen_ids.add(pair_id)
        more, less = table.nonempty(row, "sent_more").strip(), table.nonempty(row, "sent_less").strip()
        label = row["stereo_antistereo"].strip()
        if label not in LABELS:
            raise table.error(row, f"expected one of {LABELS}, got {label!r}", "stereo_antistereo")
        is_duplicate = (more, less) in seen_pairs
        if is_duplicate:
            duplicates.append(row.number)
        seen_pairs.add((more, less))
        rows.append({"pair_id": pair_id, "sent_more": more, "sent_less": less, "stereo_antistereo": label,
                     "bias_type": table.nonempty(row, "bias_type").strip(), "is_duplicate": is_duplicate})
    rep.note("exact duplicate of an earlier pair; is_duplicate=True", duplicates)
    return datasets.Dataset.from_list(rows)
