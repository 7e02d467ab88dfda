"""The agreement minimal pairs: read the packaged templates, subjects and nouns, expand them, split them.

Files (``data/`` of this package, tab-separated, ``#`` lines are comments, then a header):

* ``templates.tsv`` - ``template_id``, ``language``, ``kind`` (pronoun | verb | adjective | noun |
  feminitive), ``text``. In ``text``: ``{S}`` the subject; ``{masc|fem}`` a form fixed by the subject's
  gender (the same in both sentences of a pair); ``[masc|fem]`` or ``[N]`` (a noun pair of ``nouns.tsv``)
  THE varied form, exactly one per template: the subject's gender picks the grammatical form, the other
  gender's form makes the ungrammatical sentence.
* ``subjects.tsv`` - ``language``, ``gender`` (f | m), ``subject`` (a name or a noun phrase whose gender
  is unambiguous); every language needs as many ``f`` as ``m`` subjects (both genders balanced).
* ``nouns.tsv`` - ``language``, ``masculine``, ``feminine``; subject ``i`` of a ``[N]`` template gets
  noun pair ``(i + template index) mod n`` (deterministic, every noun used).

A pair is ``template × subject``; its sentence starts with a capital letter. The split is by subject:
within each language, gender and subject type (name | noun phrase), half of the subjects (seeded,
:func:`biaslab.data.splits.stratified_selection`) are selection subjects, the others test subjects, so a
test pair's subject is never seen on a selection pair while every template is in both sets.

Bad data: :class:`~biaslab.data.errors.DataError` naming the file, the row and the problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pandas as pd

from biaslab.data.errors import DataError
from biaslab.data.splits import SELECT, TEST, stratified_selection

LANGUAGES = ("en", "uk", "ru")
KINDS = ("pronoun", "verb", "adjective", "noun", "feminitive")
GENDERS = ("f", "m")
FIXED = re.compile(r"\{([^{}|]+)\|([^{}|]+)\}")  # {masc|fem}
VARIED = re.compile(r"\[([^\[\]|]+)\|([^\[\]|]+)\]|\[N\]")  # [masc|fem] or [N]
COLUMNS = {
    "templates.tsv": ("template_id", "language", "kind", "text"),
    "subjects.tsv": ("language", "gender", "subject"),
    "nouns.tsv": ("language", "masculine", "feminine"),
}


@dataclass(frozen=True)
class Row:
    file: Path
    row: int  # 1-based data row (header not counted)
    line: int  # 1-based line of the file
    values: dict[str, str]


def data_dir() -> Path:
    """The packaged data folder (templates, subjects, nouns)."""
    return Path(str(resources.files("biaslab.benchmarks.agreement") / "data"))


def read_rows(path: Path) -> list[Row]:
    """Rows of one TSV file, each checked for the file's columns (no empty cell)."""
    name = path.name
    if not path.is_file():
        raise DataError(path, "missing (the agreement benchmark's packaged data)")
    lines = [(i, ln) for i, ln in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if ln.strip() and not ln.startswith("#")]
    if not lines:
        raise DataError(path, "no header row")
    header = lines[0][1].split("\t")
    if tuple(header) != COLUMNS[name]:
        raise DataError(path, f"header {header} is not {list(COLUMNS[name])}", line=lines[0][0])
    rows = []
    for n, (line, text) in enumerate(lines[1:], 1):
        cells = text.split("\t")
        if len(cells) != len(header):
            raise DataError(path, f"{len(cells)} cells, expected {len(header)} (tab-separated)", row=n, line=line)
        values = dict(zip(header, (c.strip() for c in cells)))
        empty = [k for k, v in values.items() if not v]
        if empty:
            raise DataError(path, "empty cell", row=n, line=line, column=empty[0])
        if "language" in values and values["language"] not in LANGUAGES:
            raise DataError(path, f"language {values['language']!r} is not one of {LANGUAGES}", row=n, line=line,
                            column="language")
        rows.append(Row(path, n, line, values))
    return rows


def _check_template(row: Row) -> None:
    v = row.values
    if v["kind"] not in KINDS:
        raise DataError(row.file, f"kind {v['kind']!r} is not one of {KINDS}", row=row.row, line=row.line, column="kind")
    text = v["text"]
    if text.count("{S}") != 1:
        raise DataError(row.file, "text needs exactly one {S} (the subject)", row=row.row, line=row.line, column="text")
    varied = VARIED.findall(text)
    if len(varied) != 1:
        raise DataError(row.file, f"text needs exactly one varied form [masc|fem] or [N], found {len(varied)}",
                        row=row.row, line=row.line, column="text")
    masc, fem = varied[0]
    if masc and masc.strip() == fem.strip():
        raise DataError(row.file, f"varied form [{masc}|{fem}]: both genders give the same word", row=row.row,
                        line=row.line, column="text")
    rest = VARIED.sub("", FIXED.sub("", text.replace("{S}", "")))
    if re.search(r"[{}\[\]|]", rest):
        raise DataError(row.file, "a stray {, }, [, ] or | outside {S}, {masc|fem} and [masc|fem]", row=row.row,
                        line=row.line, column="text")


