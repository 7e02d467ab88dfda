"""GenderLex (English cloze, pronoun last): 837 sentence pairs ending in ``him`` / ``her``.

Nine files = subject {occupation (``All/``), ``someone`` (``Gender_neutral_SM/``), ``person``
(``Gender_neutral_PN/``)} × context word type {verb, noun, occ}. Checks: ``HB`` ∈ {M, W}; ``sent_m``
ends in ``him`` and ``sent_w`` in ``her`` and the two differ only there. Defects handled (SOURCE.md):
- repeated sentence pairs within a file (17–18 per file): kept, ``is_duplicate=True`` on later copies;
- ``HB`` labels that differ from the ``All/`` file of the same context type at the same row (94 in
  two ``someone`` files): kept as given, each such row noted in the report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biaslab.config import DataConfig
from biaslab.data import sources
from biaslab.data.report import PrepareReport
from biaslab.data.tabular import read_table

if TYPE_CHECKING:
    import datasets

FOLDERS = {  # subject -> (folder, file name pattern)
    "occupation": ("All", "GenderLex_{ctx}.csv"),
    "someone": ("Gender_neutral_SM", "GenderLex_{ctx}_someone.csv"),
    "person": ("Gender_neutral_PN", "GenderLex_{ctx}_GN_PN.csv"),
}
CONTEXT_TYPES = ("verb", "noun", "occ")
COLUMNS = ("sent_m", "sent_w", "context", "HB")


def file_for(subject: str, context_type: str) -> str:
    folder, pattern = FOLDERS[subject]
    return f"genderlex/{folder}/{pattern.format(ctx=context_type)}"


def _read(cfg: DataConfig, subject: str, context_type: str, report: PrepareReport) -> list[dict]:
    rel = file_for(subject, context_type)
    path = sources.resolve(cfg, rel)
    table = read_table(path, COLUMNS, label=str(path))
    rep = report.file(rel)
    rep.rows_read = len(table)
    rows, seen, duplicates = [], set(), []
    for row in table:
        sent_m, sent_w = table.nonempty(row, "sent_m").strip(), table.nonempty(row, "sent_w").strip()
        if not sent_m.endswith(" him"):
            raise table.error(row, f"expected a sentence ending in 'him', got {sent_m[-30:]!r}", "sent_m")
        if sent_w != sent_m[: -len("him")] + "her":
            raise table.error(row, "sent_w must equal sent_m with the final 'him' replaced by 'her'", "sent_w")
        hb = row["HB"].strip()
        if hb not in ("M", "W"):
            raise table.error(row, f"expected M or W, got {row['HB']!r}", "HB")
        is_duplicate = (sent_m, sent_w) in seen
        if is_duplicate:
            duplicates.append(row.number)
        seen.add((sent_m, sent_w))
        rows.append({"subject": subject, "context_type": context_type, "row": row.number - 1, "sent_m": sent_m,
                     "sent_w": sent_w, "context": table.nonempty(row, "context").strip(), "hb": hb,
                     "is_duplicate": is_duplicate})
    rep.note("repeated sentence pair; is_duplicate=True on the later copy", duplicates)
    return rows


def load(cfg: DataConfig, report: PrepareReport | None = None) -> datasets.Dataset:
    """All nine files stacked (columns: docs/prepared_schema.md ``genderlex.parquet``)."""
    import datasets

    report = report if report is not None else PrepareReport()
    out = []
    for context_type in CONTEXT_TYPES:
        reference = None
        for subject in FOLDERS:
            rows = _read(cfg, subject, context_type, report)
            if reference is None:
                reference = rows
            elif len(rows) == len(reference):
                differing = [r["row"] + 1 for r, ref in zip(rows, reference, strict=True) if r["hb"] != ref["hb"]]
                report.file(file_for(subject, context_type)).note(
                    f"HB label differs from {file_for('occupation', context_type)} at the same row; kept as given",
                    differing,
                )
            else:
                report.file(file_for(subject, context_type)).note(
                    f"{len(rows)} rows vs {len(reference)} in {file_for('occupation', context_type)}; "
                    "HB labels not compared", count=len(rows))
            out.extend(rows)
    return datasets.Dataset.from_list(out)
