"""Winogender schemas (English): each template instance as male / female / neutral sentences.

``all_sentences.tsv`` ids are ``<occupation>.<participant>.<answer>.<gender>.txt``; the three
gender versions of one (occupation, participant, answer) become one row, joined with the
occupation's % female (BLS and Bergsma) from ``occupations-stats.tsv``. A malformed id, a missing
gender version, a duplicate id, or occupation sets that disagree between the three files are errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biaslab.config import DataConfig
from biaslab.data import sources
from biaslab.data.errors import DataError
from biaslab.data.report import PrepareReport
from biaslab.data.tabular import read_table

if TYPE_CHECKING:
    import datasets

SENTENCES_FILE = "winogender/all_sentences.tsv"
TEMPLATES_FILE = "winogender/templates.tsv"
STATS_FILE = "winogender/occupations-stats.tsv"
GENDERS = ("male", "female", "neutral")


def _table(cfg: DataConfig, rel: str, columns: tuple[str, ...], report: PrepareReport):
    path = sources.resolve(cfg, rel)
    table = read_table(path, columns, delimiter="\t", label=str(path))
    report.file(rel).rows_read = len(table)
    return table


def load(cfg: DataConfig, report: PrepareReport | None = None) -> datasets.Dataset:
    """Rows: ``item_id``, ``occupation``, ``participant``, ``answer``, ``sentence_{male,female,neutral}``, stats."""
    import datasets

    report = report if report is not None else PrepareReport()
    sentences = _table(cfg, SENTENCES_FILE, ("sentid", "sentence"), report)
    templates = _table(cfg, TEMPLATES_FILE, ("occupation(0)", "other-participant(1)", "answer", "sentence"), report)
    stats_table = _table(cfg, STATS_FILE, ("occupation", "bergsma_pct_female", "bls_pct_female"), report)

    stats = {}
    for row in stats_table:
        occupation = stats_table.nonempty(row, "occupation").strip()
        if occupation in stats:
            raise stats_table.error(row, f"duplicate occupation {occupation!r}", "occupation")
        stats[occupation] = (stats_table.parse_float(row, "bls_pct_female"),
                             stats_table.parse_float(row, "bergsma_pct_female"))

    items: dict[tuple[str, str, int], dict] = {}
    for row in sentences:
        parts = row["sentid"].strip().split(".")
        if len(parts) != 5 or parts[4] != "txt" or parts[3] not in GENDERS or parts[2] not in ("0", "1"):
            raise sentences.error(row, f"expected <occupation>.<participant>.<0|1>.<gender>.txt, got "
                                  f"{row['sentid']!r}", "sentid")
        occupation, participant, answer, gender = parts[0], parts[1], int(parts[2]), parts[3]
        item = items.setdefault((occupation, participant, answer), {"_row": row})
        if gender in item:
            raise sentences.error(row, f"duplicate id {row['sentid']!r}", "sentid")
        item[gender] = sentences.nonempty(row, "sentence").strip()

    template_occupations = {templates.nonempty(r, "occupation(0)").strip() for r in templates}
    sentence_occupations = {key[0] for key in items}
    for rel, found in ((TEMPLATES_FILE, template_occupations), (SENTENCES_FILE, sentence_occupations)):
        if found != set(stats):
            diff = sorted(found.symmetric_difference(stats))
            raise DataError(sources.resolve(cfg, rel), f"occupations differ from {STATS_FILE}: {diff}")

    rows = []
    for (occupation, participant, answer), item in sorted(items.items()):
        missing = [g for g in GENDERS if g not in item]
        if missing:
            raise sentences.error(item["_row"], f"{occupation}.{participant}.{answer} lacks the {missing} "
                                  "version(s)", "sentid")
        bls, bergsma = stats[occupation]
        rows.append({
            "item_id": f"{occupation}.{participant}.{answer}", "occupation": occupation,
            "participant": participant, "answer": answer, "sentence_male": item["male"],
            "sentence_female": item["female"], "sentence_neutral": item["neutral"],
            "bls_pct_female": bls, "bergsma_pct_female": bergsma,
        })
    return datasets.Dataset.from_list(rows)
