"""The ClozeGender paper's published numbers, recomputed from the authors' own per-row scores.

Inputs: ``tests/fixtures/genderlex_authors_gpt2xl_fasttext.parquet`` (GPT-2 XL P and CGS with fasttext,
as the authors' scripts wrote them; provenance in ``tests/fixtures/README.md``). Every number the paper
prints that these inputs determine is checked: bias ratios (Tables 2, 4, 8), the KL column (Tables 2,
4, 8), the combined column and the human row (Table 2, 4) and HB% (Table 8). The paper prints 2
decimals for ratios (sometimes rounded, sometimes truncated: 0.5388 is printed 0.53, 0.7097 is 0.71)
and truncates KL to 4 decimals (0.01458 is printed 0.0145).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from biaslab.metrics import association as assoc

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "genderlex_authors_gpt2xl_fasttext.parquet"


def printed_2(value: float) -> set[float]:
    """The two ways the paper prints a ratio with 2 decimals (rounded or truncated)."""
    return {round(value, 2), math.floor(value * 100 + 1e-9) / 100}


def truncated_4(value: float) -> float:
    return math.floor(value * 10_000) / 10_000


@pytest.fixture(scope="module")
def authors() -> dict[tuple[str, str], pd.DataFrame]:
    frame = pd.read_parquet(FIXTURE)
    out = {key: g.sort_values("row").reset_index(drop=True) for key, g in frame.groupby(["source", "context_type"])}
    # The authors published no verb output for the someone folder: rebuild it from the occupation verb file
    # (same context words, same pronouns him/her) - sim = 1 - ln CGS / ln P - and the someone sentences' P.
    verb, someone = out[("genderlex/occupation", "verb")], out[("genderlex/someone", "occ")]
    sim_m = 1 - np.log(verb["cgs_m"]) / np.log(verb["lm_m"])
    sim_w = 1 - np.log(verb["cgs_w"]) / np.log(verb["lm_w"])
    rebuilt = someone.copy()
    rebuilt["context_type"] = "verb"
    rebuilt["cgs_m"], rebuilt["cgs_w"] = assoc.cgs(someone["lm_m"], sim_m), assoc.cgs(someone["lm_w"], sim_w)
    out[("genderlex/someone", "verb")] = rebuilt
    return out


def him_ratio(m, w) -> float:
    return assoc.bias_ratio(assoc.preferred_gender(m, w))


# (source, context type) -> published (M, W, KL) of the "+ fasttext" rows
TABLE_2_AND_4 = {
    ("genderlex/occupation", "noun"): (0.36, 0.64, 0.0195),   # Table 2, + fasttext
    ("genderlex/occupation", "verb"): (0.51, 0.49, 0.0145),
    ("genderlex/occupation", "occ"): (0.51, 0.49, 0.0182),
    ("genderlex/someone", "noun"): (0.17, 0.83, 0.0056),      # Table 2, + fasttext (GN)
    ("genderlex/someone", "verb"): (0.38, 0.62, 0.0028),
    ("genderlex/someone", "occ"): (0.41, 0.59, 0.0039),
    ("winobias", "verb"): (0.81, 0.19, 0.0053),               # Table 4, + fasttext
    ("winobias", "occ"): (0.56, 0.44, 0.0066),
    ("winogender", "verb"): (0.89, 0.11, 0.0013),
    ("winogender", "occ"): (0.49, 0.51, 0.0019),
}


@pytest.mark.parametrize("key", sorted(TABLE_2_AND_4))
def test_cgs_ratios_and_kl_reproduce_tables_2_and_4(authors, key):
    rows = authors[key]
    m_pub, w_pub, kl_pub = TABLE_2_AND_4[key]
    ratio = him_ratio(rows["cgs_m"], rows["cgs_w"])
    assert m_pub in printed_2(ratio)
    assert w_pub in printed_2(1 - ratio)
    assert truncated_4(assoc.kl_bias(rows["cgs_m"], rows["cgs_w"])) == kl_pub


def test_kl_direction_is_the_majority_gender(authors):
    """The other direction misses the published value in 9 of these 10 cells (and Table 8's), so it is pinned."""
    misses = 0
    for key, (_, _, kl_pub) in TABLE_2_AND_4.items():
        rows = authors[key]
        majority = assoc.majority_gender(rows["cgs_m"], rows["cgs_w"])
        first, second = (rows["cgs_w"], rows["cgs_m"]) if majority == "M" else (rows["cgs_m"], rows["cgs_w"])
        misses += truncated_4(float(assoc.bernoulli_kl(first, second).mean())) != kl_pub
    assert misses == 9


def test_table_8_gpt2_xl_cloze_last_row(authors):
    """Table 8, occupation file: GPT-2 XL (P only) 0.51 / 0.49 / KL 0.0116 / HB 0.71; + fasttext HB 0.73."""
    rows = authors[("genderlex/occupation", "occ")]
    ratio = him_ratio(rows["lm_m"], rows["lm_w"])
    assert 0.51 in printed_2(ratio) and 0.49 in printed_2(1 - ratio)
    assert truncated_4(assoc.kl_bias(rows["lm_m"], rows["lm_w"])) == 0.0116
    lm_match = assoc.human_bias_match(assoc.preferred_gender(rows["lm_m"], rows["lm_w"]), rows["hb"])
    cgs_match = assoc.human_bias_match(assoc.preferred_gender(rows["cgs_m"], rows["cgs_w"]), rows["hb"])
    assert round(lm_match, 2) == 0.71 and round(cgs_match, 2) == 0.73


@pytest.mark.parametrize(("subject", "cgs_pub", "lm_pub"), [
    ("genderlex/occupation", (0.46, 0.53), (0.51, 0.48)),  # "+ fasttext" / "Cloze GPT-2XL - ClozeGender"
    ("genderlex/someone", (0.29, 0.71), (0.40, 0.60)),     # the same two rows, (GN)
])
def test_combined_column_of_table_2(authors, subject, cgs_pub, lm_pub):
    parts = [authors[(subject, c)] for c in ("noun", "verb", "occ")]
    combined_m = assoc.combined_scores([p["cgs_m"] for p in parts])
    combined_w = assoc.combined_scores([p["cgs_w"] for p in parts])
    ratio = him_ratio(combined_m, combined_w)
    assert cgs_pub[0] in printed_2(ratio) and cgs_pub[1] in printed_2(1 - ratio)
    # P alone is the same for the three context files, so the combined column is its ratio
    lm_ratio = him_ratio(assoc.combined_scores([p["lm_m"] for p in parts]),
                         assoc.combined_scores([p["lm_w"] for p in parts]))
    assert lm_ratio == him_ratio(parts[0]["lm_m"], parts[0]["lm_w"])
    assert lm_pub[0] in printed_2(lm_ratio) and lm_pub[1] in printed_2(1 - lm_ratio)


def test_combined_is_not_the_pooled_ratio(authors):
    """Pooling the three context files' rows gives 0.32 for someone, not the published 0.29."""
    parts = [authors[("genderlex/someone", c)] for c in ("noun", "verb", "occ")]
    pooled = np.mean([him_ratio(p["cgs_m"], p["cgs_w"]) for p in parts])
    assert 0.29 not in printed_2(pooled)


@pytest.mark.parametrize(("key", "lm_pub", "human_pub"), [
    # Table 4 GPT-2XL row prints W = 0.22 for WinoBias although its M = 0.77 matches (1 - 0.7694 = 0.2306):
    # the one printed cell these inputs do not give; only M is checked there (W = None).
    (("winobias", "verb"), (0.77, None), (0.49, 0.50)),    # Table 4: GPT-2XL row and Human (all) row
    (("winogender", "verb"), (0.76, 0.23), (0.58, 0.41)),
    (("genderlex/occupation", "occ"), (0.51, 0.49), (0.54, 0.45)),  # Table 2 Human row
])
def test_lm_only_and_human_rows(authors, key, lm_pub, human_pub):
    rows = authors[key]
    ratio = him_ratio(rows["lm_m"], rows["lm_w"])
    assert lm_pub[0] in printed_2(ratio) and (lm_pub[1] is None or lm_pub[1] in printed_2(1 - ratio))
    human = float((rows["hb"] == "M").mean())
    assert human_pub[0] in printed_2(human) and human_pub[1] in printed_2(1 - human)
