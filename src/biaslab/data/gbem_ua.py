"""GBEM-UA (Ukrainian hiring bias): QA and probability sentences joined, split by profession.

Each profession comes as blocks of 8 variants = candidate gender (``is_male``) × relevant
experience (``is_correct``) × feminine job title (``is_feminitive``). Row *i* of
``acc_dataset/X`` (yes/no questions) and row *i* of ``prob_dataset/X`` (cloze with ``BLANK``)
describe the same item; this is checked, and a mismatch is an error.

Defects handled (SOURCE.md):
- ``урядовець`` has two complete 8-row blocks in every file: the second is dropped (reported) so
  every profession has the same weight in the metrics.
- train ``амбасадор`` has an incomplete extra block (4 feminine-title rows): dropped (reported). Any
  *other* incomplete block – a profession missing e.g. its female or feminine-title variant – is
  an error: the gender-difference metrics would silently compare unequal sets.
- ``рибалка``'s feminine and masculine titles coincide, so 4 sentences repeat: kept, noted.
- leading/trailing spaces in ``experience``: stripped, reported as fixed.

Professions are split deterministically (``data.gbem_ua``) into ``finetune``/``validation``/``eval``;
the split is by profession, so evaluation professions never appear in fine-tuning or validation.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from biaslab.config import DataConfig, GbemUaSplit
from biaslab.data import sources
from biaslab.data.errors import DataError
from biaslab.data.report import FileReport, PrepareReport
from biaslab.data.tabular import read_table

if TYPE_CHECKING:
    import datasets

FILES = {  # source_file -> (QA file, probability file), relative to the mirror root
    "train": ("gbem_ua/acc_dataset/train_dataset_acc.csv", "gbem_ua/prob_dataset/train_dataset.csv"),
    "test": ("gbem_ua/acc_dataset/test_dataset_acc.csv", "gbem_ua/prob_dataset/test_dataset.csv"),
}
COLUMNS = ("sentence", "profession", "experience", "is_male", "is_correct", "is_feminitive")
FLAGS = ("is_male", "is_correct", "is_feminitive")
VARIANTS = frozenset((m, c, f) for m in (True, False) for c in (True, False) for f in (True, False))
# incomplete extra blocks documented in SOURCE.md: dropped when the profession also has a full block
KNOWN_INCOMPLETE_BLOCKS = frozenset({("train", "амбасадор")})


@dataclass(frozen=True)
class Item:
    row: int  # 1-based data row
    line: int
    sentence: str
    profession: str
    experience: str
    flags: tuple[bool, bool, bool]  # is_male, is_correct, is_feminitive


def _describe(variant: tuple[bool, bool, bool]) -> str:
    male, correct, fem = variant
    return (f"{'male' if male else 'female'} candidate, {'relevant' if correct else 'irrelevant'} experience, "
            f"{'feminine' if fem else 'masculine'} job title")


def _read(cfg: DataConfig, rel: str, report: PrepareReport, *, cloze: bool) -> tuple[str, list[Item]]:
    path = sources.resolve(cfg, rel)
    table = read_table(path, COLUMNS, label=str(path))
    rep = report.file(rel)
    rep.rows_read = len(table)
    items, stripped = [], []
    for row in table:
        sentence = table.nonempty(row, "sentence")
        profession = table.nonempty(row, "profession").strip()
        experience = row["experience"].strip()
        if experience != row["experience"]:
            stripped.append(row.number)
        flags = tuple(table.parse_bool(row, c) for c in FLAGS)
        if flags[0] == sentence.startswith("Кандидатка"):
            raise table.error(row, f"is_male={flags[0]} contradicts the sentence {sentence[:40]!r}…", "is_male")
        if cloze and "BLANK " not in sentence:
            raise table.error(row, "probability sentence lacks the 'BLANK ' placeholder", "sentence")
        items.append(Item(row.number, row.line, sentence, profession, experience, flags))
    rep.fix("leading/trailing whitespace stripped from experience", stripped)
    counts = Counter(i.sentence for i in items)
    rep.note(
        "identical sentence repeated (feminine and masculine job titles coincide); kept",
        [i.row for i in items if counts[i.sentence] > 1],
    )
    return str(path), items


def _check_aligned(acc: tuple[str, list[Item]], prob: tuple[str, list[Item]]) -> None:
    """Row i of the QA file must describe the same item as row i of the probability file."""
    (acc_path, acc_items), (prob_path, prob_items) = acc, prob
    if len(acc_items) != len(prob_items):
        raise DataError(prob_path, f"has {len(prob_items)} data rows but {acc_path} has {len(acc_items)}; "
                        "rows must be aligned one-to-one")
    for a, p in zip(acc_items, prob_items, strict=True):
        for name, x, y in (("profession", a.profession, p.profession), ("experience", a.experience, p.experience),
                           *((f, xa, ya) for f, xa, ya in zip(FLAGS, a.flags, p.flags, strict=True))):
            if x != y:
                raise DataError(prob_path, f"{y!r} differs from {x!r} in the aligned row of {acc_path}",
                                row=p.row, line=p.line, column=name)


def _blocks(items: list[Item]) -> list[list[Item]]:
    """Consecutive rows of one profession, cut where a variant repeats (a new 8-variant block starts)."""
    blocks: list[list[Item]] = []
    for item in items:
        current = blocks[-1] if blocks else None
        if current and current[0].profession == item.profession and item.flags not in {i.flags for i in current}:
            current.append(item)
        else:
            blocks.append([item])
    return blocks


def _select(source: str, path: str, items: list[Item], reports: list[FileReport]) -> list[Item]:
    """Keep the first complete block of each profession; drop known extra blocks; fail on asymmetry."""
    blocks = _blocks(items)
    complete = {b[0].profession for b in blocks if {i.flags for i in b} == VARIANTS}
    kept, seen = [], set()
    for block in blocks:
        profession, rows = block[0].profession, [i.row for i in block]
        missing = VARIANTS - {i.flags for i in block}
        if missing:
            if (source, profession) in KNOWN_INCOMPLETE_BLOCKS and profession in complete:
                for rep in reports:
                    rep.drop(f"incomplete extra block of profession {profession!r} (known defect)", rows)
                continue
            lacking = "; ".join(_describe(v) for v in sorted(missing, reverse=True))
            raise DataError(path, f"profession {profession!r}: asymmetric variant group (data rows "
                            f"{rows[0]}-{rows[-1]}) lacks: {lacking}", row=rows[0], line=block[0].line)
        if profession in seen:
            for rep in reports:
                rep.drop(f"second complete block of profession {profession!r}; the first is kept so every "
                         "profession has 8 variants", rows)
            continue
        seen.add(profession)
        kept.extend(block)
    return kept


def split_professions(professions: list[str], cfg: GbemUaSplit) -> dict[str, list[str]]:
    """Deterministic split by profession: ``finetune`` + ``validation`` (the fine-tune share) and ``eval``.

    ``n_finetune_total = round_half_up(finetune_fraction × n)`` (0.5 × 349 → 175, as in the paper);
    validation takes ``round_half_up(validation_fraction × n_finetune_total)`` of those.
    """
    names = sorted(set(professions))
    random.Random(cfg.seed).shuffle(names)
    n_tune = math.floor(cfg.finetune_fraction * len(names) + 0.5)
    n_val = math.floor(cfg.validation_fraction * n_tune + 0.5)
    if not 0 < n_val < n_tune < len(names):
        raise DataError("params.yaml", f"data.gbem_ua fractions leave an empty split for {len(names)} professions")
    return {
        "finetune": sorted(names[n_val:n_tune]),
        "validation": sorted(names[:n_val]),
        "eval": sorted(names[n_tune:]),
    }


def load(cfg: DataConfig, report: PrepareReport | None = None) -> datasets.Dataset:
    """All GBEM-UA items (train and test files) with their profession split, as a ``datasets.Dataset``."""
    import datasets
    import pandas as pd

    report = report if report is not None else PrepareReport()
    records = []
    for source, (acc_rel, prob_rel) in FILES.items():
        acc = _read(cfg, acc_rel, report, cloze=False)
        prob = _read(cfg, prob_rel, report, cloze=True)
        _check_aligned(acc, prob)
        kept = _select(source, acc[0], acc[1], [report.file(acc_rel), report.file(prob_rel)])
        prob_by_row = {i.row: i for i in prob[1]}
        for item in kept:
            records.append({
                "item_id": f"{source}:{item.row - 1}", "source_file": source, "row": item.row - 1,
                "profession": item.profession, "experience": item.experience,
                "is_male": item.flags[0], "is_correct": item.flags[1], "is_feminitive": item.flags[2],
                "qa_sentence": item.sentence, "prob_sentence": prob_by_row[item.row].sentence,
            })
    frame = pd.DataFrame.from_records(records)
    split = split_professions(frame["profession"].tolist(), cfg.gbem_ua)
    where = {p: name for name, members in split.items() for p in members}
    frame["split"] = frame["profession"].map(where)
    return datasets.Dataset.from_pandas(frame, preserve_index=False)
