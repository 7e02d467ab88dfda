"""ClozeGender options: datasets, defaults and their checks (params.yaml ``evaluation.benchmarks.cloze_gender.options``).

Every default follows what produced the paper's tables (``docs/fidelity.md``); the other values are the
named options there.
"""

from __future__ import annotations

from typing import Any

from biaslab.metrics import association as assoc

NAME = "cloze_gender"


CONTEXT_TYPES = ("noun", "verb", "occ")  # Table 2's column order


DATASETS = ("genderlex", "genderlex_wino", "winobias", "winogender", "crows_pairs")


OPTIONAL_DATASETS = ("genderlex_wino",)  # prepared only when its files can be had: skipped (with the reason) if absent


DEFAULTS: dict[str, Any] = {
    "datasets": list(DATASETS),
    "vectors": "model",
    "vectors_format": None,
    "sentence_prob": "authors",  # the authors' meanpro mean (Tables 4, 5); geometric = exp(mean log-prob)
    "drop_duplicates": False,   # authors: every row of the files counts (17-18 repeated pairs per file)
    "weat": "paper",            # paper: S(X, Y, A, B); effect_size: Caliskan's d over context words
    "crows_concepts": None,     # CSV (pair_id, concept) for CGS on CrowS-Pairs; the paper's concepts are unreleased
    "male_attributes": list(assoc.MALE_ATTRIBUTES),
    "female_attributes": list(assoc.FEMALE_ATTRIBUTES),
}


def validate(opts: dict[str, Any]) -> None:
    bad = [d for d in opts["datasets"] if d not in DATASETS]
    if bad or not opts["datasets"]:
        raise ValueError(f"cloze_gender options.datasets: {bad or 'empty'}; choose from {list(DATASETS)}")
    if opts["sentence_prob"] not in ("geometric", "authors"):
        raise ValueError(f"cloze_gender options.sentence_prob must be geometric|authors, got {opts['sentence_prob']!r}")
    if opts["weat"] not in ("paper", "effect_size"):
        raise ValueError(f"cloze_gender options.weat must be paper|effect_size, got {opts['weat']!r}")
    if opts["vectors"] != "model" and opts["vectors_format"] is None:
        raise ValueError("cloze_gender options: vectors is a file path, so vectors_format (glove|fasttext|word2vec) "
                         "is required")
