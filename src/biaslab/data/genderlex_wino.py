"""The ClozeGender authors' WinoBias / Winogender sentences (paper Table 4), an optional dataset.

The authors re-wrote WinoBias type-2 sentences ("The person argued with the designer and slapped him in
the face.", 785 rows) and Winogender sentences (178 rows) as ``sent_m`` / ``sent_w`` pairs and extracted by
hand the verb (``*_verb.csv``) or the occupation (``*_occ.csv``) that the pronoun relates to, with the
pronouns (``prounoun_m`` / ``prounoun_w``, sic) and the human-bias label ``HB``. They are in the authors'
repository history (ahmedssabir/GenderLex at f103c82, ``data/WinoBias``, ``data/WinoGender``), not in the
shared mirror; the files are read from ``<mirror>/genderlex/extracted/`` or the download cache, or
downloaded when ``data.allow_download`` is on. When none of that works, :func:`load` returns ``None`` and
the prepare report says why; the benchmark then skips the dataset with that reason.

Checks: the six columns, ``HB`` in {M, W}, non-empty sentences, context and pronouns. Kept as the
authors have them (every row counts in their numbers), each noted in the report: repeated sentence
pairs (``is_duplicate`` on the later copy), pairs that differ in more than the pronoun, and context words
that do not occur in the sentence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biaslab.config import DataConfig
from biaslab.data import sources
from biaslab.data.report import PrepareReport
from biaslab.data.tabular import read_table

if TYPE_CHECKING:
    import datasets

FILES = {  # (dataset, context_type) -> file relative to the mirror root
    ("winobias", "verb"): "genderlex/extracted/WinoBias/winobias_verb.csv",
    ("winobias", "occ"): "genderlex/extracted/WinoBias/winobias_occ.csv",
    ("winogender", "verb"): "genderlex/extracted/WinoGender/winogender_verb.csv",
    ("winogender", "occ"): "genderlex/extracted/WinoGender/winogender_occ.csv",
}
COLUMNS = ("sent_m", "sent_w", "context", "prounoun_m", "prounoun_w", "HB")


def _only_pronoun_differs(sent_m: str, sent_w: str, pronoun_m: str, pronoun_w: str) -> bool:
    a, b = sent_m.split(), sent_w.split()
    diff = [(x, y) for x, y in zip(a, b) if x != y]
    return len(a) == len(b) and bool(diff) and all(
        x.strip(".,;:!?\"'").lower() == pronoun_m and y.strip(".,;:!?\"'").lower() == pronoun_w for x, y in diff)


def _read(path, rel: str, dataset: str, context_type: str, report: PrepareReport) -> list[dict]:
    table = read_table(path, COLUMNS, label=str(path))
    rep = report.file(rel)
    rep.rows_read = len(table)
    rows, seen = [], set()
    duplicates, not_minimal, context_missing = [], [], []
    for row in table:
        sent_m, sent_w = table.nonempty(row, "sent_m").strip(), table.nonempty(row, "sent_w").strip()
        pronoun_m = table.nonempty(row, "prounoun_m").strip().lower()
        pronoun_w = table.nonempty(row, "prounoun_w").strip().lower()
        context = table.nonempty(row, "context").strip()
        hb = row["HB"].strip()
        if hb not in ("M", "W"):
            raise table.error(row, f"expected M or W, got {row['HB']!r}", "HB")
        if (sent_m, sent_w) in seen:
            duplicates.append(row.number)
        if not _only_pronoun_differs(sent_m, sent_w, pronoun_m, pronoun_w):
            not_minimal.append(row.number)
        if context.lower() not in sent_m.lower():
            context_missing.append(row.number)
        rows.append({"dataset": dataset, "context_type": context_type, "row": row.number - 1, "sent_m": sent_m,
                     "sent_w": sent_w, "context": context, "pronoun_m": pronoun_m, "pronoun_w": pronoun_w,
                     "hb": hb, "is_duplicate": (sent_m, sent_w) in seen})
        seen.add((sent_m, sent_w))
    rep.note("repeated sentence pair; kept (the authors count it), is_duplicate=True on the later copy", duplicates)
    rep.note("sent_m and sent_w differ in more than the pronoun; kept as the authors have it", not_minimal)
    rep.note("context word not found verbatim in the sentence; kept as the authors have it", context_missing)
    return rows


def load(cfg: DataConfig, report: PrepareReport | None = None) -> datasets.Dataset | None:
    """All four files stacked, or ``None`` (reason in the report) when any of them cannot be had."""
    import datasets

    report = report if report is not None else PrepareReport()
    paths = {}
    for key, rel in FILES.items():
        path, _ = sources.resolve_optional(cfg, rel)
        if path is None:  # the same note whatever the cause, so the report does not depend on paths or network
            report.file(rel).note("optional file not available (not in the mirror nor the download cache, and not "
                                  "downloadable: data.allow_download off, or no network); genderlex_wino.parquet "
                                  "not written", count=1)
            return None
        paths[key] = path
    out = []
    for (dataset, context_type), path in paths.items():
        out.extend(_read(path, FILES[(dataset, context_type)], dataset, context_type, report))
    return datasets.Dataset.from_list(out)
