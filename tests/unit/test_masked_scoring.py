"""The masked engine's packed PPLL/MPLL equals a naive loop: one forward pass per masked token."""

from __future__ import annotations

import pytest
import torch
from oracles import naive_pll
from tiny_models import build_tiny_bert

from biaslab.scoring.masked import MaskedScorer


SENTENCES = [
    "The doctor said that he would come.",
    "She is a woman.",
    "Врач сказал, что она придёт.",
    "Men are bad at math.",
    "them",
]


@pytest.fixture(scope="module")
def tiny_bert():
    return build_tiny_bert()


@pytest.mark.parametrize("batch_size", [1, 4, "auto"])
def test_packed_ppll_equals_naive_loop(tiny_bert, batch_size):
    model, tokenizer = tiny_bert
    scorer = MaskedScorer(model, tokenizer, batch_size=batch_size)
    got = scorer.sentence_pll(SENTENCES)
    for sentence, value in zip(SENTENCES, got):
        ids = tokenizer(sentence)["input_ids"]
        positions = list(range(1, len(ids) - 1))  # everything but [CLS] and [SEP]
        assert value == pytest.approx(naive_pll(model, tokenizer, ids, positions), abs=1e-5)


def test_tiny_token_budget_and_explicit_positions(tiny_bert):
    """MPLL-style subsets of positions; a 1-token budget (one job per batch) changes nothing."""
    model, tokenizer = tiny_bert
    ids = [tokenizer(s)["input_ids"] for s in SENTENCES]
    positions = [[1], list(range(2, len(ids[1]) - 1)), [], [1, 3], [1]]
    big = MaskedScorer(model, tokenizer).pseudo_loglikelihood(ids, positions)
    small = MaskedScorer(model, tokenizer, max_batch_tokens=1).pseudo_loglikelihood(ids, positions)
    want = [naive_pll(model, tokenizer, i, p) for i, p in zip(ids, positions)]
    assert big == pytest.approx(want, abs=1e-5)
    assert small == pytest.approx(want, abs=1e-5)
    assert big[2] == 0.0


def test_special_tokens_are_never_scored(tiny_bert):
    model, tokenizer = tiny_bert
    scorer = MaskedScorer(model, tokenizer)
    ids = scorer.encode(["He is a man."])[0]
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert scorer.scorable_positions(ids) == list(range(1, len(ids) - 1))
    unknown = scorer.encode(["He is Ω."])[0]  # "Ω" is not in the vocabulary: [UNK] is text, so it is scored
    assert tokenizer.unk_token_id in unknown
    assert scorer.scorable_positions(unknown) == list(range(1, len(unknown) - 1))


def test_full_logits_fallback_matches_hooked_head(tiny_bert, monkeypatch):
    model, tokenizer = tiny_bert
    scorer = MaskedScorer(model, tokenizer)
    hooked = scorer.sentence_pll(SENTENCES)
    monkeypatch.setattr(type(model), "get_output_embeddings", lambda self: None)
    assert scorer.sentence_pll(SENTENCES) == pytest.approx(hooked, abs=1e-5)


def test_bad_input_is_a_clear_error(tiny_bert):
    model, tokenizer = tiny_bert
    scorer = MaskedScorer(model, tokenizer)
    with pytest.raises(ValueError, match="position 99"):
        scorer.pseudo_loglikelihood([[2, 10, 3]], [[99]])
    with pytest.raises(ValueError, match="maximum"):
        scorer.encode(["He " * 200])


def test_prompt_prefix_conditions_but_is_not_scored(tiny_bert):
    """A prompt-debiasing variant: the instruction is visible context, only the sentence's tokens count."""
    model, tokenizer = tiny_bert
    prefixed = MaskedScorer(model, tokenizer).with_prefix("They are people.")
    got = prefixed.sentence_pll(SENTENCES[:2])
    prefix_len = len(tokenizer("They are people.", add_special_tokens=False)["input_ids"])
    for sentence, value in zip(SENTENCES[:2], got):
        ids = tokenizer(f"They are people. {sentence}")["input_ids"]
        positions = list(range(1 + prefix_len, len(ids) - 1))
        assert prefixed.scorable_positions(ids) == positions
        assert value == pytest.approx(naive_pll(model, tokenizer, ids, positions), abs=1e-5)


def test_row_cap_for_huge_vocabularies(tiny_bert, monkeypatch):
    """The [B, V] logits budget splits batches by rows; scores do not change."""
    import biaslab.scoring.masked as masked

    model, tokenizer = tiny_bert
    want = MaskedScorer(model, tokenizer).sentence_pll(SENTENCES)
    monkeypatch.setattr(masked, "LOGIT_BUDGET", 3 * model.config.vocab_size)  # at most 3 rows per batch
    scorer = MaskedScorer(model, tokenizer)
    ids = scorer.encode(SENTENCES)
    jobs = [(s, p) for s, i in enumerate(ids) for p in scorer.scorable_positions(i)]
    assert max(len(b) for b in scorer._batches(jobs, ids)) == 3
    assert scorer.sentence_pll(SENTENCES) == pytest.approx(want, abs=1e-5)