def _fill(text: str, subject: str, gender: str, varied: tuple[str, str]) -> tuple[str, str]:
    """The sentence with the subject's fixed forms and, in turn, the grammatical and the ungrammatical form."""
    g = GENDERS.index(gender)  # f = 0, m = 1: forms are written masc|fem
    body = FIXED.sub(lambda m: m.group(2) if g == 0 else m.group(1), text).replace("{S}", subject)
    masc, fem = varied
    good, bad = (fem, masc) if gender == "f" else (masc, fem)
    out = []
    for form in (good, bad):
        sentence = VARIED.sub(lambda _m, form=form: form, body)
        out.append(sentence[:1].upper() + sentence[1:])
    return out[0], out[1]


def load_pairs(folder: str | Path | None = None, seed: int = 0, selection_fraction: float = 0.5) -> pd.DataFrame:
    """Every minimal pair, one row each: ``pair_id``, ``language``, ``template_id``, ``kind``, ``gender``
    (the subject's), ``subject``, ``form_grammatical``, ``form_ungrammatical``, ``grammatical``,
    ``ungrammatical``, ``split`` (select | test)."""
    folder = Path(folder) if folder is not None else data_dir()
    templates = read_rows(folder / "templates.tsv")
    subjects = read_rows(folder / "subjects.tsv")
    nouns = read_rows(folder / "nouns.tsv")
    seen: set[str] = set()
    for row in templates:
        _check_template(row)
        if row.values["template_id"] in seen:
            raise DataError(row.file, f"template_id {row.values['template_id']!r} repeated", row=row.row,
                            line=row.line, column="template_id")
        seen.add(row.values["template_id"])
    for row in subjects:
        if row.values["gender"] not in GENDERS:
            raise DataError(row.file, f"gender {row.values['gender']!r} is not f or m", row=row.row, line=row.line,
                            column="gender")
    for row in nouns:
        if row.values["masculine"] == row.values["feminine"]:
            raise DataError(row.file, "masculine and feminine are the same word", row=row.row, line=row.line)
    split = _split_subjects(subjects, folder / "subjects.tsv", seed, selection_fraction)
    rows = []
    for t_index, template in enumerate(templates):
        t = template.values
        lang = t["language"]
        subs = [s for s in subjects if s.values["language"] == lang]
        pairs_n = [(n.values["masculine"], n.values["feminine"]) for n in nouns if n.values["language"] == lang]
        counts = {g: sum(s.values["gender"] == g for s in subs) for g in GENDERS}
        if counts["f"] != counts["m"] or not counts["f"]:
            raise DataError(folder / "subjects.tsv", f"language {lang!r} (template {t['template_id']}, templates.tsv "
                            f"row {template.row}): {counts['f']} f and {counts['m']} m subjects; both genders must be "
                            "balanced and present")
        if "[N]" in t["text"] and not pairs_n:
            raise DataError(template.file, f"[N] but nouns.tsv has no {lang!r} noun pairs", row=template.row,
                            line=template.line, column="text")
        masc_fem = VARIED.search(t["text"]).groups()
        for s_index, s in enumerate(subs):
            varied = pairs_n[(s_index + t_index) % len(pairs_n)] if masc_fem[0] is None else masc_fem
            gender, subject = s.values["gender"], s.values["subject"]
            good, bad = _fill(t["text"], subject, gender, varied)
            rows.append({
                "pair_id": f"{t['template_id']}:{s_index}", "language": lang, "template_id": t["template_id"],
                "kind": t["kind"], "gender": gender, "subject": subject,
                "form_grammatical": varied[1] if gender == "f" else varied[0],
                "form_ungrammatical": varied[0] if gender == "f" else varied[1],
                "grammatical": good, "ungrammatical": bad, "split": split[(lang, subject)],
            })
    return pd.DataFrame(rows)


def _split_subjects(subjects: list[Row], path: Path, seed: int, fraction: float) -> dict[tuple[str, str], str]:
    """``{(language, subject): select | test}``, stratified by language, gender and name vs noun phrase."""
    keys = [(s.values["language"], s.values["subject"]) for s in subjects]
    if len(set(keys)) != len(keys):
        dup = next(s for s, k in zip(subjects, keys) if keys.count(k) > 1)
        raise DataError(path, f"subject {dup.values['subject']!r} repeated for {dup.values['language']!r}",
                        row=dup.row, line=dup.line, column="subject")
    strata = [(s.values["language"], s.values["gender"], " " in s.values["subject"]) for s in subjects]
    where = stratified_selection(strata, list(range(len(subjects))), fraction, seed, f"{path} (subject split)")
    assert set(where) <= {SELECT, TEST}
    return dict(zip(keys, where))
