"""The promoter's re-scoring check itself (:func:`biaslab.registry.rescore.rescore_row`), beyond each benchmark's
``rescore`` (``test_benchmark_rescore.py``): one load per version whatever the languages, the older four-argument
``rescore`` contract of a custom module, the gate inputs that are not log-probabilities (token and character
counts, answers, preferences, probabilities near 0.0025) and the stored text itself.

Tiny models and tiny evaluations (the benchmarks' own unit-test data), evidence in memory, every row drawn.
"""

from __future__ import annotations

import copy
import gc
import os
import sys
import weakref

import pandas as pd
import pytest
from test_benchmark_rescore import CASES, _Evidence, _evaluated, _params, served

os.environ.setdefault("OMP_NUM_THREADS", "1")
LANGUAGES = {"lm_quality": None, "gbem_ua": "uk", "rubia": "ru", "occugender": "en"}
ONE_TABLE = {"lm_quality": "lm_quality_chunks", "gbem_ua": "qa", "rubia": "rubia_pairs",
             "occugender": "occugender_forms"}


def _case(name: str):
    return next(c for c in CASES if c[0] == name and not c[2] and not c[1])


def _tables(name: str, tmp_path, tiny_scorer) -> dict[str, pd.DataFrame]:
    folder = tmp_path / name
    folder.mkdir()
    _, predictions = _evaluated(_case(name), folder, tiny_scorer, None)
    return {f"{name}__{t}": f for t, f in predictions.items()}


def test_each_version_is_loaded_once_whatever_the_languages(tmp_path, tiny_scorer, monkeypatch):
    """Tables of four benchmarks (no language, uk, ru, en) of a variant and its base: the loader (which verifies
    the package and loads the weights) runs exactly once per version, not once per (version, language), and the
    first version's model is released before the second one loads."""
    from biaslab.registry import rescore
    from biaslab.serving import loader

    tables: dict[str, pd.DataFrame] = {}
    for name, table in ONE_TABLE.items():  # one table each, a few rows: every row is drawn, quickly
        key = f"{name}__{table}"
        tables[key] = _tables(name, tmp_path, tiny_scorer)[key].head(8)
    loads: list[str] = []
    held: list[weakref.ref] = []

    def load(package):
        gc.collect()
        assert all(ref() is None for ref in held), "the previous version's scorer is still held"
        scorer = copy.copy(tiny_scorer)  # the same tiny model: each version's own scorer object
        held.append(weakref.ref(scorer))
        loads.append(str(package))
        return served(scorer)

    monkeypatch.setattr(loader, "load_served_variant", load)
    params = _params("lm_quality", {}, {name: {} for name in LANGUAGES if name != "lm_quality"})
    packages = {"variant": tmp_path / "variant", "base": tmp_path / "base"}
    row = rescore.rescore_row(params, _Evidence(tables), packages, n=10_000)
    assert row.passed, row.reason
    assert {k.partition("__")[0] for k in tables} == set(LANGUAGES)
    assert sorted(loads) == sorted(str(p) for p in packages.values())  # one each


def test_every_language_scorer_shares_the_one_loaded_model(tiny_scorer):
    """A prompt version's scorer per language: its own prefix, the same model object (a shallow copy)."""
    from biaslab.registry.rescore import _scorer

    version = served(tiny_scorer, {"en": "Be fair.", "uk": "Будь чесним.", "ru": "Будь честным."})
    for language, prefix in (("en", "Be fair."), ("uk", "Будь чесним."), ("ru", "Будь честным.")):
        scorer = _scorer(version, language)
        assert scorer.prompt_prefix == prefix and scorer.model is tiny_scorer.model
    assert _scorer(version, None) is tiny_scorer  # no language (lm_quality, agreement): no prefix


OLD_MODULE = '''
from biaslab.benchmarks.lm_quality import BENCHMARK as _LM_QUALITY


class OldContract:
    """A custom benchmark written to the older four-argument rescore contract (no ``tables``)."""
    name = "old_quality"
    language = None

    def rescore(self, lm, table, rows, options):
        return _LM_QUALITY.rescore(lm, "lm_quality_chunks", rows, options) if table == "chunks" else {}


BENCHMARK = OldContract()
'''


def test_a_custom_module_with_the_older_four_argument_rescore_is_checked(tmp_path, tiny_scorer, monkeypatch):
    """``rescore(lm, table, rows, options)`` without ``tables``: called without it (no TypeError); its rows are
    re-scored, and an edited one refused. A table whose rescore returns ``{}`` is named apart."""
    from biaslab.config import Params
    from biaslab.registry import rescore
    from biaslab.serving import loader

    (tmp_path / "old_contract_bench.py").write_text(OLD_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "old_contract_bench", raising=False)
    monkeypatch.setattr(loader, "load_served_variant", lambda package: served(tiny_scorer))
    chunks = _tables("lm_quality", tmp_path, tiny_scorer)["lm_quality__lm_quality_chunks"]
    params = Params.model_validate({
        "variants": {"base": {"method": "none", "model_dir": "models/base"}},
        "registry": {"model_name": "m", "champion_model": "c", "promotions_experiment": "p",
                     "gate": [{"metric": "gbem_ua/qa_diff_fem", "rule": "better_than_base_beyond_ci"}]},
        "evaluation": {"benchmarks": {"old_quality": {"module": "old_contract_bench"}}},
    })
    evidence = _Evidence({"old_quality__chunks": chunks, "old_quality__summary": chunks.head(2)})
    honest = rescore.rescore_row(params, evidence, {"base": tmp_path}, n=10_000)
    assert honest.passed and honest.reason.startswith(f"{len(chunks)} rows recomputed (old_quality__chunks;")
    assert "; 2 more drawn from tables whose rescore compares no column (old_quality__summary)" in honest.reason
    forged = chunks.assign(logprob=chunks["logprob"] + 0.01)
    refused = rescore.rescore_row(params, _Evidence({"old_quality__chunks": forged}), {"base": tmp_path}, n=10_000)
    assert not refused.passed and "column logprob" in refused.reason, refused.reason


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, tiny_scorer) -> dict[str, dict[str, pd.DataFrame]]:
    """lm_quality, GBEM-UA and RuBia evaluated once by the tiny Llama: benchmark -> its evidence tables."""
    root = tmp_path_factory.mktemp("evaluated")
    return {name: _tables(name, root, tiny_scorer) for name in ("lm_quality", "gbem_ua", "rubia")}


