"""The masked engine's packed PPLL/MPLL equals a naive loop: one forward pass per masked token.

``build_tiny_bert`` (a WordPiece tokenizer trained on a few sentences + a 2-layer BertForMaskedLM)
is reused by the RuBia and CrowS-Pairs tests.
"""

from __future__ import annotations

import pytest
import torch

from biaslab.scoring.masked import MaskedScorer

TEXT = [
    "The doctor said that he would come. The nurse said that she would come.",
    "He is a man. She is a woman. They are people. Him, her, them.",
    "Врач сказал, что он придёт. Медсестра сказала, что она придёт. Мужчина, женщина.",
    "Women are bad at math. Men are bad at math. Poor people are lazy. Rich people are lazy.",
] * 10

SENTENCES = [
    "The doctor said that he would come.",
    "She is a woman.",
    "Врач сказал, что она придёт.",
    "Men are bad at math.",
    "them",
]


def build_tiny_bert(seed: int = 0):
    """A WordPiece tokenizer + BertForMaskedLM small enough to build in well under a second."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(vocab_size=200, special_tokens=special, show_progress=False)
    tok.train_from_iterator(TEXT, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]",
    )
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    model = BertForMaskedLM(config).eval()
    return model, tokenizer


@pytest.fixture(scope="module")
def tiny_bert():
    return build_tiny_bert()


def naive_pll(model, tokenizer, ids: list[int], positions: list[int]) -> float:
    """One unpadded forward pass per masked position, full logits: the seed authors' loop."""
    total = 0.0
    for p in positions:
        masked = list(ids)
        masked[p] = tokenizer.mask_token_id
        with torch.no_grad():
            logits = model(torch.tensor([masked])).logits[0]  # [T, V]
        total += float(torch.log_softmax(logits[p].float(), -1)[ids[p]])
    return total


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
