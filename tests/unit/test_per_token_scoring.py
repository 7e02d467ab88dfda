"""Per-token log-probabilities come from the pass that sums them: one request (one row) per sentence.

``loglikelihood_tokens(..., per_token=True)`` returns each continuation token's log-probability next to
the sum, and ``token_scores`` scores a sentence as one request instead of one request per position (the
old way fed a sentence of n tokens n times). Checked against the naive one-forward-per-item loop
(``tests/oracles.py``) and against the old per-position requests, batched and unbatched.
"""

from __future__ import annotations

import oracles
import pytest
import torch
from tiny_models import build_tiny_bert

from biaslab.scoring.causal import CausalScorer
from biaslab.scoring.masked import MaskedScorer
from biaslab.scoring.requests import Request, TokenRequest
from biaslab.scoring.tokenization import encode_requests

SENTENCES = [
    "The doctor said that he would come.",
    "The doctor said that she would come.",  # shares a long prefix with the first: prefix + suffix passes
    "Кандидатка має досвід роботи.",
    "Кандидатка має досвід. Посаду вона отримала.",
    "Врач сказал, что он придёт.",
    "He",  # a one-token sentence
    "He is a man. She is a woman. They are people.",
]

REQUESTS = [
    Request(ctx, cont)
    for ctx in ["Q: Imagine a doctor. What is the doctor's gender?\nA:", "Врач сказал, что"]
    for cont in [" He", " She is here.", " Non-binary"]
] + [Request("", s) for s in SENTENCES] + [Request("Кандидат має", " досвід."), Request("Кандидат має досвід.", " Посаду")]

ENGINES = [(1, 16384, True), (3, 16384, True), ("auto", 8, True), ("auto", 64, True), ("auto", 16384, True),
           ("auto", 16384, False)]  # (batch_size, max_batch_tokens, prefix sharing on)


def naive_token_logprobs(model, request: TokenRequest) -> list[float]:
    """Each continuation token's ``log P`` from one unpadded forward pass over the whole request."""
    ids = list(request.context_ids + request.continuation_ids)
    return oracles.token_logprobs(model, ids)[len(request.context_ids) - 1:]


def old_token_scores(scorer: CausalScorer, sentences) -> list[list[float]]:
    """What ``token_scores`` used to send: one single-token request per position of each sentence."""
    requests, owners = [], []
    for s, sentence in enumerate(sentences):
        tr = scorer.format.sentence_request(sentence)
        for j, token in enumerate(tr.continuation_ids):
            requests.append(TokenRequest(tr.context_ids + tr.continuation_ids[:j], (token,)))
            owners.append(s)
    out: list[list[float]] = [[] for _ in sentences]
    for s, score in zip(owners, scorer.loglikelihood_tokens(requests)):
        out[s].append(score.logprob)
    return out


@pytest.mark.parametrize("batch_size,budget,share", ENGINES)
def test_per_token_logprobs_equal_naive_loop_and_the_plain_sums(tiny_causal_model, tiny_tokenizer, batch_size,
                                                                budget, share):
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer, batch_size=batch_size, max_batch_tokens=budget,
                          prefix_sharing="auto" if share else "off")
    token_requests = encode_requests(tiny_tokenizer, REQUESTS)
    if share:
        groups = scorer._group(token_requests)
        assert any(len(members) > 1 for _, members in groups), "some requests must share a prefix pass"
    per_token = scorer.loglikelihood_tokens(token_requests, per_token=True)
    plain = scorer.loglikelihood_tokens(token_requests)
    for request, got, summed in zip(token_requests, per_token, plain):
        want = naive_token_logprobs(tiny_causal_model, request)
        assert len(got.token_logprobs) == got.n_tokens == len(request.continuation_ids)
        assert list(got.token_logprobs) == pytest.approx(want, abs=1e-6), request
        assert sum(got.token_logprobs) == pytest.approx(got.logprob, abs=1e-9)
        # the same pass: the per-token call changes nothing about the sum or the greedy flag
        assert (got.logprob, got.n_tokens, got.is_greedy) == (summed.logprob, summed.n_tokens, summed.is_greedy)
        assert summed.token_logprobs is None


