"""The promoter's derived-column check (:func:`biaslab.registry.derived.derived_row`, issue 42): every benchmark's
honest tables - as stored by MLflow's ``log_table`` (10 decimals) too - pass; a forged vote, answer, margin or gap
with honest scores beside it is refused naming variant, table, row and column, whichever derived column it is.

Tiny evaluations (the benchmarks' own unit-test data, the tiny Llama of ``tests/conftest.py``; CrowS-Pairs on a
fake scorer), evidence in memory.
"""

from __future__ import annotations

import io
import os

import numpy as np
import pandas as pd
import pytest
from fakes import FakeScorer
from test_agreement import _packaged_subset
from test_benchmark_rescore import CASES, CTX, IDS, _benchmark, _Evidence, _evaluated, _params
from test_crows_pairs import PAIRS as CROWS_PAIRS

os.environ.setdefault("OMP_NUM_THREADS", "1")

# at least these stored columns are arithmetic over the scores, so a forged value of one is refused; the test
# finds every derived column itself (a forged value the benchmark's recomputation puts back) and checks them all
MUST_BE_DERIVED = {
    "rubia": {"rubia_pairs.prefers_pro"},
    "occugender": {"occugender_items.p_female", "occugender_jobs.parity_gap", "occugender_jobs.p_female"},
    "gbem_ua": {"qa.answer_yes", "qa_pairs.logodds_female", "qa_pairs.answer_yes_male", "prob.label",
                "prob_pairs.label_female"},
    "cloze_gender": {"cloze_gender_genderlex.lm_hb_match", "cloze_gender_genderlex.cgs_m",
                     "cloze_gender_winobias.prefers_pro", "cloze_gender_winobias.cgs_prefers_pro",
                     "cloze_gender_winogender.prefers_male", "cloze_gender_winogender.female_logratio",
                     "cloze_gender_winogender.prefers_neutral", "cloze_gender_crows.lm_hb_match"},
    "crows_pairs": {"crows_pairs_pairs.is_stereotype", "crows_pairs_pairs.likelihood_diff"},
    "agreement": {"pairs.correct", "pairs.margin"},
    "lm_quality": set(),
}


def _crows(tmp_path, *_):
    scores = {s: -float(len(s)) / 3 for s in pd.concat([CROWS_PAIRS["sent_more"], CROWS_PAIRS["sent_less"]])}
    CROWS_PAIRS.to_parquet(tmp_path / "crows_pairs.parquet")
    return _benchmark("crows_pairs").run(FakeScorer(sentences=scores), tmp_path, {}, CTX).predictions


def _agreement(tmp_path, tiny_scorer, _):
    options = {"data_dir": str(_packaged_subset(tmp_path))}
    return _benchmark("agreement").run(tiny_scorer, tmp_path, options, CTX).predictions


def _cases():
    """(id, benchmark, options, tables builder): the rescore cases, CrowS-Pairs and agreement."""
    out = [(i, c[0], c[1], lambda tmp, lm, bert, c=c: _evaluated(c, tmp, lm, bert)[1]) for i, c in zip(IDS, CASES)]
    out.append(("crows_pairs-fake", "crows_pairs", {}, _crows))
    out.append(("agreement-causal", "agreement", {}, _agreement))
    return out


CASES_ALL = _cases()


@pytest.fixture(scope="module")
def tiny_bert_scorer():
    from biaslab.scoring.masked import MaskedScorer
    from tiny_models import build_tiny_bert

    model, tokenizer = build_tiny_bert()
    return MaskedScorer(model, tokenizer)


