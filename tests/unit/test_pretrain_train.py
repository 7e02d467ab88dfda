"""The training loop on a tiny synthetic corpus: determinism, learning, saving, reloading and scoring."""

from __future__ import annotations

import json

import pytest
import torch

from biaslab.config import PretrainConfig
from biaslab.data.corpus import load_corpus, write_corpus
from biaslab.pretrain.train import lr_factor, train_base_model

SENTENCES = {
    "en": ["The doctor said that he would come.", "The nurse said that she would come.", "He is a man, she is a woman."],
    "uk": ["Кандидат має досвід роботи.", "Кандидатка має досвід роботи.", "Чи може він отримати посаду? Так."],
    "ru": ["Врач сказал, что он придёт.", "Медсестра сказала, что она придёт.", "Мужчина и женщина работают."],
}


def tiny_cfg(**overrides) -> PretrainConfig:
    base = dict(
        chars_per_language=20_000, validation_documents=2, validation_chars=2_000, vocab_size=300,
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        seq_len=32, batch_size=8, learning_rate=3e-3, warmup_steps=2, max_steps=3, eval_every=100, seed=0,
    )
    return PretrainConfig(**{**base, **overrides})


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpora")
    for lang, sentences in SENTENCES.items():
        docs = ["\n".join(f"{sentences[(i + j) % 3]} {i} {j}" for j in range(12)) for i in range(10)]
        write_corpus(root, lang, docs)
    return load_corpus(root, list(SENTENCES), 20_000, 2, 2_000, seed=0)


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_same_params_give_bit_identical_weights(splits):
    a = train_base_model(splits, tiny_cfg(), progress=False)
    b = train_base_model(splits, tiny_cfg(), progress=False)
    wa, wb = weights(a.model), weights(b.model)
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert a.tokenizer.get_vocab() == b.tokenizer.get_vocab()
    c = train_base_model(splits, tiny_cfg(seed=1), progress=False)
    assert not torch.equal(wa["model.embed_tokens.weight"], weights(c.model)["model.embed_tokens.weight"])


def test_loss_decreases_and_beats_unigram(splits):
    result = train_base_model(splits, tiny_cfg(max_steps=40, eval_every=20), progress=False)
    losses = [loss for _, loss in result.loss_curve]
    assert sum(losses[-5:]) / 5 < 0.75 * sum(losses[:5]) / 5
    s = result.summary
    assert s["steps"] == 40 and s["stopped_by"] == "max_steps"
    assert [step for step, _ in result.val_curves["uk"]] == [20, 40]
    for lang in SENTENCES:
        assert s["val_ppl"][lang] < s["unigram_ppl"][lang]


def test_time_budget_stops_training(splits):
    result = train_base_model(splits, tiny_cfg(max_steps=10_000, max_minutes=1e-9), progress=False)
    assert result.summary["stopped_by"] == "max_minutes" and result.summary["steps"] == 0
    assert set(result.summary["val_ppl"]) == set(SENTENCES)  # evaluated even when stopped at once


def test_lr_schedule_warms_up_then_decays():
    assert lr_factor(0, 10, 100) == pytest.approx(0.1)
    assert lr_factor(9, 10, 100) == pytest.approx(1.0)
    assert lr_factor(100, 10, 100) == pytest.approx(0.1)
    assert lr_factor(55, 10, 100) < lr_factor(20, 10, 100)


def test_saved_model_reloads_and_scores(splits, tmp_path):
    from biaslab.models.load import load_model
    from biaslab.pretrain.build import save_trained
    from biaslab.scoring.causal import CausalScorer
    from biaslab.scoring.requests import Request

    result = train_base_model(splits, tiny_cfg(), progress=False)
    out = tmp_path / "base"
    save_trained(result, out)
    assert (out / "model.safetensors").is_file()
    assert not any(p.suffix in {".bin", ".pt"} for p in out.iterdir())
    assert json.loads((out / "training_summary.json").read_text())["steps"] == 3
    loaded = load_model(out)
    assert loaded.kind == "causal" and loaded.model.config.tie_word_embeddings is False
    ids = torch.tensor([[loaded.tokenizer.bos_token_id, 40, 41, 42]])
    with torch.no_grad():
        assert torch.equal(loaded.model(ids).logits, result.model(ids).logits)
    scores = CausalScorer(loaded.model, loaded.tokenizer).loglikelihood(
        [Request("The doctor said that", " he"), Request("Кандидат має", " досвід")]
    )
    assert len(scores) == 2 and all(s.logprob < 0 for s in scores)
