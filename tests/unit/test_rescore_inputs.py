"""Each benchmark's ``rescore_inputs`` (:mod:`biaslab.benchmarks.base`) against the prediction tables it writes,
and the promoter's cross-version comparison of those inputs (:func:`biaslab.registry.rescore.rescore_row`): a key
in one version's table only, a table of a benchmark that declares nothing, a malformed declaration.

Tiny model, the benchmarks' own unit-test data (as ``test_benchmark_rescore.py``); evidence in memory.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

import pandas as pd
import pytest
from test_agreement import SMALL_SUBJECTS, _small_data
from test_benchmark_rescore import CTX, _benchmark, _Evidence, _params, _prepare, served
from test_crows_pairs import PAIRS as CROWS

import biaslab.benchmarks
from biaslab.benchmarks.cloze_gender.items import REQUIRED_COLUMNS

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _registered() -> set[str]:
    """Every benchmark biaslab ships: a module or package under ``biaslab.benchmarks`` exposing ``BENCHMARK``."""
    out = set()
    for info in pkgutil.iter_modules(biaslab.benchmarks.__path__):
        if hasattr(importlib.import_module(f"biaslab.benchmarks.{info.name}"), "BENCHMARK"):
            out.add(info.name)
    return out


def _written(name: str, folder, lm) -> dict[str, pd.DataFrame]:
    """The prediction tables benchmark ``name`` writes for a few items, scored by ``lm``."""
    options: dict = {}
    if name == "agreement":
        data = folder / "agreement_data"
        data.mkdir()
        _small_data(data, "t1\tuk\tverb\t{S} [прийшов|прийшла] додому.\n", SMALL_SUBJECTS)
        options = {"data_dir": str(data)}
    elif name == "crows_pairs":
        CROWS.to_parquet(folder / "crows_pairs.parquet")
    else:
        _prepare(name, folder)
    if name == "cloze_gender":  # the optional GenderLex-Wino table too (prepared only when its files can be had)
        lex = pd.read_parquet(folder / "genderlex.parquet")
        lex = lex.assign(dataset="wino", pronoun_m="he", pronoun_w="she")
        lex[REQUIRED_COLUMNS["genderlex_wino"]].to_parquet(folder / "genderlex_wino.parquet")
    return _benchmark(name).run(lm, folder, options, CTX).predictions


@pytest.fixture(scope="module")
def written(tmp_path_factory, tiny_scorer) -> dict[str, dict[str, pd.DataFrame]]:
    """Every registered benchmark's prediction tables (benchmark -> table -> frame), evaluated once."""
    return {name: _written(name, tmp_path_factory.mktemp(name), tiny_scorer) for name in sorted(_registered())}


def test_every_benchmark_declares_the_key_and_input_columns_of_the_tables_it_writes(written):
    """Each registered benchmark declares every table it writes (none left uncompared), no table it does not
    write, key columns the table holds and that name one row each, and input columns the table holds."""
    from biaslab.benchmarks.base import rescore_inputs_of

    assert {"agreement", "crows_pairs", "rubia", "occugender", "gbem_ua", "lm_quality", "cloze_gender"} <= set(written)
    for name, tables in written.items():
        declared = rescore_inputs_of(_benchmark(name))
        assert set(declared) == set(tables), f"{name}: declares {sorted(declared)}, writes {sorted(tables)}"
        for table, frame in tables.items():
            keys, inputs = declared[table]
            assert isinstance(keys, tuple) and isinstance(inputs, tuple) and keys, (name, table, declared[table])
            assert len(frame), f"{name} {table}: no rows written (the check would be empty)"
            missing = [c for c in (*keys, *inputs) if c not in frame.columns]
            assert not missing, f"{name} {table}: declared columns {missing} not in {list(frame.columns)}"
            assert not frame.duplicated(list(keys)).any(), f"{name} {table}: key {keys} does not name one row"


def _two_versions(variant: pd.DataFrame, base: pd.DataFrame, key: str):
    class Evidence(_Evidence):
        def predictions(self, who):
            return {key: (variant if who == "variant" else base).copy()}

    return Evidence({})


@pytest.mark.parametrize("edit", ["missing", "extra"])
def test_a_key_in_one_versions_table_only_is_refused_naming_the_table(edit, written, tiny_scorer, monkeypatch):
    """The variant's RuBia table without one of the base's pairs (or with one pair more): refused before any
    model is loaded, naming the table and the key; the same table for both versions passes."""
    from biaslab.registry import rescore

    monkeypatch.setattr(rescore, "_load", lambda package: served(tiny_scorer))
    key, packages = "rubia__rubia_pairs", {"variant": "v", "base": "b"}
    base = written["rubia"]["rubia_pairs"]
    assert rescore.rescore_row(_params("rubia", {}), _two_versions(base, base, key), packages, n=10_000).passed
    if edit == "missing":
        variant, who, pair = base.drop(index=2), "base", int(base["pair_id"].iloc[2])
    else:
        pair = int(base["pair_id"].max()) + 100
        extra = base.iloc[[2]].assign(pair_id=pair)
        variant, who = pd.concat([base, extra], ignore_index=True), "variant"
    monkeypatch.setattr(rescore, "_load", lambda package: pytest.fail("a model loaded for mismatched keys"))
    refused = rescore.rescore_row(_params("rubia", {}), _two_versions(variant, base, key), packages, n=10_000)
    assert not refused.passed
    assert refused.reason.startswith(f"table {key}: {who!r}'s table has the row pair_id={pair!r}, "), refused.reason
    assert "(1 key(s) in one version's table only)" in refused.reason, refused.reason


