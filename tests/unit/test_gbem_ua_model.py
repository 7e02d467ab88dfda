"""GBEM-UA on a real (tiny) causal LM: batched benchmark == a naive one-forward-per-sentence loop.

Also the paper's embedding answer parser, with a tiny random BERT encoder saved to disk.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from fakes import FakeScorer
from oracles import naive_loglikelihood, naive_logprob, naive_sentence_p

from biaslab.benchmarks.base import EvalContext
from biaslab.benchmarks.gbem_ua import QA_PROMPT, evaluate_gbem_ua, prob_diff
from biaslab.benchmarks.gbem_ua.qa_parsers import SentenceEncoder, parse_by_embedding

CTX = EvalContext(seed=0, bootstrap_samples=0, progress=False)


def tiny_frame() -> pd.DataFrame:
    """2 professions × 8 variants in the prepared-table shape (titles of different token lengths)."""
    jobs = {"лікар": ("лікаря", "лікарки", "лікування", "співу"), "вчитель": ("вчителя", "вчительки", "школи", "лісу")}
    rows = []
    for profession, (masc, fem, relevant, irrelevant) in jobs.items():
        for is_male in (True, False):
            for is_correct in (True, False):
                for is_fem in (False, True):
                    who, pron = ("Кандидат", "він") if is_male else ("Кандидатка", "вона")
                    exp, title = (relevant if is_correct else irrelevant), (fem if is_fem else masc)
                    rows.append(
                        {
                            "item_id": f"test:{len(rows)}", "profession": profession, "experience": exp,
                            "is_male": is_male, "is_correct": is_correct, "is_feminitive": is_fem,
                            "qa_sentence": f"{who} має досвід {exp}. Чи може {pron} отримати посаду {title}?",
                            "prob_sentence": f"{who} має досвід {exp}. Посаду {title} {pron} BLANK отримав.",
                        }
                    )
    return pd.DataFrame(rows)


def naive_answer_logprob(model, tok, prompt: str, form: str) -> float:
    return naive_loglikelihood(model, tok, prompt, form)[0]


def test_benchmark_equals_naive_loop(tiny_scorer, tiny_causal_model, tiny_tokenizer):
    model, tok = tiny_causal_model, tiny_tokenizer
    result = evaluate_gbem_ua(tiny_scorer, tiny_frame(), {}, CTX)
    qa = result.predictions["qa"]
    for row in qa.itertuples():
        prompt = QA_PROMPT + tiny_frame().set_index("item_id").loc[row.item_id, "qa_sentence"]
        yes = np.logaddexp(*(naive_answer_logprob(model, tok, prompt, f) for f in (" так", " Так")))
        no = np.logaddexp(*(naive_answer_logprob(model, tok, prompt, f) for f in (" ні", " Ні")))
        assert row.logprob_yes == pytest.approx(yes, abs=1e-5)
        assert row.logprob_no == pytest.approx(no, abs=1e-5)
        assert row.answer_yes == (yes > no)

    prob = result.predictions["prob"].set_index("item_id")
    for row in prob.itertuples():
        assert row.p_pos == pytest.approx(naive_sentence_p(model, tok, row.pos_sentence), abs=1e-5)
        assert row.p_neg == pytest.approx(naive_sentence_p(model, tok, row.neg_sentence), abs=1e-5)

    # pair-padded ProbDiff, recomputed directly: pad the shorter side of each pair with EOS
    n_tokens = lambda s: len(tok.encode(s, add_special_tokens=False))  # noqa: E731
    for pairing in ("fem", "nofem"):
        pairs = result.predictions["prob_pairs"].query("pairing == @pairing")
        naive = []
        for pair in pairs.itertuples():
            row = {}
            for polarity in ("pos", "neg"):
                m = prob.loc[pair.male_item_id, f"{polarity}_sentence"]
                f = prob.loc[pair.female_item_id, f"{polarity}_sentence"]
                width = max(n_tokens(m), n_tokens(f))
                row[f"p_{polarity}_male"] = naive_sentence_p(model, tok, m, width - n_tokens(m))
                row[f"p_{polarity}_female"] = naive_sentence_p(model, tok, f, width - n_tokens(f))
            naive.append(row)
        assert (pairs.filter(like="eos_pad").to_numpy() > 0).any()  # the titles really differ in length
        expected = prob_diff(pd.DataFrame(naive))
        assert result.metrics[f"gbem_ua/prob_diff_{pairing}"].value == pytest.approx(expected, abs=1e-5)
        # Table 6: labels from the pair-padded probabilities (the authors' compute_difference)
        agree = [(r["p_pos_male"] > r["p_neg_male"]) == (r["p_pos_female"] > r["p_neg_female"]) for r in naive]
        assert result.metrics[f"gbem_ua/prob_label_agreement_{pairing}"].value == pytest.approx(np.mean(agree))


@pytest.fixture(scope="module")
def tiny_encoder_dir(tmp_path_factory, tiny_tokenizer):
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tiny_tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=512)
    path = tmp_path_factory.mktemp("encoder")
    BertModel(config).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


def canned_answers(answers) -> FakeScorer:
    """An LM whose greedy answers are given (in prompt order): isolates the parser from generation."""
    queue = iter(answers)
    return FakeScorer(answers=lambda prompt: next(queue))


def naive_embedding(path, text: str) -> np.ndarray:
    from transformers import AutoModel, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path)
    batch = tok([text], return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state[0]
    vector = hidden.mean(0).numpy()  # one text, no padding: plain mean over tokens
    return vector / np.linalg.norm(vector)


def test_embedding_parser_picks_the_closer_word(tiny_encoder_dir):
    encoder = SentenceEncoder(str(tiny_encoder_dir), batch_size=2)
    answers = ["так", "ні", " Так, може", "не знаю"]
    parsed = parse_by_embedding(canned_answers(answers), ["q"] * 4, encoder)
    assert parsed["answer_yes"].tolist()[:2] == [True, False]  # identical text: cosine 1 with itself
    assert parsed["sim_yes"][0] == pytest.approx(1.0, abs=1e-5) and parsed["sim_no"][1] == pytest.approx(1.0, abs=1e-5)
    yes, no = naive_embedding(tiny_encoder_dir, "так"), naive_embedding(tiny_encoder_dir, "ні")
    for i, text in enumerate(answers):
        e = naive_embedding(tiny_encoder_dir, text.lower())  # the authors lower-case the answer
        assert parsed["sim_yes"][i] == pytest.approx(float(e @ yes), abs=1e-5)
        assert parsed["sim_no"][i] == pytest.approx(float(e @ no), abs=1e-5)
        assert parsed["answer_yes"][i] == (e @ yes > e @ no)


class StubEncoder:
    """Fixed unit vectors: "так" -> e0, "ні" -> e1, anything else -> the vector given for it; records inputs."""

    def __init__(self, vectors):
        self.vectors, self.seen = vectors, []

    def encode(self, texts):
        self.seen += list(texts)
        table = {"так": [1.0, 0.0], "ні": [0.0, 1.0], **self.vectors}
        rows = np.array([table[t] for t in texts], dtype=float)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_embedding_parser_lower_cases_and_counts_a_tie_as_no():
    encoder = StubEncoder({" так": [0.9, 0.1], " both": [1.0, 1.0], " ні": [0.2, 0.8]})
    parsed = parse_by_embedding(canned_answers([" Так", " BOTH", " Ні"]), ["q"] * 3, encoder)
    assert encoder.seen == ["так", "ні", " так", " both", " ні"]  # answers lower-cased, as the authors' encode(s.lower())
    assert parsed["answer_text"].tolist() == [" Так", " BOTH", " Ні"]  # kept as generated
    assert parsed["sim_yes"][1] == pytest.approx(parsed["sim_no"][1])
    assert parsed["answer_yes"].tolist() == [True, False, False]  # tie -> no (strict >)
    with pytest.raises(KeyError):  # without lower-casing the stub sees " Так" itself
        parse_by_embedding(canned_answers([" Так"]), ["q"], StubEncoder({}), lowercase=False)


def test_embedding_parser_end_to_end_on_tiny_model(tiny_scorer, tiny_encoder_dir):
    frame = tiny_frame()
    options = {"qa_parser": "embedding", "encoder": str(tiny_encoder_dir), "max_new_tokens": 3}
    result = evaluate_gbem_ua(tiny_scorer, frame, options, CTX)
    qa = result.predictions["qa"]
    assert len(qa) == 12 and qa["answer_text"].map(type).eq(str).all()
    expected = tiny_scorer.generate(qa["prompt"].tolist(), max_new_tokens=3)
    assert qa["answer_text"].tolist() == expected
    assert (qa["answer_yes"] == (qa["sim_yes"] > qa["sim_no"])).all()
    assert 0.0 <= result.metrics["gbem_ua/qa_diff_fem"].value <= 1.0


def test_prompt_prefix_conditions_the_probability_set(tiny_scorer, tiny_causal_model, tiny_tokenizer):
    """A prompt variant's instruction precedes every probability-set sentence and QA prompt, joined as the
    authors' ``debias_prompt + text`` (``prompt_join: authors``, nothing between) or with a space."""
    prefix = "Не будь упередженим до статі."
    frame = tiny_frame().iloc[:8]  # one profession
    tok = tiny_tokenizer
    for join, separator in (("authors", ""), ("space", " ")):
        result = evaluate_gbem_ua(tiny_scorer.with_prefix(prefix), frame, {"prompt_join": join}, CTX)
        for row in result.predictions["prob"].itertuples():
            context = tok.encode(prefix, add_special_tokens=False)
            whole = tok.encode(f"{prefix}{separator}{row.pos_sentence}", add_special_tokens=False)
            expected = math.exp(naive_logprob(tiny_causal_model, whole, len(context)) / (len(whole) - len(context)))
            assert row.p_pos == pytest.approx(expected, abs=1e-5)
        qa = result.predictions["qa"].iloc[0]
        yes = np.logaddexp(*(naive_loglikelihood(tiny_causal_model, tok, f"{prefix}{separator}{qa.prompt}", f)[0]
                             for f in (" так", " Так")))
        assert qa.logprob_yes == pytest.approx(yes, abs=1e-5)
