"""Which words get the gender projection removed: *soft* = profession words, *hard* = soft + extras.

Profession words, per source (each tied to one language; a source whose language is not in
``embedding_debias.languages`` is skipped):

* ``gbem_ua`` (uk): the ``profession`` lemma (masculine nominative, ``автоматник``) **and** the job title
  exactly as it appears in the sentences — the word after ``посаду`` / ``Посаду`` in ``qa_sentence`` and
  ``prob_sentence`` (genitive, masculine and feminine: ``автоматника``, ``автоматниці``): the inflected
  forms are the tokens the model actually reads.
* ``occugender`` (en): the ``job`` column of ``occugender_jobs.parquet`` (multi-word jobs kept whole).
* ``winobias`` (en): the ``occupation`` column of ``winobias.parquet``, leading article removed.

**Only train and selection items** (``data/prepared/train`` + ``select``, read through
:func:`biaslab.data.splits.read_split_table`, which refuses a test item): GBEM-UA's fine-tune and
validation professions, the selection half of the OccuGender jobs. A test profession or job is never a
target word, so the gate and the report score every edit on professions it did not see (issue 43: the
edit used to read whole tables, test items included). WinoBias has no split of its own: its occupations
are used minus every word that is an OccuGender or GBEM-UA test item (:func:`test_words`), so a test job
cannot come back through it.
* ``soft_extra_words`` from params (e.g. Russian professions, which no prepared table lists).

*hard* adds ``hard_extra_words`` (params; default кандидат/кандидатка/він/вона, he/she/him/her/his/
candidate, кандидат/кандидатка/он/она).

Token level (:func:`target_tokens`): every word contributes the encodings of ``word`` and ``" word"``
(:mod:`.words`); the ``hard_extra_words`` also of ``Word`` and ``" Word"`` (``Кандидат`` opens every
GBEM-UA sentence). Profession words are taken as they appear in the data (lower-case in all three
sources): adding capitalised forms would add rows such as a lone ``К`` that occur in many other words.
*Rows* = the union of the token ids (what a checkpoint edit rewrites); *sequences* = the encodings
themselves (what the runtime hook matches as spans).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from biaslab.config import EmbeddingDebiasConfig
from biaslab.errors import MissingInputError
from biaslab.mitigation.embedding.words import WordEncoder

SOURCE_LANGUAGE = {"gbem_ua": "uk", "occugender": "en", "winobias": "en"}
JOB_TITLE = re.compile(r"\b[Пп]осаду\s+([^\s?.,!:;]+)")
ARTICLE = re.compile(r"^(the|a|an)\s+", re.IGNORECASE)


def gbem_ua_professions(frame: pd.DataFrame) -> set[str]:
    """Profession lemmas plus the job-title word after ``посаду`` in both sentence columns."""
    words = set(frame["profession"].str.strip())
    for column in ("qa_sentence", "prob_sentence"):
        titles = frame[column].str.extract(JOB_TITLE, expand=False)
        missing = titles.isna()
        if missing.any():
            first = frame.loc[missing, "item_id"].iloc[0] if "item_id" in frame else missing.idxmax()
            raise ValueError(
                f"gbem_ua.parquet column {column!r}: {int(missing.sum())} sentence(s) without 'посаду <job>' "
                f"(first: {first}); cannot extract the job title"
            )
        words |= set(titles)
    return words


def _read(prepared_dir: Path, name: str) -> pd.DataFrame:
    path = prepared_dir / name
    if not path.is_file():
        raise MissingInputError(f"{path}: prepared table missing; run the prepare stage (dvc repro prepare)")
    return pd.read_parquet(path)


def _mitigation_rows(prepared_dir: Path, name: str) -> pd.DataFrame:
    """The train and select rows of ``name`` (never a test row: :func:`read_split_table` refuses them)."""
    from biaslab.data.splits import FILES, MITIGATION_SPLITS, read_split_table

    parts = [read_split_table(prepared_dir, split, name) for split in MITIGATION_SPLITS if name in FILES[split]]
    return pd.concat(parts, ignore_index=True)


def test_words(prepared_dir: str | Path) -> set[str]:
    """Every GBEM-UA and OccuGender test profession / job (lemmas and job titles): never a target word."""
    from biaslab.data.splits import TEST, split_dir

    folder = split_dir(prepared_dir, TEST)
    words: set[str] = set()
    if (folder / "gbem_ua.parquet").is_file():
        words |= gbem_ua_professions(pd.read_parquet(folder / "gbem_ua.parquet"))
    if (folder / "occugender_jobs.parquet").is_file():
        words |= set(pd.read_parquet(folder / "occugender_jobs.parquet")["job"].str.strip())
    return words


def profession_words(prepared_dir: str | Path, sources: Iterable[str], languages: Iterable[str]) -> dict[str, set[str]]:
    """``{language: profession words}`` from the train and select items of the enabled ``sources``."""
    prepared_dir, languages = Path(prepared_dir), set(languages)
    held_out = test_words(prepared_dir)
    out: dict[str, set[str]] = {}
    for source in sources:
        language = SOURCE_LANGUAGE[source]
        if language not in languages:
            continue
        if source == "gbem_ua":
            words = gbem_ua_professions(_mitigation_rows(prepared_dir, "gbem_ua.parquet"))
        elif source == "occugender":
            words = set(_mitigation_rows(prepared_dir, "occugender_jobs.parquet")["job"].str.strip())
        else:
            occupations = _read(prepared_dir, "winobias.parquet")["occupation"].fillna("").str.strip()
            words = {ARTICLE.sub("", o) for o in occupations if o}
        out.setdefault(language, set()).update(w for w in words if w and w not in held_out)
    return out


def target_words(
    professions: Mapping[str, set[str]],
    languages: Iterable[str],
    soft_extra: Mapping[str, Iterable[str]],
    hard_extra: Mapping[str, Iterable[str]],
    mode: str,
) -> dict[str, list[str]]:
    """``{language: sorted words}`` to edit for ``mode`` (``soft`` or ``hard``; hard ⊇ soft)."""
    if mode not in ("soft", "hard"):
        raise ValueError(f"embedding mode must be 'soft' or 'hard', got {mode!r}")
    out: dict[str, set[str]] = {}
    extras = [soft_extra] + ([hard_extra] if mode == "hard" else [])
    for language in languages:
        words = set(professions.get(language, set()))
        for extra in extras:
            words |= {w.strip() for w in extra.get(language, []) if w.strip()}
        out[language] = words
    return {language: sorted(words) for language, words in out.items() if words}


@dataclass(frozen=True)
class TargetTokens:
    row_ids: tuple[int, ...]  # sorted distinct token ids (embedding rows a checkpoint edit rewrites)
    sequences: tuple[tuple[int, ...], ...]  # distinct encodings of all surface forms (hook spans)
    n_words: int


def target_tokens(encoder: WordEncoder, words: Mapping[str, list[str]],
                  capitalised: Iterable[str] = ()) -> TargetTokens:
    """Token rows and span sequences of the surface forms of ``words``.

    Every word gives its bare and leading-space encodings; words in ``capitalised`` also give those of
    their capitalised form.
    """
    capitalised = set(capitalised)
    all_words = [w for language in sorted(words) for w in words[language]]
    sequences = encoder.encodings_of([w for w in all_words if w not in capitalised])
    sequences += [s for s in encoder.encodings_of([w for w in all_words if w in capitalised], capitalised=True)
                  if s not in sequences]
    rows = sorted({i for seq in sequences for i in seq})
    return TargetTokens(tuple(rows), tuple(sequences), len(set(all_words)))


def build_targets(encoder: WordEncoder, prepared_dir: str | Path, cfg: EmbeddingDebiasConfig,
                  mode: str) -> tuple[dict[str, list[str]], TargetTokens]:
    """Target words (``{language: words}``) and their tokens for ``mode``, as the stage uses them."""
    professions = profession_words(prepared_dir, cfg.profession_sources, cfg.languages)
    words = target_words(professions, cfg.languages, cfg.soft_extra_words, cfg.hard_extra_words, mode)
    capitalised = {w for ws in cfg.hard_extra_words.values() for w in ws} if mode == "hard" else set()
    return words, target_tokens(encoder, words, capitalised)
