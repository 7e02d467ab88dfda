"""The scorer protocol: both engines and the test fake implement it; benchmarks reach the model only through it."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from fakes import FakeScorer
from oracles import encode, naive_logprob, naive_sentence_p
from tiny_models import build_tiny_bert

from biaslab.scoring.masked import MaskedScorer
from biaslab.scoring.protocol import (
    CAPABILITIES,
    GENERATE,
    LOGLIKELIHOOD,
    PAIR_PADDING,
    Scorer,
    UnsupportedCapability,
)

BENCHMARKS = Path(__file__).resolve().parents[2] / "src" / "biaslab" / "benchmarks"


def test_no_benchmark_reaches_into_the_model():
    """Tokenisation, BOS, chat and the model itself live behind the scorer, never in a benchmark."""
    pattern = re.compile(r"\b(lm|scorer)\.(tokenizer|model|kind|prompt_prefix)\b"
                         r"|getattr\((lm|scorer), \"(tokenizer|model|kind|prompt_prefix)\"")
    offenders = [f"{path.relative_to(BENCHMARKS)}:{n}: {line.strip()}" for path in sorted(BENCHMARKS.rglob("*.py"))
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert offenders == []


def test_engines_and_fake_implement_the_protocol(tiny_scorer):
    model, tokenizer = build_tiny_bert()
    masked = MaskedScorer(model, tokenizer)
    for scorer in (tiny_scorer, tiny_scorer.with_prefix("Be fair."), masked, masked.with_prefix("Be fair."),
                   FakeScorer(), FakeScorer.masked()):
        assert isinstance(scorer, Scorer)
    assert all(tiny_scorer.supports(c) for c in CAPABILITIES)
    assert not any(masked.supports(c) for c in (LOGLIKELIHOOD, GENERATE, PAIR_PADDING))


def test_a_masked_lm_refuses_what_it_cannot_do():
    model, tokenizer = build_tiny_bert()
    masked = MaskedScorer(model, tokenizer)
    with pytest.raises(UnsupportedCapability, match="supports"):
        masked.loglikelihood([])
    with pytest.raises(UnsupportedCapability):
        masked.generate(["q"])
    with pytest.raises(UnsupportedCapability):
        masked.geometric_mean_probabilities(["a"], [])


def test_sentence_pair_and_cloze_operations_equal_naive_loops(tiny_scorer, tiny_causal_model, tiny_tokenizer):
    model, tok = tiny_causal_model, tiny_tokenizer
    sentences = ["He is a man.", "She is a woman."]
    bos = tok.bos_token_id
    for sentence, score in zip(sentences, tiny_scorer.sentence_scores(sentences)):
        ids = [bos] + encode(tok, sentence)
        assert score.logprob == pytest.approx(naive_logprob(model, ids, 1), abs=1e-5)
        assert score.n_tokens == len(ids) - 1
    (pair,) = tiny_scorer.pair_scores(sentences[:1], sentences[1:], "mpll")
    assert pair.method == "loglikelihood"  # a causal scorer scores sentences, whatever PLL variant was asked
    assert pair.second.logprob == pytest.approx(naive_logprob(model, [bos] + encode(tok, sentences[1]), 1), abs=1e-5)
    tokens = tiny_scorer.token_scores(sentences[:1])[0]
    assert "".join(t.text for t in tokens) == sentences[0]
    assert sum(t.logprob for t in tokens) == pytest.approx(tiny_scorer.sentence_scores(sentences[:1])[0].logprob,
                                                          abs=1e-5)
    (cloze,) = tiny_scorer.cloze_scores(["He is a"], ["man."])
    whole = encode(tok, "He is a man.")
    assert cloze.logprob == pytest.approx(naive_logprob(model, whole, len(encode(tok, "He is a"))), abs=1e-5)


def test_geometric_mean_probabilities_unpadded_and_pair_padded(tiny_scorer, tiny_causal_model, tiny_tokenizer):
    """The GBEM-UA rule: the shorter sentence of a pair gets EOS pads, fed and scored inside the mean."""
    model, tok = tiny_causal_model, tiny_tokenizer
    sentences = ["Кандидат має досвід.", "Кандидатка має досвід роботи тут.", "Він може."]
    n = [len(encode(tok, s)) for s in sentences]
    assert n[0] < n[1]
    result = tiny_scorer.geometric_mean_probabilities(sentences, [(0, 1), (1, 2), (2, 2)])
    for i, s in enumerate(sentences):
        assert result.geometric_mean(i) == pytest.approx(naive_sentence_p(model, tok, s), abs=1e-6)
        assert result.sentences[i].n_tokens == n[i]
    first, second = result.pairs[0]
    assert (first.n_pad, second.n_pad) == (n[1] - n[0], 0)
    assert first.probability == pytest.approx(naive_sentence_p(model, tok, sentences[0], n[1] - n[0]), abs=1e-6)
    assert second.probability == pytest.approx(result.geometric_mean(1), abs=1e-9)
    assert result.pairs[1][1].n_pad == n[1] - n[2]
    assert result.pairs[2][0].n_pad == 0  # a sentence paired with itself needs no pad
    plain = tiny_scorer.geometric_mean_probabilities(sentences, [(0, 1)], pad_with_eos=False)
    assert plain.pairs[0][0].n_pad == 0
    assert plain.pairs[0][0].probability == pytest.approx(result.geometric_mean(0), abs=1e-9)
    assert math.isclose(plain.geometric_mean(1), result.geometric_mean(1), abs_tol=1e-9)
