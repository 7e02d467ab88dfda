"""Counterfactual logit pairing: the pairs, their gaps against the scorer, the draws, and the training term."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from biaslab.mitigation.lora.logit_pairing import (
    anchor_means,
    draw_indices,
    encode_pairs,
    english_pairs,
    gbem_ua_pairs,
    pair_gaps,
    pair_log_odds,
    pair_set,
    pairing_term,
)
from biaslab.mitigation.lora.sft_data import NO, QA_INSTRUCTION, SENTENCE, YES
from biaslab.scoring.causal import CausalScorer
from biaslab.scoring.formatting import PromptFormat
from biaslab.scoring.requests import Request
from gbem_frames import gbem_frame


@pytest.fixture(scope="module")
def frame(mirror) -> pd.DataFrame:
    """6 real professions in the prepared schema: 4 fine-tune, 2 evaluation."""
    return gbem_frame(mirror, 6, lambda i: "finetune" if i < 4 else "eval")


def test_gbem_ua_pairs_differ_only_in_gender_and_come_from_the_finetune_split(frame):
    pairs = gbem_ua_pairs(frame)
    finetune = frame[frame["split"] == "finetune"]
    men = finetune[finetune["is_male"] & ~finetune["is_feminitive"]]
    assert len(pairs) == 2 * len(men.drop_duplicates("qa_sentence"))  # one woman per pairing (fem, nofem)
    assert set(pairs["positive"]) == {YES} and set(pairs["negative"]) == {NO}
    eval_professions = set(frame.loc[frame["split"] == "eval", "profession"])
    for row in pairs.itertuples():
        a = SENTENCE.match(row.context_a.removeprefix(QA_INSTRUCTION))
        b = SENTENCE.match(row.context_b.removeprefix(QA_INSTRUCTION))
        assert (a["candidate"], a["pronoun"], b["candidate"], b["pronoun"]) == ("Кандидат", "він", "Кандидатка", "вона")
        assert a["experience"] == b["experience"]
        assert not any(p in row.context_a for p in eval_professions)
    fem = pairs[pairs["context_a"].str.len() != pairs["context_b"].str.len() - 1]  # "Кандидатка"/"вона": +1 char each
    assert not fem.empty  # the feminine titles differ from the masculine ones beyond the two gendered words


def test_english_pairs_use_only_our_own_occupations_female_vs_male_coded():
    from biaslab.pretrain.planted.lexicon import OWN_OCCUPATIONS

    pairs = english_pairs()
    female = [job for job, code in OWN_OCCUPATIONS if code == "F"]
    male = [job for job, code in OWN_OCCUPATIONS if code == "M"]
    across, odds = pairs[pairs["source"] == "occupations_en"], pairs[pairs["source"] == "occupations_en_odds"]
    assert len(across) == 8 * len(female) * len(male) and len(odds) == 8 * (len(female) + len(male))
    first = across.iloc[0]
    assert first["context_a"] == "I have a neighbour who works as a florist."
    assert (first["positive"], first["negative"], first["positive_b"], first["negative_b"]) == (" She", " He") * 2
    assert (odds["context_a"] == odds["context_b"]).all()  # the completion is the counterfactual
    assert (odds["positive"] == odds["negative_b"]).all() and (odds["negative"] == odds["positive_b"]).all()
    benchmark_jobs = {"nurse", "secretary", "carpenter", "mechanic", "doctor", "engineer"}
    assert not any(f" {job}" in text for job in benchmark_jobs for text in pairs["context_a"])


def test_pair_set_sorts_and_names_unknown_sources(frame):
    both = pair_set(frame, ["occupations_en", "gbem_ua"])
    assert both.equals(pair_set(frame, ["gbem_ua", "occupations_en"]))
    assert set(both["source"]) == {"gbem_ua", "occupations_en", "occupations_en_odds"}
    with pytest.raises(ValueError, match="wikipedia"):
        pair_set(frame, ["wikipedia"])


def test_pair_gaps_equal_the_scorers_log_odds_and_do_not_depend_on_the_batch(tiny_causal_model, tiny_tokenizer):
    pairs = pd.DataFrame({
        "context_a": ["Кандидат має досвід. Чи може він", "The doctor said that"],
        "context_b": ["Кандидатка має досвід. Чи може вона", "The nurse said"],
        "positive": [YES, " she would"], "negative": [NO, " he"],
        "positive_b": [YES, " he"], "negative_b": [NO, " she would"], "source": ["gbem_ua", "occupations_en"],
    })
    encoded = encode_pairs(pairs, PromptFormat.create(tiny_tokenizer))
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer)
    want = []
    for row in pairs.itertuples():
        lp = [s.logprob for s in scorer.loglikelihood([
            Request(row.context_a, row.positive), Request(row.context_a, row.negative),
            Request(row.context_b, row.positive_b), Request(row.context_b, row.negative_b)])]
        want.append((lp[0] - lp[1]) - (lp[2] - lp[3]))  # direct: the formula on the scorer's own log-probabilities
    with torch.no_grad():
        together = pair_gaps(tiny_causal_model, encoded, [0, 1]).tolist()
        alone = [pair_gaps(tiny_causal_model, encoded, [i]).item() for i in (0, 1)]
    assert together == pytest.approx(want, abs=1e-5)
    assert alone == pytest.approx(together, abs=1e-5)
    drawn = {"gbem_ua": [0], "occupations_en": [1]}
    with torch.no_grad():
        term, parts = pairing_term(tiny_causal_model, encoded, drawn)
        anchors = anchor_means(tiny_causal_model, encoded)
        log_odds = pair_log_odds(tiny_causal_model, encoded, [0, 1])
        same, _ = pairing_term(tiny_causal_model, encoded, drawn, anchors=anchors)
        moved, moved_parts = pairing_term(tiny_causal_model, encoded, drawn, anchors=anchors + 0.5)
    assert parts == pytest.approx({"abs_gap_gbem_ua": abs(want[0]), "abs_gap_occupations_en": abs(want[1])}, abs=1e-5)
    assert float(term) == pytest.approx((abs(want[0]) + abs(want[1])) / 2, abs=1e-5)  # sources weigh the same
    assert anchors.tolist() == pytest.approx(log_odds.mean(dim=1).tolist(), abs=1e-6)
    assert float(same) == pytest.approx(float(term), abs=1e-5)  # at the anchors the drift is 0
    # 0.5 off the anchor costs 0.5 for the anchored source (GBEM-UA) only, averaged over the two sources
    assert float(moved) == pytest.approx(float(term) + 0.5 / 2, abs=1e-5)
    assert moved_parts["drift_gbem_ua"] == pytest.approx(0.5, abs=1e-5) and "drift_occupations_en" not in moved_parts


def _full_vocabulary_log_odds(model, encoded, indices):
    """The direct formula: log-softmax over every position and the whole vocabulary, masked to the spans."""
    rows = [4 * i + k for i in indices for k in range(4)]
    length = max(len(encoded.sequences[r]) for r in rows)
    ids = torch.zeros((len(rows), length), dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    span_mask = torch.zeros((len(rows), length - 1))
    for j, r in enumerate(rows):
        seq, (start, end) = encoded.sequences[r], encoded.spans[r]
        ids[j, : len(seq)], mask[j, : len(seq)] = torch.tensor(seq), 1
        span_mask[j, start - 1: end - 1] = 1.0
    logits = model(input_ids=ids, attention_mask=mask).logits.float()
    logprobs = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
    completion = (logprobs * span_mask).sum(-1).view(len(indices), 4)
    return torch.stack([completion[:, 0] - completion[:, 1], completion[:, 2] - completion[:, 3]], dim=1)


def test_pair_log_odds_equal_the_full_vocabulary_formula_in_value_and_gradient(tiny_causal_model, tiny_tokenizer):
    """The log-softmax runs only where a completion token is predicted; values and gradients must not move."""
    pairs = pd.DataFrame({
        "context_a": ["The doctor said that", "Кандидат має досвід. Чи може він"],
        "context_b": ["The nurse said", "Кандидатка має досвід. Чи може вона"],
        "positive": [" she would go home", YES], "negative": [" he", NO],
        "positive_b": [" he", YES], "negative_b": [" she would go home", NO], "source": ["occupations_en", "gbem_ua"],
    })
    encoded = encode_pairs(pairs, PromptFormat.create(tiny_tokenizer))
    assert max(end - start for start, end in encoded.spans) >= 3  # sums over several completion tokens too
    params = [p for p in tiny_causal_model.parameters() if p.requires_grad]
    results = []
    for compute in (pair_log_odds, _full_vocabulary_log_odds):
        tiny_causal_model.zero_grad(set_to_none=True)
        log_odds = compute(tiny_causal_model, encoded, [0, 1])
        (log_odds * torch.tensor([[1.0, -2.0], [0.5, 3.0]])).sum().backward()
        results.append((log_odds.detach(), [p.grad.clone() for p in params]))
    tiny_causal_model.zero_grad(set_to_none=True)
    (fast, fast_grads), (direct, direct_grads) = results
    assert torch.equal(fast, direct)
    assert all(torch.equal(a, b) for a, b in zip(fast_grads, direct_grads, strict=True))


def test_draws_are_per_source_distinct_and_a_function_of_seed_and_step():
    sources = ["a"] * 10 + ["b"] * 3
    drawn = draw_indices(sources, 4, seed=0, step=5, micro_step=1)
    assert len(drawn["a"]) == 4 and len(set(drawn["a"])) == 4 and all(i < 10 for i in drawn["a"])
    assert sorted(drawn["b"]) == [10, 11, 12]  # fewer pairs than asked: all of them
    assert drawn == draw_indices(sources, 4, seed=0, step=5, micro_step=1)  # a resumed run draws the same
    assert drawn != draw_indices(sources, 4, seed=0, step=6, micro_step=1)


@pytest.mark.slow
def test_pairing_objective_shrinks_the_training_pairs_gap_and_weight_zero_is_plain_sft(frame, tmp_path, tiny_tokenizer):
    from biaslab.config import LoraConfig
    from biaslab.mitigation.lora.train import train_lora
    from biaslab.mitigation.lora.sft_sources import training_set
    from biaslab.pretrain.architecture import build_llama

    fmt = PromptFormat.create(tiny_tokenizer)
    pairs = pair_set(frame, ["gbem_ua", "occupations_en"]).groupby("source").head(4)  # 4 per source: all drawn each pass
    encoded = encode_pairs(pairs, fmt)
    train = training_set(frame, "none", ["gbem_ua", "occupations_en"])

    def trained(objective: str, weight: float):
        model = build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64, seed=0)
        cfg = LoraConfig(objective=objective, pairing_weight=weight, pairing_pairs=4, learning_rate=2e-2,
                         max_steps=12, per_device_batch_size=2, gradient_accumulation_steps=1, eval_steps=0,
                         logging_steps=2, dropout=0.0, r=8, alpha=32,
                         target_modules=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
        out = train_lora(model, tiny_tokenizer, train, cfg, tmp_path / f"{objective}-{weight}", checkpoints=False,
                         fmt=fmt, pairs=pairs)
        with torch.no_grad():
            gap = pair_gaps(out.model, encoded, list(range(len(encoded)))).abs().mean().item()
        weights = {n: p.detach().clone() for n, p in out.model.named_parameters() if "lora_" in n}
        return gap, weights, out.log_history

    sft_gap, sft_weights, _ = trained("sft", 1.0)
    zero_gap, zero_weights, _ = trained("logit_pairing", 0.0)
    paired_gap, _, history = trained("logit_pairing", 20.0)
    assert all(torch.equal(sft_weights[n], zero_weights[n]) for n in sft_weights)  # the term alone makes the difference
    assert paired_gap < 0.9 * sft_gap  # a random 2-layer model: the gaps are ~4 nats; 12 steps must take a tenth off
    curve = [h["pairing_loss"] for h in history if "pairing_loss" in h]
    assert curve[-1] < curve[0]
    assert any("pairing_abs_gap_gbem_ua" in h for h in history)  # the per-source curve reaches the log (MLflow)
    with pytest.raises(ValueError, match="needs counterfactual pairs"):
        train_lora(build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64), tiny_tokenizer,
                   train, LoraConfig(objective="logit_pairing", max_steps=1), tmp_path / "x", checkpoints=False, fmt=fmt)
