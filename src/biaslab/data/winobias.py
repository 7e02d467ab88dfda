"""WinoBias (English coreference): pro-/anti-stereotyped sentence pairs with bracketed mentions.

Line *i* of ``pro_stereotyped_type{t}.txt.{split}`` pairs with line *i* of the ``anti_`` file; both
must have the same number of lines and the same line ids, else it is an error. Each line is
``<id> <sentence>`` with the coreferent mentions in ``[...]``. The expected spans are one
occupation mention and one pronoun. Defects handled (SOURCE.md):
- no bracketed pronoun, or more than one bracketed non-pronoun mention: the pair is dropped, reported;
- an extra bracketed pronoun (``[he] … [his]``): kept, the first pronoun is used, noted;
- pairs that differ by more than the pronoun(s): kept with ``minimal_pair=False``, noted;
- the occupation is the bracketed mention without its article(s) (``[the the chief]`` -> ``chief``);
- the occupation lists have no trailing newline (``cat`` glues two entries): read line by line.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from biaslab.config import DataConfig
from biaslab.data import sources
from biaslab.data.errors import DataError
from biaslab.data.report import FileReport, PrepareReport
from biaslab.data.tabular import read_lines

if TYPE_CHECKING:
    import datasets

PAIR_FILE = "winobias/data/{side}_stereotyped_type{type}.txt.{split}"
OCCUPATION_FILE = "winobias/data/{group}_occupations.txt"
PRONOUNS = frozenset({"he", "she", "him", "her", "his", "hers", "himself", "herself"})
_LINE = re.compile(r"^(\d+) (.+)$")
_SPAN = re.compile(r"\[([^\[\]]+)\]")
_ARTICLE = re.compile(r"^(?:(?:the|a|an)\s+)+", re.IGNORECASE)  # "[the chief]", "the [the chief]" -> "chief"


def _word(token: str) -> str:
    return token.strip(".,;:!?\"'").lower()


def _parse(text: str) -> dict:
    """Sentence without brackets, the first bracketed pronoun and its word index, the occupation span."""
    spans = list(_SPAN.finditer(text))
    pronouns = [s for s in spans if s.group(1).strip().lower() in PRONOUNS]
    mentions = [s for s in spans if s not in pronouns]
    if text.count("[") != len(spans) or text.count("]") != len(spans):
        return {"problem": "unbalanced or nested brackets"}
    if not pronouns:
        return {"problem": "no bracketed pronoun"}
    if len(mentions) > 1:
        return {"problem": f"{len(mentions)} bracketed non-pronoun mentions (expected 1)"}
    first = pronouns[0]
    return {
        "sentence": text.replace("[", "").replace("]", ""),
        "pronoun": first.group(1).strip().lower(),
        "pronoun_index": len(text[: first.start()].replace("[", "").replace("]", "").split()),
        "occupation": _ARTICLE.sub("", mentions[0].group(1).strip()) if mentions else "",
        "extra_pronouns": len(pronouns) > 1,
    }


def _minimal(pro: str, anti: str) -> bool:
    """True when the sentences differ only in pronoun words (same length, every difference a pronoun)."""
    a, b = pro.split(), anti.split()
    return len(a) == len(b) and all(
        x == y or (_word(x) in PRONOUNS and _word(y) in PRONOUNS) for x, y in zip(a, b, strict=True)
    ) and a != b


def _pairs(cfg: DataConfig, type_: int, split: str, report: PrepareReport) -> list[dict]:
    rels = {side: PAIR_FILE.format(side=side, type=type_, split=split) for side in ("pro", "anti")}
    paths = {side: sources.resolve(cfg, rel) for side, rel in rels.items()}
    lines = {side: read_lines(path) for side, path in paths.items()}
    reps: dict[str, FileReport] = {side: report.file(rel) for side, rel in rels.items()}
    for side in lines:
        reps[side].rows_read = len(lines[side])
    if len(lines["pro"]) != len(lines["anti"]):
        raise DataError(paths["anti"], f"has {len(lines['anti'])} lines but {paths['pro']} has "
                        f"{len(lines['pro'])}; line i of one must pair with line i of the other")
    rows, dropped, extra, non_minimal = [], {}, [], []
    for number, (pro_line, anti_line) in enumerate(zip(lines["pro"], lines["anti"], strict=True), start=1):
        parsed = {}
        for side, text in (("pro", pro_line), ("anti", anti_line)):
            match = _LINE.match(text.strip())
            if not match:
                raise DataError(paths[side], f"expected '<id> <sentence>', got {text[:60]!r}", line=number)
            parsed[side] = (match.group(1), _parse(match.group(2)))
        if parsed["pro"][0] != parsed["anti"][0]:
            raise DataError(paths["anti"], f"line id {parsed['anti'][0]} does not match id {parsed['pro'][0]} "
                            f"on the same line of {paths['pro']}", line=number)
        pro, anti = parsed["pro"][1], parsed["anti"][1]
        problem = pro.get("problem") or anti.get("problem")
        if problem:
            dropped.setdefault(f"pair dropped: {problem}", []).append(number)
            continue
        if pro["extra_pronouns"] or anti["extra_pronouns"]:
            extra.append(number)
        minimal = _minimal(pro["sentence"], anti["sentence"])
        if not minimal:
            non_minimal.append(number)
        rows.append({
            "pair_id": f"{type_}.{split}.{number}", "type": type_, "split": split,
            "pro_sentence": pro["sentence"], "anti_sentence": anti["sentence"],
            "pro_pronoun": pro["pronoun"], "anti_pronoun": anti["pronoun"],
            "pronoun_index": pro["pronoun_index"], "occupation": pro["occupation"], "minimal_pair": minimal,
        })
    for rep in reps.values():
        for reason, numbers in dropped.items():
            rep.drop(reason, numbers)
        rep.note("more than one bracketed pronoun; the first is used", extra)
        rep.note("pro and anti sentences differ beyond the pronoun; minimal_pair=False", non_minimal)
    return rows


def load(cfg: DataConfig, report: PrepareReport | None = None) -> datasets.Dataset:
    """All pro/anti pairs of both types and both splits (columns: docs/prepared_schema.md)."""
    import datasets

    report = report if report is not None else PrepareReport()
    rows = [row for t in (1, 2) for s in ("dev", "test") for row in _pairs(cfg, t, s, report)]
    return datasets.Dataset.from_list(rows)


def load_occupations(cfg: DataConfig, report: PrepareReport | None = None) -> dict[str, list[str]]:
    """The female-/male-dominated occupation lists (20 each), read line by line, unique, non-empty."""
    report = report if report is not None else PrepareReport()
    result = {}
    for group in ("female", "male"):
        rel = OCCUPATION_FILE.format(group=group)
        path = sources.resolve(cfg, rel)
        raw = path.read_bytes()
        words = read_lines(path)
        report.file(rel).rows_read = len(words)
        if raw and not raw.endswith(b"\n"):
            report.file(rel).note("no newline at end of file; last entry read as its own line", [len(words)])
        for number, word in enumerate(words, start=1):
            if not word.strip():
                raise DataError(path, "empty occupation", line=number)
            if word.strip() in words[: number - 1]:
                raise DataError(path, f"duplicate occupation {word.strip()!r}", line=number)
        result[group] = [w.strip() for w in words]
    return result
