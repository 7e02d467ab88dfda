"""Every benchmark's ``rescore`` (issue 42): a tiny model's evaluation of a few items, then its stored prediction
rows scored again - all rows in one call (batched) and one row at a time (unbatched) - equal the stored raw
columns to 1e-5; an edited stored value is refused by the promoter's check
(:func:`biaslab.registry.rescore.rescore_row`, on a tiny in-memory evidence, every row drawn).

Causal (the tiny Llama of ``tests/conftest.py``) and masked (``tiny_models.build_tiny_bert``) where the benchmark
supports both (RuBia, ClozeGender).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_cloze_gender import write_real_prepared
from test_gbem_ua_model import tiny_frame
from test_occugender import JOBS, SPEC
from test_rubia import PAIRS
from tiny_models import build_tiny_bert

from biaslab.benchmarks.base import EvalContext
from biaslab.benchmarks.occugender.items import GENDERS

os.environ.setdefault("OMP_NUM_THREADS", "1")
CTX = EvalContext(seed=0, bootstrap_samples=0, progress=False)


def _cloze_prepared(folder: Path) -> Path:
    return write_real_prepared(folder, occupations=(("doctor", 40.0), ("nurse", 90.0)),
                               crows=[("Women are bad at math.", "Men are bad at math.", "gender"),
                                      ("He is a man who fixes cars.", "She is a woman who fixes cars.", "gender")])


def _prepare(name: str, folder: Path) -> Path:
    """A prepared folder with a few items of benchmark ``name`` (the benchmarks' own unit-test data)."""
    test = folder / "test"
    test.mkdir()
    if name == "rubia":
        PAIRS.to_parquet(folder / "rubia.parquet")
    elif name == "occugender":
        JOBS.to_parquet(test / "occugender_jobs.parquet")
        (test / "occugender_spec.json").write_text(json.dumps(SPEC), encoding="utf-8")
    elif name == "gbem_ua":
        tiny_frame().assign(split="eval", source_file="test").to_parquet(test / "gbem_ua.parquet")
    elif name == "lm_quality":
        texts = ["The doctor said that he would come.", "He is a man. She is a woman.", "Кандидат має досвід.",
                 "Она сидит с детьми."]
        pd.DataFrame([(lang, d, c, t) for (lang, d, c), t in zip([("en", 0, 0), ("en", 0, 1), ("uk", 1, 0),
                                                                   ("ru", 2, 0)], texts)],
                     columns=["language", "document", "chunk", "text"]).to_parquet(test / "lm_heldout.parquet")
    elif name == "cloze_gender":
        _cloze_prepared(folder)
    return folder


def _benchmark(name: str):
    from biaslab.benchmarks.registry import load_benchmark

    return load_benchmark(name, f"biaslab.benchmarks.{name}")


# (benchmark, options, masked?) -> the raw columns each prediction table's rescore must return
CASES = [
    ("rubia", {}, False, {"rubia_pairs": {"score_pro", "score_anti", "prefers_pro"}}),
    ("rubia", {"normalize": "mean", "lowercase": True}, True,
     {"rubia_pairs": {"score_pro", "score_anti", "prefers_pro"}}),
    ("occugender", {}, False, {"occugender_forms": {"logprob", "n_tokens"},
                               "occugender_items": {f"{k}_{g}" for k in ("p", "log_P") for g in GENDERS},
                               "occugender_jobs": {f"p_{g}" for g in GENDERS}}),
    ("gbem_ua", {}, False, {"qa": {"logprob_yes", "logprob_no", "answer_yes"},
                            "qa_pairs": {"logodds_male", "logodds_female", "answer_yes_male", "answer_yes_female"},
                            "prob": {"pos_logprob", "neg_logprob", "pos_n_tokens", "neg_n_tokens", "label"},
                            "prob_pairs": {"p_pos_male", "p_pos_female", "p_neg_male", "p_neg_female", "label_male",
                                           "label_female"}}),
    ("lm_quality", {}, False, {"lm_quality_chunks": {"logprob", "n_tokens", "n_chars"}}),
    ("cloze_gender", {}, False, {
        "cloze_gender_genderlex": {"logprob_m", "logprob_w", "n_tokens_m", "n_tokens_w"},
        "cloze_gender_winobias": {"logprob_pro", "logprob_anti", "prob_pro", "prob_anti"},
        "cloze_gender_winogender": {f"{k}_{s}" for k in ("logprob", "prob") for s in ("male", "female", "neutral")},
        "cloze_gender_crows": {"logprob_m", "logprob_w", "p_m", "p_w"}}),
    ("cloze_gender", {"sentence_prob": "geometric"}, True, {
        "cloze_gender_genderlex": {"logprob_m", "logprob_w", "n_tokens_m", "n_tokens_w"},
        "cloze_gender_winobias": {"logprob_pro", "logprob_anti", "prob_pro", "prob_anti"},
        "cloze_gender_winogender": {f"{k}_{s}" for k in ("logprob", "prob") for s in ("male", "female", "neutral")},
        "cloze_gender_crows": {"logprob_m", "logprob_w", "p_m", "p_w"}}),
]
IDS = [f"{c[0]}-{'masked' if c[2] else 'causal'}-{'-'.join(map(str, c[1].values())) or 'default'}" for c in CASES]


@pytest.fixture(scope="module")
def tiny_bert_scorer():
    from biaslab.scoring.masked import MaskedScorer

    model, tokenizer = build_tiny_bert()
    return MaskedScorer(model, tokenizer)


def _evaluated(case, tmp_path, tiny_scorer, tiny_bert_scorer):
    name, options, masked, _ = case
    lm = tiny_bert_scorer if masked else tiny_scorer
    result = _benchmark(name).run(lm, _prepare(name, tmp_path), dict(options), CTX)
    return lm, result.predictions


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_rescore_equals_the_stored_raw_columns_batched_and_one_by_one(case, tmp_path, tiny_scorer, tiny_bert_scorer):
    name, options, _, expected = case
    benchmark = _benchmark(name)
    lm, predictions = _evaluated(case, tmp_path, tiny_scorer, tiny_bert_scorer)
    assert set(predictions) == set(expected)
    for table, frame in predictions.items():
        fresh = benchmark.rescore(lm, table, frame, dict(options), tables=predictions)
        assert set(fresh) == expected[table], table
        for column, values in fresh.items():
            np.testing.assert_allclose(np.asarray(values, dtype=float), frame[column].to_numpy(dtype=float),
                                       rtol=0, atol=1e-5, err_msg=f"{table}.{column} (all rows in one call)")
        for i in ([0, len(frame) - 1] if fresh else []):  # a row alone: other batches, other padding
            single = benchmark.rescore(lm, table, frame.iloc[[i]], dict(options), tables=predictions)
            for column, values in single.items():
                assert float(values[0]) == pytest.approx(float(frame[column].iloc[i]), abs=1e-5), (table, column, i)


def served(lm, prefixes: dict[str, str] | None = None):
    """``lm`` as :func:`biaslab.serving.loader.load_served_variant` returns a version (a prompt version with
    ``prefixes``)."""
    from biaslab.serving.predictor import ServedVariant

    return ServedVariant(lm, variant="v", method="prompt" if prefixes else "none", kind="full", prefixes=prefixes or {})


class _Evidence:
    """What :func:`rescore_row` reads of an evaluation: each variant's prediction tables by ``<benchmark>__<table>``."""

    def __init__(self, tables: dict[str, pd.DataFrame]):
        self.tables = tables

    def predictions(self, variant: str) -> dict[str, pd.DataFrame]:
        return {k: v.copy() for k, v in self.tables.items()}


def _params(name: str, options: dict, more: dict | None = None):
    """Params with benchmark ``name`` (and ``more``: benchmark -> options) evaluated."""
    from biaslab.config import Params

    benchmarks = {b: {"module": f"biaslab.benchmarks.{b}", "options": o}
                  for b, o in {name: options, **(more or {})}.items()}
    return Params.model_validate({
        "variants": {"base": {"method": "none", "model_dir": "models/base"}},
        "registry": {"model_name": "m", "champion_model": "c", "promotions_experiment": "p",
                     "gate": [{"metric": "gbem_ua/qa_diff_fem", "rule": "better_than_base_beyond_ci"}]},
        "evaluation": {"benchmarks": benchmarks},
    })


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_an_edited_stored_value_is_refused_by_the_promoters_check(case, tmp_path, tiny_scorer, tiny_bert_scorer,
                                                                  monkeypatch):
    """Honest tables pass; one stored raw value of each table 0.01 off (a token count: 1) is refused naming it."""
    from biaslab.registry import rescore

    name, options, _, expected = case
    lm, predictions = _evaluated(case, tmp_path, tiny_scorer, tiny_bert_scorer)
    monkeypatch.setattr(rescore, "_load", lambda package: served(lm))  # the verified files' load, in small
    params = _params(name, options)
    tables = {f"{name}__{t}": f for t, f in predictions.items()}
    honest = rescore.rescore_row(params, _Evidence(tables), {"base": tmp_path}, n=10_000)
    assert honest.passed and honest.estimate <= 1e-5, honest.reason
    assert "not re-scorable" not in honest.reason
    checked = sum(len(predictions[t]) for t, columns in expected.items() if columns)
    assert honest.reason.startswith(f"{checked} rows recomputed"), honest.reason  # rows of {} tables apart
    assert ("compares no column" in honest.reason) == any(not c for c in expected.values())
    for table, columns in expected.items():  # one column per table (the comparison is the same for every column)
        column = sorted(columns)[-1]
        forged = dict(tables)
        frame = tables[f"{name}__{table}"].copy()
        row = len(frame) // 2
        frame.loc[row, column] = frame.loc[row, column] + (0.01 if "n_tokens" not in column else 1)
        forged[f"{name}__{table}"] = frame
        refused = rescore.rescore_row(params, _Evidence(forged), {"base": tmp_path}, n=10_000)
        assert not refused.passed, (table, column)
        assert f"table {name}__{table} row {row} column {column}" in refused.reason, refused.reason


def test_a_table_without_the_scored_text_is_refused(tmp_path, tiny_scorer, monkeypatch):
    """A forger who drops the text the scores came from (lm_quality's chunk ``text``) is refused, not skipped."""
    from biaslab.registry import rescore

    lm, predictions = _evaluated(CASES[4], tmp_path, tiny_scorer, None)
    monkeypatch.setattr(rescore, "_load", lambda package: served(lm))
    tables = {"lm_quality__lm_quality_chunks": predictions["lm_quality_chunks"].drop(columns="text")}
    row = rescore.rescore_row(_params("lm_quality", {}), _Evidence(tables), {"base": tmp_path})
    assert not row.passed and "lm_quality__lm_quality_chunks" in row.reason and "cannot be scored again" in row.reason