def _flip(value):
    return not value


# (benchmark, table, column, edit): gate inputs that are not log-probabilities, each edited in one stored row
FORGERIES = [
    ("lm_quality", "lm_quality_chunks", "n_chars", lambda v: v + 1),  # bits/char's divisor
    ("gbem_ua", "qa", "answer_yes", _flip),  # the F1s and the answer floor read it
    ("gbem_ua", "qa_pairs", "answer_yes_male", _flip),  # qa_diff reads it
    ("gbem_ua", "prob_pairs", "label_female", _flip),
    ("rubia", "rubia_pairs", "prefers_pro", _flip),  # the pro-shares and the spill-over statistic read it
    ("gbem_ua", "prob_pairs", "p_pos_male", lambda v: v + 5e-4),  # ~0.0025: below the absolute 1e-3
]


@pytest.mark.parametrize("name, table, column, edit", FORGERIES, ids=[f"{f[1]}.{f[2]}" for f in FORGERIES])
def test_a_forged_gate_input_is_refused(name, table, column, edit, evaluated, tiny_scorer, monkeypatch):
    """The honest tables pass; one stored row's ``column`` edited (a count +1, a boolean flipped, a probability
    near 0.0025 moved by 5e-4, a fifth of its value but half the log-prob tolerance) is refused naming it."""
    from biaslab.registry import rescore

    monkeypatch.setattr(rescore, "_load", lambda package: served(tiny_scorer))
    tables, params = evaluated[name], _params(name, {})
    honest = rescore.rescore_row(params, _Evidence(tables), {"base": "base"}, n=10_000)
    assert honest.passed, honest.reason
    frame = tables[f"{name}__{table}"].copy()
    row = len(frame) // 2
    frame.loc[row, column] = edit(frame.loc[row, column])
    refused = rescore.rescore_row(params, _Evidence({**tables, f"{name}__{table}": frame}), {"base": "base"},
                                  n=10_000)
    assert not refused.passed, refused.reason
    assert f"table {name}__{table} row {row} column {column}" in refused.reason, refused.reason


def test_a_forged_text_with_honest_scores_is_refused(evaluated, tiny_scorer, monkeypatch):
    """The variant's lm_quality table with one chunk's text replaced by an easier one and that text's honest
    scores (the score check alone passes it): refused, since the base's table holds the evaluated text for the
    same chunk. The same tables for both versions pass."""
    from biaslab.benchmarks.lm_quality import score_chunks
    from biaslab.registry import rescore

    monkeypatch.setattr(rescore, "_load", lambda package: served(tiny_scorer))
    key = "lm_quality__lm_quality_chunks"
    base = evaluated["lm_quality"][key]
    variant = base.copy()
    variant.loc[1, "text"] = "The the the the the."
    variant.loc[[1]] = score_chunks(tiny_scorer, variant.loc[[1]])  # honest scores of the forged text
    params, packages = _params("lm_quality", {}), {"variant": "v", "base": "b"}

    class Evidence(_Evidence):
        def predictions(self, who):
            return {key: (variant if who == "variant" else base).copy()}

    alone = rescore.rescore_row(params, _Evidence({key: variant}), {"variant": "v"}, n=10_000)
    assert alone.passed, alone.reason  # its scores are those of its text
    assert rescore.rescore_row(params, _Evidence({key: base}), packages, n=10_000).passed
    refused = rescore.rescore_row(params, Evidence({}), packages, n=10_000)
    assert not refused.passed
    assert refused.reason.startswith(f"table {key} (language='en', document=0, chunk=1) column text: 'variant' "
                                     "stored 'The the the the the.'"), refused.reason
    variant = base.drop(columns="text")  # the text dropped from the variant's table only
    dropped = rescore.rescore_row(params, Evidence({}), packages, n=10_000)
    assert not dropped.passed and dropped.reason.startswith(f"table {key}: 'base''s table has column text, "
                                                            "'variant''s not"), dropped.reason


def test_a_flipped_label_is_refused(evaluated, tiny_scorer, monkeypatch):
    """GBEM-UA's ``is_correct`` (what the F1s compare the answers with) flipped in one variant row: refused."""
    from biaslab.registry import rescore

    monkeypatch.setattr(rescore, "_load", lambda package: served(tiny_scorer))
    tables = evaluated["gbem_ua"]
    forged = tables["gbem_ua__qa"].copy()
    forged.loc[0, "is_correct"] = not forged.loc[0, "is_correct"]

    class Evidence(_Evidence):
        def predictions(self, who):
            return {**tables, "gbem_ua__qa": forged} if who == "variant" else dict(tables)

    refused = rescore.rescore_row(_params("gbem_ua", {}), Evidence({}), {"variant": "v", "base": "b"}, n=16)
    assert not refused.passed and "table gbem_ua__qa (item_id=" in refused.reason, refused.reason
    assert "column is_correct" in refused.reason, refused.reason
