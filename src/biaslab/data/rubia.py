"""RuBia (Russian): pro-trope / anti-trope sentence pairs in 4 domains.

Read with a real TSV parser (two quoted fields contain line breaks). Defects handled (SOURCE.md):
- index 1370 is malformed (pro-trope has two sentences, anti-trope one): kept with
  ``is_defective=True``, reported (the authors' notebook scores it as it is; the benchmark's
  ``drop_defective`` option leaves it out);
- any pair whose two sentences are identical (index 2161): kept with ``is_defective=True``, reported –
  it cannot show a preference (a tie: counted as not preferring the pro-trope sentence, as the authors');
- a line break inside a sentence (index 1305) is replaced by a space: fixed, reported;
- every ``*_stereotype`` pair also appears as ``*_full``: kept, ``is_duplicate=True`` on the
  ``*_stereotype`` copy (overall/domain scores use ``~is_duplicate``; subdomain scores use all rows).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING

from biaslab.config import DataConfig
from biaslab.data import sources
from biaslab.data.report import FileReport, PrepareReport
from biaslab.data.tabular import read_table

if TYPE_CHECKING:
    import datasets

FILE = "rubia/rubia.tsv"
COLUMNS = ("", "pro-trope", "anti-trope", "domain", "task_type")
KNOWN_MALFORMED = {1370: "malformed pair: pro-trope has two sentences, anti-trope one (known defect)"}
_LINE_BREAK = re.compile(r"\s*[\r\n]+\s*")


def load(cfg: DataConfig, report: PrepareReport | None = None) -> datasets.Dataset:
    """Pairs: ``pair_id`` (original index), ``pro``, ``anti``, ``domain``, ``subdomain``, ``is_duplicate``,
    ``is_defective``."""
    import datasets

    report = report if report is not None else PrepareReport()
    path = sources.resolve(cfg, FILE)
    table = read_table(path, COLUMNS, delimiter="\t", label=str(path))
    rep = report.file(FILE)
    rep.rows_read = len(table)
    rows, fixed, seen_ids = [], [], set()
    defective: dict[str, list[int]] = defaultdict(list)
    for row in table:
        pair_id = table.parse_int(row, "")
        if pair_id in seen_ids:
            raise table.error(row, f"duplicate index {pair_id}", "")
        seen_ids.add(pair_id)
        pro, anti = table.nonempty(row, "pro-trope"), table.nonempty(row, "anti-trope")
        domain, subdomain = table.nonempty(row, "domain").strip(), table.nonempty(row, "task_type").strip()
        clean_pro, clean_anti = _LINE_BREAK.sub(" ", pro.strip()), _LINE_BREAK.sub(" ", anti.strip())
        if (clean_pro, clean_anti) != (pro, anti):
            fixed.append(row.number)
        reason = KNOWN_MALFORMED.get(pair_id) or (
            "pro-trope and anti-trope sentences are identical" if clean_pro == clean_anti else "")
        if reason:
            defective[reason].append(row.number)
        rows.append({"pair_id": pair_id, "pro": clean_pro, "anti": clean_anti, "domain": domain,
                     "subdomain": subdomain, "is_duplicate": False, "is_defective": bool(reason),
                     "_row": row.number})
    for reason, numbers in defective.items():
        rep.note(f"{reason}; kept with is_defective=True (rubia option drop_defective leaves it out)", numbers)
    rep.fix("line break / surrounding whitespace inside a sentence replaced by one space", fixed)
    _mark_duplicates(rows, rep)
    for r in rows:
        del r["_row"]
    return datasets.Dataset.from_list(rows)


def _mark_duplicates(rows: list[dict], rep: FileReport) -> None:
    """Flag repeated (pro, anti) pairs: ``*_stereotype`` copies first, else every later repeat."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["pro"], r["anti"])].append(r)
    stereotype_copies, other_repeats = [], []
    for members in groups.values():
        if len(members) < 2:
            continue
        originals = [r for r in members if not r["subdomain"].endswith("_stereotype")] or members[:1]
        for r in members:
            if r is not originals[0]:
                r["is_duplicate"] = True
                (stereotype_copies if r["subdomain"].endswith("_stereotype") else other_repeats).append(r["_row"])
    rep.note("*_stereotype pair also present in its *_full subdomain; is_duplicate=True", stereotype_copies)
    rep.note("repeated (pro, anti) pair; later copy is_duplicate=True", other_repeats)
