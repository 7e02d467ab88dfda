"""Gendered word pairs (male, female) per language, for the embedding gender subspace (Bolukbasi).

- ``uk``: the GBEM-UA lists ``gender_words/male-words.csv`` / ``female-words.csv`` (row *i* pairs
  with row *i*; 38 rows, one duplicate pair ``наречений``/``наречена`` dropped and reported).
- ``en`` / ``ru``: lists assembled for biaslab (see docs/data.md): the definitional pairs of
  Bolukbasi et al. 2016 extended with common kinship, title and role nouns; Russian is the
  translation of the same concepts. Every word is a common single word.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from biaslab.config import DataConfig
from biaslab.data import sources
from biaslab.data.errors import DataError
from biaslab.data.report import PrepareReport
from biaslab.data.tabular import read_lines

if TYPE_CHECKING:
    import datasets

MALE_FILE = "gbem_ua/gender_words/male-words.csv"
FEMALE_FILE = "gbem_ua/gender_words/female-words.csv"
EN_SOURCE = "biaslab (Bolukbasi et al. 2016 definitional pairs, extended)"
RU_SOURCE = "biaslab (Russian equivalents of the English list)"

EN_PAIRS = [
    ("he", "she"), ("him", "her"), ("his", "hers"), ("himself", "herself"), ("man", "woman"),
    ("men", "women"), ("boy", "girl"), ("boys", "girls"), ("father", "mother"), ("son", "daughter"),
    ("brother", "sister"), ("uncle", "aunt"), ("nephew", "niece"), ("husband", "wife"),
    ("grandfather", "grandmother"), ("grandson", "granddaughter"), ("king", "queen"),
    ("prince", "princess"), ("actor", "actress"), ("waiter", "waitress"), ("gentleman", "lady"),
    ("sir", "madam"), ("mr", "mrs"), ("male", "female"), ("masculine", "feminine"), ("boyfriend", "girlfriend"),
    ("groom", "bride"), ("dad", "mom"), ("guy", "gal"), ("hero", "heroine"), ("monk", "nun"), ("lord", "lady"),
]
RU_PAIRS = [
    ("он", "она"), ("его", "её"), ("ему", "ей"), ("сам", "сама"), ("мужчина", "женщина"),
    ("мужчины", "женщины"), ("мальчик", "девочка"), ("парень", "девушка"), ("отец", "мать"),
    ("сын", "дочь"), ("брат", "сестра"), ("дядя", "тётя"), ("племянник", "племянница"), ("муж", "жена"),
    ("дедушка", "бабушка"), ("внук", "внучка"), ("король", "королева"), ("принц", "принцесса"),
    ("актёр", "актриса"), ("официант", "официантка"), ("господин", "госпожа"), ("мужской", "женский"),
    ("жених", "невеста"), ("папа", "мама"), ("герой", "героиня"), ("монах", "монахиня"), ("друг", "подруга"),
    ("студент", "студентка"), ("учитель", "учительница"), ("писатель", "писательница"),
    ("певец", "певица"), ("кандидат", "кандидатка"),
]


def _ukrainian(cfg: DataConfig, report: PrepareReport) -> list[dict[str, str]]:
    male_path, female_path = sources.resolve(cfg, MALE_FILE), sources.resolve(cfg, FEMALE_FILE)
    male, female = read_lines(male_path), read_lines(female_path)
    report.file(MALE_FILE).rows_read, report.file(FEMALE_FILE).rows_read = len(male), len(female)
    if len(male) != len(female):
        raise DataError(female_path, f"has {len(female)} lines but {male_path} has {len(male)}; "
                        "line i of one must pair with line i of the other")
    pairs, seen, dupes = [], set(), []
    for line, (m, f) in enumerate(zip(male, female, strict=True), start=1):
        m, f = m.strip(), f.strip()
        for path, word in ((male_path, m), (female_path, f)):
            if not word:
                raise DataError(path, "empty word", line=line)
        if (m, f) in seen:
            dupes.append(line)
            continue
        seen.add((m, f))
        pairs.append({"language": "uk", "male": m, "female": f, "source": "GBEM-UA gender_words"})
    for rel in (MALE_FILE, FEMALE_FILE):
        report.file(rel).drop("duplicate word pair", dupes)
    return pairs


def load(cfg: DataConfig, report: PrepareReport | None = None) -> datasets.Dataset:
    """All pairs: ``language``, ``male``, ``female``, ``source``."""
    import datasets

    report = report if report is not None else PrepareReport()
    rows = _ukrainian(cfg, report)
    rows += [{"language": "en", "male": m, "female": f, "source": EN_SOURCE} for m, f in EN_PAIRS]
    rows += [{"language": "ru", "male": m, "female": f, "source": RU_SOURCE} for m, f in RU_PAIRS]
    return datasets.Dataset.from_list(rows)