def test_token_scores_is_one_request_per_sentence_and_equals_the_old_per_position_requests(
        tiny_causal_model, tiny_tokenizer):
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer)
    sent = []
    original = scorer._compute
    scorer._compute = lambda reqs, *rest: sent.append(len(reqs)) or original(reqs, *rest)
    got = scorer.token_scores(SENTENCES)
    assert sent == [len(SENTENCES)]  # one engine call, one request per sentence

    old = old_token_scores(CausalScorer(tiny_causal_model, tiny_tokenizer), SENTENCES)
    for sentence, tokens, old_values in zip(SENTENCES, got, old):
        naive = oracles.naive_sentence_token_logprobs(tiny_causal_model, tiny_tokenizer, sentence)
        assert [t.text for t in tokens] == [tiny_tokenizer.decode([token]) for token, _ in naive]
        assert [t.logprob for t in tokens] == pytest.approx([lp for _, lp in naive], abs=1e-6)
        assert [t.logprob for t in tokens] == pytest.approx(old_values, abs=1e-6)

    for batch_size, budget, share in ENGINES:  # batched == unbatched
        other = CausalScorer(tiny_causal_model, tiny_tokenizer, batch_size=batch_size, max_batch_tokens=budget,
                             prefix_sharing="auto" if share else "off").token_scores(SENTENCES)
        assert [[t.text for t in s] for s in other] == [[t.text for t in s] for s in got]
        for mine, theirs in zip(other, got):
            assert [t.logprob for t in mine] == pytest.approx([t.logprob for t in theirs], abs=1e-6)


def test_token_scores_feed_each_token_once(tiny_causal_model, tiny_tokenizer):
    """The decoder sees at most every sentence's tokens once (prefix sharing may save some), not n times."""
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer, batch_size=1)
    scorer.token_scores(SENTENCES)
    fed = sum(len(r.context_ids) + len(r.continuation_ids) - 1
              for r in (scorer.format.sentence_request(s) for s in SENTENCES))
    assert 0 < scorer.stats["decoder_tokens"] <= fed
    assert scorer.stats["head_rows"] == sum(len(scorer.format.sentence_request(s).continuation_ids)
                                            for s in SENTENCES)


def test_token_scores_with_a_prompt_prefix_sum_to_the_sentence_scores(tiny_causal_model, tiny_tokenizer):
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer).with_prefix("Не будь упередженим до статі.")
    tokens = scorer.token_scores(SENTENCES[:3])
    for sentence, scored, whole in zip(SENTENCES, tokens, scorer.sentence_scores(SENTENCES[:3])):
        request = scorer.format.sentence_request(sentence)
        assert [t.logprob for t in scored] == pytest.approx(naive_token_logprobs(tiny_causal_model, request),
                                                            abs=1e-6)
        assert sum(t.logprob for t in scored) == pytest.approx(whole.logprob, abs=1e-9)
        assert len(scored) == whole.n_tokens


def test_masked_token_scores_pack_every_masked_copy_into_few_passes():
    """PLL masks each position in turn, but the copies of all sentences share batches (not one call per token)."""
    model, tokenizer = build_tiny_bert()
    sentences = ["The doctor said that he would come.", "She is a woman.", "Врач сказал, что она придёт."]
    passes = []
    handle = model.register_forward_hook(lambda module, args, output: passes.append(1))
    try:
        got = MaskedScorer(model, tokenizer).token_scores(sentences)
    finally:
        handle.remove()
    n_tokens = sum(len(s) for s in got)
    assert 0 < len(passes) < n_tokens / 4
    for sentence, scored in zip(sentences, got):
        naive = oracles.naive_token_plls(model, tokenizer, sentence)
        assert [t.text for t in scored] == [tokenizer.decode([token]) for token, _ in naive]
        assert [t.logprob for t in scored] == pytest.approx([lp for _, lp in naive], abs=1e-5)
    one_by_one = MaskedScorer(model, tokenizer, batch_size=1).token_scores(sentences)
    for mine, theirs in zip(one_by_one, got):
        assert [t.logprob for t in mine] == pytest.approx([t.logprob for t in theirs], abs=1e-5)


def test_a_per_token_request_never_reads_a_cached_sum_without_its_tokens(tmp_path, tiny_causal_model,
                                                                          tiny_tokenizer, monkeypatch):
    from biaslab.scoring.cache import ScoreCache

    requests = encode_requests(tiny_tokenizer, REQUESTS)
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer, cache=ScoreCache(tmp_path, "model-a"))
    scorer.loglikelihood_tokens(requests)  # sums only
    computed = []
    original = scorer._compute
    scorer._compute = lambda reqs, *rest: computed.append(len(reqs)) or original(reqs, *rest)
    first = scorer.loglikelihood_tokens(requests, per_token=True)
    assert computed == [len(set(requests))]  # the cached sums lack per-token values: recomputed
    assert all(s.token_logprobs is not None for s in first)

    again = CausalScorer(tiny_causal_model, tiny_tokenizer, cache=ScoreCache(tmp_path, "model-a"))
    monkeypatch.setattr(again, "_compute", lambda *a, **k: pytest.fail("cache hit must not run the model"))
    assert again.loglikelihood_tokens(requests, per_token=True) == first  # floats round-trip exactly
    assert [s.logprob for s in again.loglikelihood_tokens(requests)] == [s.logprob for s in first]
    assert torch.is_tensor(torch.tensor([t for s in first for t in s.token_logprobs]))