def _as_mlflow_stores(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` written and read back as ``mlflow.log_table`` stores it (pandas ``to_json``, 10 decimals)."""
    return pd.read_json(io.StringIO(frame.to_json(orient="split", index=False)), orient="split")


def _forged(value):
    """A different value of the same kind, or ``None`` for text (a name, not a number)."""
    if isinstance(value, (bool, np.bool_)):
        return not bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value) + 1
    if isinstance(value, (float, np.floating)):
        return float(value) + 0.01 if np.isfinite(value) else 0.5
    return None


@pytest.mark.parametrize("case", CASES_ALL, ids=[c[0] for c in CASES_ALL])
def test_honest_tables_pass_and_every_forged_derived_column_is_refused(case, tmp_path, tiny_scorer,
                                                                       tiny_bert_scorer):
    from biaslab.benchmarks.base import derive_of
    from biaslab.registry.derived import derived_row

    _, name, options, build = case
    predictions = build(tmp_path, tiny_scorer, tiny_bert_scorer)
    params = _params(name, options)
    tables = {f"{name}__{t}": f for t, f in predictions.items()}
    honest = derived_row(params, _Evidence(tables), ["variant", "base"])
    assert honest.passed, honest.reason
    stored = {k: _as_mlflow_stores(f) for k, f in tables.items()}
    assert derived_row(params, _Evidence(stored), ["variant"]).passed  # the store's rounding is not a forgery

    derive = derive_of(_benchmark(name))
    derived: set[str] = set()
    for key, frame in tables.items():
        table = key.partition("__")[2]
        row = len(frame) // 2
        for column in frame.columns:
            value = _forged(frame[column].iloc[row])
            if value is None:
                continue
            edited = frame.copy()
            if isinstance(value, bool) and edited[column].dtype != bool:
                edited[column] = edited[column].astype(object)
            edited.loc[row, column] = value
            again = derive({**{k.partition("__")[2]: f for k, f in tables.items()}, table: edited}, dict(options))
            if again[table] is edited or again[table][column].iloc[row] == value:
                continue  # not recomputed: a score or an input (the re-scoring sample and input check cover those)
            derived.add(f"{table}.{column}")
            refused = derived_row(params, _Evidence({**tables, key: edited}), ["variant", "base"])
            assert not refused.passed, (key, column)
            assert f"'variant' table {key} row {row} column {column}" in refused.reason, refused.reason
    assert MUST_BE_DERIVED[name] <= derived, sorted(derived)


def test_a_table_without_the_scores_its_columns_derive_from_is_refused(tmp_path, tiny_scorer):
    from biaslab.registry.derived import derived_row

    tables = {"agreement__pairs": _agreement(tmp_path, tiny_scorer, None)["pairs"].drop(columns="logprob_grammatical")}
    row = derived_row(_params("agreement", {}), _Evidence(tables), ["variant"])
    assert not row.passed and "cannot be recomputed" in row.reason and "logprob_grammatical" in row.reason


def test_a_dropped_derived_column_is_refused_and_a_custom_module_is_named_as_not_checked(tmp_path, tiny_scorer,
                                                                                        monkeypatch):
    """A table that lacks a column its benchmark writes (the gate would refuse it later or read something else)
    is refused; a benchmark with neither ``derive`` nor ``spike`` is named in a passing row, not silently passed."""
    from biaslab.registry import derived

    pairs = _agreement(tmp_path, tiny_scorer, None)["pairs"]
    row = derived.derived_row(_params("agreement", {}), _Evidence({"agreement__pairs": pairs.drop(columns="correct")}),
                              ["variant"])
    assert not row.passed and "no column correct" in row.reason

    class Custom:  # a custom module: rescore, but no derive and no spike
        def rescore(self, *args, **kwargs):
            return {}

    from biaslab.benchmarks import registry

    original = registry.benchmark_of
    monkeypatch.setattr(registry, "benchmark_of", lambda b, n: (Custom(), {}) if n == "custom" else original(b, n))
    row = derived.derived_row(_params("agreement", {}), _Evidence({"custom__t": pd.DataFrame({"x": [1.0]}),
                                                                   "agreement__pairs": pairs}), ["variant"])
    assert row.passed and "not checked (the benchmark offers neither derive nor spike): custom__t" in row.reason
