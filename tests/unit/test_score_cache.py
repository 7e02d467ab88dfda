"""The opt-in result cache returns exactly what the engine computed, and only for the same model."""

from __future__ import annotations

import pytest

from biaslab.scoring.cache import ScoreCache
from biaslab.scoring.causal import CausalScorer
from biaslab.scoring.requests import Request

REQUESTS = [Request("He is", " a man."), Request("He is", " a woman."), Request("", "Кандидатка має досвід.")]


def test_cached_scores_equal_computed_and_skip_the_model(tmp_path, tiny_causal_model, tiny_tokenizer, monkeypatch):
    cache = ScoreCache(tmp_path, fingerprint="model-a")
    first = CausalScorer(tiny_causal_model, tiny_tokenizer, cache=cache).loglikelihood(REQUESTS)
    assert len(cache) == len(REQUESTS)
    plain = CausalScorer(tiny_causal_model, tiny_tokenizer).loglikelihood(REQUESTS)
    assert first == plain

    again = CausalScorer(tiny_causal_model, tiny_tokenizer, cache=ScoreCache(tmp_path, fingerprint="model-a"))
    monkeypatch.setattr(again, "_compute", lambda *a, **k: pytest.fail("cache hit must not run the model"))
    assert again.loglikelihood(REQUESTS) == first


def test_another_fingerprint_never_reads_stale_scores(tmp_path, tiny_causal_model, tiny_tokenizer):
    CausalScorer(tiny_causal_model, tiny_tokenizer, cache=ScoreCache(tmp_path, "model-a")).loglikelihood(REQUESTS)
    other = ScoreCache(tmp_path, "model-b")
    calls = []
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer, cache=other)
    original = scorer._compute
    scorer._compute = lambda reqs, *rest: calls.append(len(reqs)) or original(reqs, *rest)
    scorer.loglikelihood(REQUESTS)
    assert calls == [len(REQUESTS)]  # every request recomputed for the new model


def test_prompt_prefix_is_part_of_the_key(tmp_path, tiny_causal_model, tiny_tokenizer):
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer, cache=ScoreCache(tmp_path, "model-a"))
    plain = scorer.loglikelihood(REQUESTS)
    prefixed = scorer.with_prefix("Не будь упередженим до статі.").loglikelihood(REQUESTS)
    assert plain != prefixed


def test_a_cache_needs_a_fingerprint(tmp_path):
    with pytest.raises(ValueError, match="fingerprint"):
        ScoreCache(tmp_path, "")
