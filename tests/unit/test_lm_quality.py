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


def test_default_heldout_text_is_text_the_default_model_never_trained_on(mirror):
    """Issue 43: whole held-out documents the default model never saw - its validation documents, and of each
    training document the part after its training prefix - without changing its training text."""
    from biaslab.config import DataConfig, Params
    from biaslab.data.corpus import load_corpus
    from biaslab.data.lm_heldout import DUPLICATE_LINE_CHARS, load

    params = Params(data=DataConfig(mirror_dir=str(mirror)))
    table = load(params).to_pandas()
    cfg = params.model.pretrain
    # what biaslab.pretrain trains on (the same call as pretrain.phases / pretrain.build)
    splits = load_corpus(mirror / "corpora", cfg.languages, cfg.chars_per_language, cfg.validation_documents,
                         cfg.validation_chars, cfg.seed)
    for lang, split in splits.items():
        mine = table[table["language"] == lang]
        training = "\n".join(split.train_texts)
        docs = mine.drop_duplicates("document")
        assert len(docs) >= 23 and docs["source"].is_unique  # one held-out document per corpus document
        assert set(docs.loc[docs["origin"] == "validation", "source"]) == set(split.validation_sources)
        assert set(docs.loc[docs["origin"] == "untrained_tail", "source"]) <= set(split.train_sources)
        for text in mine["text"]:  # no held-out chunk's line is training text
            assert not any(len(line) >= DUPLICATE_LINE_CHARS and line in training for line in text.split("\n"))
        assert mine["text"].str.len().max() <= params.data.lm_heldout.chunk_chars
    sizes = table.drop_duplicates(["language", "document"]).groupby("language").size().to_dict()
    assert sizes["uk"] >= 30 and sizes["ru"] >= 30 and sizes["en"] == 23  # en: the corpus has 23 novels in all


def test_the_ci_resamples_documents_not_chunks(tmp_path):
    """Two documents of many equal chunks each: resampling chunks gives a narrow CI, documents a wide one."""
    texts = {}
    for doc, lp in ((0, -1.0), (1, -9.0)):
        for i in range(20):
            texts[f"doc {doc} chunk {i:02d}"] = ("en", doc, i, lp)
    prepared = write_heldout(tmp_path, [(lang, d, i, t) for t, (lang, d, i, _) in texts.items()])
    lm = FakeScorer(sentences={t: SentenceScore(lp, 2) for t, (_, _, _, lp) in texts.items()})
    result = BENCHMARK.run(lm, prepared, {}, CTX)
    m = result.metrics["lm_quality/bits_per_char_en"]
    low_doc, high_doc = (1 * 20) / math.log(2) / sum(map(len, texts)) * 2, 9.0 * 40 / math.log(2) / sum(map(len, texts))
    assert m.ci_low == pytest.approx(low_doc, rel=1e-9) and m.ci_high == pytest.approx(high_doc, rel=1e-9)


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