UNDECLARED = '''
from biaslab.benchmarks.lm_quality import BENCHMARK as _LM_QUALITY


class Undeclared:
    """A custom benchmark with ``rescore`` and no ``rescore_inputs``."""
    name = "undeclared_quality"
    language = None

    def rescore(self, lm, table, rows, options, tables=None):
        return _LM_QUALITY.rescore(lm, "lm_quality_chunks", rows, options)


BENCHMARK = Undeclared()
'''


def _custom(tmp_path, monkeypatch, source: str, module: str, name: str):
    from biaslab.config import Params

    (tmp_path / f"{module}.py").write_text(source, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    return Params.model_validate({
        "variants": {"base": {"method": "none", "model_dir": "models/base"}},
        "registry": {"model_name": "m", "champion_model": "c", "promotions_experiment": "p",
                     "gate": [{"metric": "gbem_ua/qa_diff_fem", "rule": "better_than_base_beyond_ci"}]},
        "evaluation": {"benchmarks": {name: {"module": module}}},
    })


def test_a_table_of_a_benchmark_declaring_nothing_is_named_as_not_compared(written, tmp_path, tiny_scorer,
                                                                           monkeypatch):
    """A custom benchmark without ``rescore_inputs``: its scores are re-computed, its text is not compared, and the
    row says so naming the table (a forged text with honest scores passes: that is what "not compared" means).
    The same table under lm_quality (which declares it) is not named so and the forged text is refused."""
    from biaslab.benchmarks.lm_quality import score_chunks
    from biaslab.registry import rescore

    monkeypatch.setattr(rescore, "_load", lambda package: served(tiny_scorer))
    params = _custom(tmp_path, monkeypatch, UNDECLARED, "undeclared_bench", "undeclared_quality")
    base = written["lm_quality"]["lm_quality_chunks"].reset_index(drop=True)
    variant = base.copy()
    variant.loc[1, "text"] = "The the the the the."
    variant.loc[[1]] = score_chunks(tiny_scorer, variant.loc[[1]])
    packages = {"variant": "v", "base": "b"}
    row = rescore.rescore_row(params, _two_versions(variant, base, "undeclared_quality__chunks"), packages, n=10_000)
    assert row.passed, row.reason
    assert row.reason.endswith("; inputs not compared across versions (no rescore_inputs): "
                               "undeclared_quality__chunks"), row.reason
    key = "lm_quality__lm_quality_chunks"
    honest = rescore.rescore_row(_params("lm_quality", {}), _two_versions(base, base, key), packages, n=10_000)
    assert honest.passed and "not compared" not in honest.reason, honest.reason
    forged = rescore.rescore_row(_params("lm_quality", {}), _two_versions(variant, base, key), packages, n=10_000)
    assert not forged.passed and "column text" in forged.reason, forged.reason


MALFORMED = [  # (rescore_inputs, what the one-line reason must say)
    ('{"chunks": (("language", "document", "chunk", "no_such_key"), ("text",))}',
     "benchmark declared_quality: rescore_inputs['chunks'] names key column(s) ['no_such_key'] that 'variant''s "
     "table declared_quality__chunks lacks"),
    ('{"chunks": ("chunk", ("text",))}',  # a bare string, not a tuple of key columns
     "benchmark declared_quality: rescore_inputs['chunks'] is ('chunk', ('text',)), not (key columns, input "
     "columns) with at least one key column, each a tuple of column names"),
    ('{"chunks": [("chunk",)]}', "benchmark declared_quality: rescore_inputs['chunks'] is [('chunk',)], not"),
    ('{"chunks": ((), ("text",))}', "benchmark declared_quality: rescore_inputs['chunks'] is ((), ('text',)), not"),
    ('{"chunks": (("chunk", 3), ("text",))}', "benchmark declared_quality: rescore_inputs['chunks'] is"),
    ('[("chunks", (("chunk",), ("text",)))]', "benchmark declared_quality: rescore_inputs is [('chunks', "),
]


@pytest.mark.parametrize("declaration, says", MALFORMED, ids=range(len(MALFORMED)))
def test_a_malformed_declaration_is_one_line_naming_benchmark_and_problem(declaration, says, written, tmp_path,
                                                                          tiny_scorer, monkeypatch):
    """A custom benchmark whose ``rescore_inputs`` names a key column its table lacks, or is not a mapping of
    (tuple of key columns, tuple of input columns): refused in one line naming the benchmark and the problem,
    before any model is loaded; the well-formed declaration passes."""
    from biaslab.registry import rescore

    source = UNDECLARED.replace('name = "undeclared_quality"',
                                'rescore_inputs = {declaration}\n    name = "declared_quality"')
    chunks = written["lm_quality"]["lm_quality_chunks"]
    packages = {"variant": "v", "base": "b"}
    good = source.format(declaration='{"chunks": (("language", "document", "chunk"), ("text",))}')
    monkeypatch.setattr(rescore, "_load", lambda package: served(tiny_scorer))
    params = _custom(tmp_path, monkeypatch, good, "declared_bench", "declared_quality")
    honest = rescore.rescore_row(params, _two_versions(chunks, chunks, "declared_quality__chunks"), packages, n=8)
    assert honest.passed and "not compared" not in honest.reason, honest.reason
    monkeypatch.setattr(rescore, "_load", lambda package: pytest.fail("a model loaded for a malformed declaration"))
    malformed = source.format(declaration=declaration)
    params = _custom(tmp_path, monkeypatch, malformed, "declared_bench", "declared_quality")
    refused = rescore.rescore_row(params, _two_versions(chunks, chunks, "declared_quality__chunks"), packages, n=8)
    assert not refused.passed and "\n" not in refused.reason
    assert refused.reason.startswith(says), refused.reason
