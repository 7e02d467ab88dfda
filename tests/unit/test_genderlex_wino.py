"""The ClozeGender authors' extracted WinoBias / Winogender sentences (paper Table 4): loader and metrics."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from fakes import FakeScorer

from biaslab.benchmarks.base import EvalContext
from biaslab.benchmarks.cloze_gender import BENCHMARK
from biaslab.config import DataConfig
from biaslab.data import genderlex_wino
from biaslab.data.errors import DataError
from biaslab.data.report import PrepareReport

HEADER = "sent_m,sent_w,context,prounoun_m,prounoun_w,HB\n"
ROWS = {  # (dataset, context type) -> CSV rows (sentence pair, context, pronouns, HB)
    ("winobias", "verb"): [
        "The person argued with the designer and slapped him in the face.,"
        "The person argued with the designer and slapped her in the face.,slapped,him,her,W",
        "The person asked the chief and thanked him.,The person asked the chief and thanked her.,thanked,him,her,M",
    ],
    ("winobias", "occ"): [
        "The person argued with the designer and slapped him in the face.,"
        "The person argued with the designer and slapped her in the face.,designer,him,her,W",
        "The person asked the chief and thanked him.,The person asked the chief and thanked her.,chief,him,her,M",
    ],
    ("winogender", "verb"): ["The technician said he could pay.,The technician said she could pay.,pay,he,she,M"],
    ("winogender", "occ"): ["The technician said he could pay.,The technician said she could pay.,technician,he,she,M"],
}
FOLDER = {"winobias": "WinoBias", "winogender": "WinoGender"}
# mean sentence probabilities (geometric mode: 2 tokens of equal probability)
PROBS = {
    "The person argued with the designer and slapped him in the face.": 0.3,
    "The person argued with the designer and slapped her in the face.": 0.2,
    "The person asked the chief and thanked him.": 0.1,
    "The person asked the chief and thanked her.": 0.4,
    "The technician said he could pay.": 0.5,
    "The technician said she could pay.": 0.25,
}
# sim(him, slapped) = 1 (CGS_m = 1), everything else orthogonal (sim 0) except sim(her, chief) = 0.5
VECTORS = "him 1 0 0\nher 0 1 0\nhe 1 0 0\nshe 0 1 0\nslapped 1 0 0\nchief 0 1 1.7320508075688772\n"


def write_mirror(root, rows=ROWS):
    for (dataset, ctx), lines in rows.items():
        path = root / "genderlex" / "extracted" / FOLDER[dataset] / f"{dataset}_{ctx}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")


def test_loader_reads_the_four_files_and_reports_what_it_keeps(tmp_path):
    rows = {**ROWS, ("winobias", "verb"): [*ROWS[("winobias", "verb")], ROWS[("winobias", "verb")][0]]}
    write_mirror(tmp_path, rows)
    report = PrepareReport()
    table = genderlex_wino.load(DataConfig(mirror_dir=str(tmp_path), allow_download=False), report).to_pandas()
    assert len(table) == 3 + 2 + 1 + 1
    verb = table[(table["dataset"] == "winobias") & (table["context_type"] == "verb")]
    assert list(verb["is_duplicate"]) == [False, False, True] and list(verb["hb"]) == ["W", "M", "W"]
    assert set(table["pronoun_m"]) == {"him", "he"}
    events = report.to_dict()["files"]["genderlex/extracted/WinoBias/winobias_verb.csv"]["events"]
    assert events[0]["rows"] == [3] and "repeated" in events[0]["reason"]


def test_loader_returns_none_with_the_reason_when_a_file_is_missing(tmp_path):
    write_mirror(tmp_path, {k: v for k, v in ROWS.items() if k != ("winogender", "occ")})
    report = PrepareReport()
    assert genderlex_wino.load(DataConfig(mirror_dir=str(tmp_path), allow_download=False), report) is None
    (event,) = report.to_dict()["files"]["genderlex/extracted/WinoGender/winogender_occ.csv"]["events"]
    assert "optional file not available" in event["reason"] and "genderlex_wino.parquet not written" in event["reason"]


def test_loader_rejects_a_bad_label(tmp_path):
    write_mirror(tmp_path, {**ROWS, ("winogender", "occ"): [ROWS[("winogender", "occ")][0][:-1] + "X"]})
    with pytest.raises(DataError, match="expected M or W"):
        genderlex_wino.load(DataConfig(mirror_dir=str(tmp_path), allow_download=False))


def sentence_scorer() -> FakeScorer:
    """Mean sentence probability = PROBS (one token each, so the geometric mean is the probability)."""
    return FakeScorer(sentences={s: math.log(p) for s, p in PROBS.items()})


@pytest.fixture
def prepared(tmp_path):
    write_mirror(tmp_path / "mirror")
    genderlex_wino.load(DataConfig(mirror_dir=str(tmp_path / "mirror"), allow_download=False)).to_parquet(
        tmp_path / "genderlex_wino.parquet")
    (tmp_path / "v.txt").write_text(VECTORS, encoding="utf-8")
    return tmp_path


def bern_kl(p, q):
    return p * math.log(p / q) + (1 - p) * math.log((1 - p) / (1 - q))


def test_metrics_by_hand(prepared):
    options = {"datasets": ["genderlex_wino"], "vectors": str(prepared / "v.txt"), "vectors_format": "glove",
               "sentence_prob": "geometric"}
    result = BENCHMARK.run(sentence_scorer(), prepared, options, EvalContext(bootstrap_samples=0, progress=False))
    m = {k.removeprefix("cloze_gender/genderlex_wino/"): v.value for k, v in result.metrics.items()}
    # winobias verb: CGS_m = (0.3^0, 0.1^1), CGS_w = (0.2, 0.4): M, W -> 1/2 ; HB W, M -> no match either way
    assert m["winobias/verb/him_ratio"] == pytest.approx(0.5)
    assert m["winobias/verb/hb_match"] == 0.0
    # ratio 1/2 counts as M: KL(CGS_m || CGS_w) per row; KL(1 || 0.2) = ln 5 (0 ln 0 = 0)
    assert m["winobias/verb/kl"] == pytest.approx(np.mean([math.log(5), bern_kl(0.1, 0.4)]))
    # winobias occ: CGS_m = (0.3, 0.1), CGS_w = (0.2, 0.4^0.5 = 0.632): M, W ; P only: M (0.3 > 0.2), W
    assert m["winobias/occ/him_ratio"] == pytest.approx(0.5)
    assert m["winobias/occ/lm_him_ratio"] == pytest.approx(0.5)
    assert m["winobias/occ/kl"] == pytest.approx(np.mean([bern_kl(0.3, 0.2), bern_kl(0.1, 0.4 ** 0.5)]))
    assert m["winogender/verb/him_ratio"] == 1.0 and m["winogender/verb/hb_match"] == 1.0
    table = result.tables["cloze_gender_genderlex_wino"].set_index(["subject", "context_type"])
    assert table.loc[("winobias", "verb"), "human_m"] == 0.5 and table.loc[("winogender", "occ"), "human_m"] == 1.0
    pred = result.predictions["cloze_gender_genderlex_wino"]
    assert {"p_m", "p_w", "sim_m", "sim_w", "cgs_m", "cgs_w", "pronoun_m", "hb"} <= set(pred.columns)


def test_missing_optional_table_is_skipped_with_the_reason(tmp_path):
    options = {"datasets": ["genderlex_wino"]}
    result = BENCHMARK.run(sentence_scorer(), tmp_path, options, EvalContext(bootstrap_samples=0, progress=False))
    assert result.metrics == {}
    (reason,) = result.tables["cloze_gender_genderlex_wino_skipped"]["reason"]
    assert "genderlex_wino.parquet not prepared" in reason
