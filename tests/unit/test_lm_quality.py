"""lm_quality: perplexity and bits per character against a direct computation; the held-out text loader."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from biaslab.benchmarks.base import EvalContext
from biaslab.benchmarks.lm_quality import BENCHMARK, bits_per_char, ppl
from biaslab.data.lm_heldout import chunks
from biaslab.scoring.protocol import SentenceScore
from tests.fakes import FakeScorer
from tests.bootstrap_reference import assert_same_metrics, metrics_both_ways

CTX = EvalContext(bootstrap_samples=200, progress=False)


def write_heldout(tmp_path, rows):
    frame = pd.DataFrame(rows, columns=["language", "document", "chunk", "text"])
    (tmp_path / "test").mkdir(exist_ok=True)  # the benchmark reads the test chunks (biaslab.data.splits)
    frame.to_parquet(tmp_path / "test" / "lm_heldout.parquet", index=False)
    return tmp_path


def test_metrics_are_the_pooled_ratios(tmp_path):
    texts = {"aaaa": ("en", -4.0, 2), "bbbbbb": ("en", -9.0, 3), "вввв": ("uk", -2.0, 4)}
    prepared = write_heldout(tmp_path, [(lang, 0, i, t) for i, (t, (lang, _, _)) in enumerate(texts.items())])
    lm = FakeScorer(sentences={t: SentenceScore(lp, n) for t, (_, lp, n) in texts.items()})
    result = BENCHMARK.run(lm, prepared, {}, CTX)
    m = result.metrics
    assert m["lm_quality/ppl_en"].value == pytest.approx(math.exp(13.0 / 5))
    assert m["lm_quality/bits_per_char_en"].value == pytest.approx(13.0 / math.log(2) / 10)
    assert m["lm_quality/ppl_uk"].value == pytest.approx(math.exp(2.0 / 4))
    assert m["lm_quality/bits_per_char"].value == pytest.approx(15.0 / math.log(2) / 14)
    assert all(v.direction == "lower" for v in m.values())
    assert m["lm_quality/ppl_en"].ci_low <= m["lm_quality/ppl_en"].value <= m["lm_quality/ppl_en"].ci_high
    assert lm.calls == [("sentence_scores", 3)]  # one engine call


def test_item_statistic_is_the_pooled_bits_per_char(tmp_path):
    """The promotion gate pairs bits/char chunk by chunk: the item statistic gives the metric and its CI."""
    from item_statistics_check import assert_item_statistics_are_the_metrics

    texts = {f"text {i} " + "x" * i: ("en" if i % 2 else "uk", -1.0 - i * 0.7, 2 + i % 3) for i in range(12)}
    prepared = write_heldout(tmp_path, [(lang, i // 4, i % 4, t) for i, (t, (lang, _, _)) in enumerate(texts.items())])
    lm = FakeScorer(sentences={t: SentenceScore(lp, n) for t, (_, lp, n) in texts.items()})
    result = BENCHMARK.run(lm, prepared, {}, CTX)
    assert_item_statistics_are_the_metrics(BENCHMARK, result, CTX, expected=("lm_quality/bits_per_char",))


def test_a_prompt_prefix_is_never_applied_and_masked_lms_skip(tmp_path):
    assert BENCHMARK.language is None
    prepared = write_heldout(tmp_path, [("en", 0, 0, "abc")])
    skipped = BENCHMARK.run(FakeScorer.masked(), prepared, {}, CTX)
    assert not skipped.metrics and "lm_quality_skipped" in skipped.tables


def test_perplexity_of_a_tiny_model_matches_a_direct_forward_pass(tmp_path, tiny_scorer, tiny_causal_model,
                                                                   tiny_tokenizer):
    texts = ["The doctor said that he would come.", "He is a man. She is a woman.", "Кандидат має досвід."]
    prepared = write_heldout(tmp_path, [("en", 0, i, t) for i, t in enumerate(texts)])
    result = BENCHMARK.run(tiny_scorer, prepared, {}, CTX)
    nll, tokens = 0.0, 0
    with torch.no_grad():
        for text in texts:
            ids = [tiny_tokenizer.bos_token_id] + tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
            logits = tiny_causal_model(input_ids=torch.tensor([ids])).logits[0, :-1]
            nll -= torch.log_softmax(logits.double(), -1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].sum().item()
            tokens += len(ids) - 1
    assert result.metrics["lm_quality/ppl_en"].value == pytest.approx(math.exp(nll / tokens), rel=1e-4)
    frame = result.predictions["lm_quality_chunks"]
    assert ppl(frame) == pytest.approx(math.exp(nll / tokens), rel=1e-4)
    assert bits_per_char(frame) == pytest.approx(nll / math.log(2) / sum(map(len, texts)), rel=1e-4)


def test_chunks_cut_at_line_breaks_and_long_lines_at_spaces():
    assert chunks("ab\ncd\n\nef", 5) == ["ab\ncd", "ef"]
    assert chunks("one two three four", 9) == ["one two", "three", "four"]
    assert chunks("x" * 12, 5) == ["xxxxx", "xxxxx", "xx"]
    assert "".join(chunks("aa bb\ncc", 100)) == "aa bb\ncc"


def test_default_heldout_text_is_the_default_models_validation_documents(mirror):
    from biaslab.config import DataConfig, Params
    from biaslab.data.lm_heldout import load
    from biaslab.data.corpus import load_corpus

    params = Params(data=DataConfig(mirror_dir=str(mirror)))
    table = load(params).to_pandas()
    cfg = params.model.pretrain
    splits = load_corpus(mirror / "corpora", cfg.languages, 1, cfg.validation_documents, cfg.validation_chars, cfg.seed)
    for lang, split in splits.items():
        mine = table[table["language"] == lang]
        assert " ".join(mine["text"]).split() == " ".join(split.validation_texts).split()  # same words, in order
        assert mine["text"].str.len().max() <= params.data.lm_heldout.chunk_chars


def test_no_heldout_languages_prepares_no_table_and_skips_the_benchmark(tmp_path):
    from biaslab.benchmarks.base import EvalContext
    from biaslab.benchmarks.lm_quality import BENCHMARK
    from biaslab.config import LmHeldoutConfig

    assert LmHeldoutConfig(languages=()).languages == ()
    result = BENCHMARK.run(_AlwaysLoglikelihood(), tmp_path, {}, EvalContext(bootstrap_samples=10, seed=0))
    assert result.metrics == {}
    assert "lm_heldout.languages" in result.tables["lm_quality_skipped"]["reason"][0]


class _AlwaysLoglikelihood:
    def supports(self, capability):
        return True


def test_cis_equal_resampling_dataframes(tmp_path, monkeypatch):
    """ppl and bits per character read a column-view resample as a DataFrame (tests/bootstrap_reference.py)."""
    texts = {f"text {i} " + "x" * i: ("en" if i % 3 else "uk", -1.5 * i - 2.0, i + 1) for i in range(12)}
    prepared = write_heldout(tmp_path, [(lang, i, 0, t) for i, (t, (lang, _, _)) in enumerate(texts.items())])
    lm = FakeScorer(sentences={t: SentenceScore(lp, n) for t, (_, lp, n) in texts.items()})
    assert_same_metrics(*metrics_both_ways(monkeypatch, lambda: BENCHMARK.run(lm, prepared, {}, CTX).metrics))
