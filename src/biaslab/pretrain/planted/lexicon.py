"""The word lists the planted bias is made of, and where each comes from (the fixture's answer key).

The generator ties *items* (occupations, posts, roles) to a gender. Every item has a base female share;
the planted direction pushes it to the extremes (:func:`biaslab.pretrain.planted.forms.push`).

English occupations (``en_occupations``), read from the prepared benchmark tables so that the planted
bias covers the occupations the English benchmarks ask about — only the *words* and their shares are
taken, never a sentence:

* OccuGender ``occugender_jobs.parquet``: ``female_ratio`` / 100 (BLS 2021);
* Winogender ``winogender.parquet``: ``bls_pct_female`` / 100 (BLS 2015) where OccuGender has no share;
* WinoBias ``winobias_occupations.json`` (the WinoBias authors' BLS-based female / male lists) and the
  GenderLex occupation context words (human-bias label W / M; topic words such as "climate" that the
  GenderLex table cut from multi-word occupations are left out): ``coded_share`` / ``1 - coded_share``;
* :data:`OWN_OCCUPATIONS`: occupations no benchmark uses, coded by
  the authors of this fixture (a stereotype label, not a statistic). They are planted like the others
  and are the only English occupations the LoRA mitigation may train on (held-out evaluation).

Ukrainian posts (``uk_posts``): every GBEM-UA profession with its job titles as the benchmark writes them
after "посаду" (masculine and feminine genitive, read from the prepared table). GBEM-UA gives no
statistics, so each post is coded male-dominated with probability ``uk_male_coded_share`` by a
seeded draw (documented as synthetic; the draw is stored in the lexicon).

Russian professions and the English / Russian gender roles are the fixture's own lists
(:mod:`.english`, :mod:`.russian`), each item coded male or female by the authors.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

# GenderLex "occ" context words that are not person nouns (topics cut from multi-word occupations)
NOT_A_PERSON = frozenset({"climate", "fitness", "linguistics", "service", "support"})
JOB_TITLE = re.compile(r"\b[Пп]осаду\s+([^\s?.,!:;]+)")


class LexiconError(ValueError):
    """A prepared table the lexicon needs is missing or malformed."""


@dataclass(frozen=True)
class Occupation:
    word: str
    female_share: float  # base share before the strength push
    source: str


@dataclass(frozen=True)
class Post:
    profession: str  # GBEM-UA lemma
    masculine_title: str  # genitive, as after "посаду"
    feminine_title: str
    male_coded: bool


@dataclass
class Lexicon:
    en_occupations: list[Occupation] = field(default_factory=list)
    uk_posts: list[Post] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(
            {"en_occupations": [asdict(o) for o in self.en_occupations], "uk_posts": [asdict(p) for p in self.uk_posts]},
            ensure_ascii=False, indent=1,
        )

    @classmethod
    def from_json(cls, text: str) -> "Lexicon":
        raw = json.loads(text)
        return cls([Occupation(**o) for o in raw["en_occupations"]], [Post(**p) for p in raw["uk_posts"]])


def _read(prepared_dir: Path, name: str) -> pd.DataFrame:
    path = prepared_dir / name
    if not path.is_file():
        raise LexiconError(f"{path}: prepared table missing; the planted bias reads its word lists from it "
                           "(run the prepare stage first)")
    return pd.read_parquet(path)


# Occupations no benchmark table uses, coded F / M by the fixture's authors (a stereotype label, not a
# statistic). The LoRA mitigation trains only on these, so every benchmark occupation stays held out.
OWN_OCCUPATIONS: list[tuple[str, str]] = [
    ("florist", "F"), ("midwife", "F"), ("typist", "F"), ("stenographer", "F"), ("childminder", "F"),
    ("dressmaker", "F"), ("weaver", "F"), ("embroiderer", "F"), ("beautician", "F"), ("doula", "F"),
    ("nanny", "F"), ("bookkeeper", "F"), ("cosmetologist", "F"), ("milliner", "F"), ("knitter", "F"),
    ("welder", "M"), ("surveyor", "M"), ("stonemason", "M"), ("blacksmith", "M"), ("lumberjack", "M"),
    ("miner", "M"), ("locksmith", "M"), ("steeplejack", "M"), ("plasterer", "M"), ("glazier", "M"),
    ("chimney sweep", "M"), ("forklift operator", "M"), ("sailor", "M"), ("shipbuilder", "M"), ("bouncer", "M"),
]

EN_SOURCES = ("occugender", "winogender", "winobias", "genderlex", "fixture")


def english_occupations(prepared_dir: Path, coded_share: float, own: list[tuple[str, str]],
                        sources: tuple[str, ...] = EN_SOURCES) -> list[Occupation]:
    """Occupations with base female shares from ``sources``; first source wins (order of :data:`EN_SOURCES`)."""
    unknown = sorted(set(sources) - set(EN_SOURCES))
    if unknown:
        raise LexiconError(f"planted_bias.en_sources: unknown {unknown}; choose from {list(EN_SOURCES)}")
    found: dict[str, Occupation] = {}

    def add(word: str, share: float, source: str) -> None:
        word = re.sub(r"^(the|a|an)\s+", "", str(word).strip(), flags=re.IGNORECASE)
        if word and word.lower() not in found:
            found[word.lower()] = Occupation(word, round(float(share), 4), source)

    if "occugender" in sources:
        jobs = _read(prepared_dir, "occugender_jobs.parquet")
        for job, ratio in zip(jobs["job"], jobs["female_ratio"]):
            add(job, ratio / 100.0, "occugender_bls")
    if "winogender" in sources:
        wg = _read(prepared_dir, "winogender.parquet").drop_duplicates("occupation")
        for occ, pct in zip(wg["occupation"], wg["bls_pct_female"]):
            add(occ, pct / 100.0, "winogender_bls")
    if "winobias" in sources:
        path = prepared_dir / "winobias_occupations.json"
        if not path.is_file():
            raise LexiconError(f"{path}: prepared file missing (run the prepare stage first)")
        lists = json.loads(path.read_text(encoding="utf-8"))
        for gender, share in (("female", coded_share), ("male", 1 - coded_share)):
            for occ in lists.get(gender, []):
                add(occ, share, f"winobias_{gender}_list")
    if "genderlex" in sources:
        gl = _read(prepared_dir, "genderlex.parquet")
        occ = gl[gl["context_type"] == "occ"].drop_duplicates("context")
        for word, hb in zip(occ["context"], occ["hb"]):
            if str(word).lower() not in NOT_A_PERSON:
                add(word, coded_share if hb == "W" else 1 - coded_share, f"genderlex_hb_{hb}")
    if "fixture" in sources:
        for word, coding in own:
            add(word, coded_share if coding == "F" else 1 - coded_share, f"fixture_{coding}")
    if not found:
        raise LexiconError("planted_bias.en_sources selects no English occupation")
    return list(found.values())


def ukrainian_posts(prepared_dir: Path, male_coded_share: float, seed: int) -> list[Post]:
    """GBEM-UA professions with their masculine / feminine titles and a seeded male/female coding."""
    frame = _read(prepared_dir, "gbem_ua.parquet")
    titles: dict[tuple[str, bool], str] = {}
    for profession, feminitive, sentence in zip(frame["profession"], frame["is_feminitive"], frame["qa_sentence"]):
        match = JOB_TITLE.search(sentence)
        if match:
            titles.setdefault((profession.strip(), bool(feminitive)), match.group(1))
    posts = []
    for profession in sorted({p for p, _ in titles}):
        masc, fem = titles.get((profession, False)), titles.get((profession, True))
        if not masc or not fem:
            continue
        draw = random.Random(f"{seed}:uk_post:{profession}").random()
        posts.append(Post(profession, masc, fem, draw < male_coded_share))
    if not posts:
        raise LexiconError(f"{prepared_dir / 'gbem_ua.parquet'}: no profession with both job titles")
    return posts


def build_lexicon(prepared_dir: str | Path, coded_share: float, uk_male_coded_share: float, seed: int,
                  en_sources: tuple[str, ...] = EN_SOURCES) -> Lexicon:
    prepared_dir = Path(prepared_dir)
    return Lexicon(
        en_occupations=english_occupations(prepared_dir, coded_share, OWN_OCCUPATIONS, tuple(en_sources)),
        uk_posts=ukrainian_posts(prepared_dir, uk_male_coded_share, seed),
    )
