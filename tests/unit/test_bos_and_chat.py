"""BOS as the papers had it (``scoring.add_bos``) and chat prompts (``evaluation.prompt_format``).

A Gemma-style tokenizer (BOS added by default) is built from the tiny test tokenizer: same vocabulary,
so the same tiny model scores both, and every number is checked against a naive loop over token ids
built by hand (tests/oracles.py).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from oracles import encode, naive_loglikelihood, naive_logprob
from tiny_models import CHAT_TEMPLATE, CHAT_TEMPLATE_NO_SYSTEM, bos_adding_tokenizer, build_tiny_bert, with_chat_template

from biaslab.scoring.causal import CausalScorer
from biaslab.scoring.formatting import FormatError, PromptFormat, has_system_role, tokenizer_adds_bos
from biaslab.scoring.requests import Request

REQUESTS = [
    Request("The doctor said that", " he would come."),
    Request("Відповідай так чи ні: Чи може вона?", " так"),
    Request("He is a", " man."),
]
SENTENCES = ["He is a man.", "She is a woman."]
PREFIX = "Не будь упередженим до статі."


@pytest.fixture(scope="module")
def gemma_tokenizer(tiny_tokenizer):
    return bos_adding_tokenizer(tiny_tokenizer)


# ---------------------------------------------------------------------------------------------- BOS
def test_auto_is_what_the_tokenizer_adds_by_default(tiny_tokenizer, gemma_tokenizer):
    assert gemma_tokenizer("He is")["input_ids"][0] == gemma_tokenizer.bos_token_id
    assert tokenizer_adds_bos(gemma_tokenizer) and not tokenizer_adds_bos(tiny_tokenizer)
    assert PromptFormat.create(gemma_tokenizer).add_bos and not PromptFormat.create(tiny_tokenizer).add_bos
    assert PromptFormat.create(tiny_tokenizer, True).add_bos and not PromptFormat.create(gemma_tokenizer, False).add_bos


def test_bos_changes_the_score_and_is_added_exactly_once(tiny_causal_model, gemma_tokenizer):
    model, tok = tiny_causal_model, gemma_tokenizer
    auto = CausalScorer(model, tok)  # auto: this tokenizer adds BOS
    off = CausalScorer(model, tok, add_bos=False)
    with_bos, without = auto.loglikelihood(REQUESTS), off.loglikelihood(REQUESTS)
    for request, got, plain in zip(REQUESTS, with_bos, without):
        assert got.logprob == pytest.approx(naive_loglikelihood(model, tok, *_args(request), add_bos=True)[0], abs=1e-5)
        assert plain.logprob == pytest.approx(naive_loglikelihood(model, tok, *_args(request))[0], abs=1e-5)
    assert max(abs(a.logprob - b.logprob) for a, b in zip(with_bos, without)) > 1e-3  # BOS conditions the model
    for tr in auto.format.encode_requests(REQUESTS):
        assert tr.context_ids[0] == tok.bos_token_id and tr.context_ids.count(tok.bos_token_id) == 1
    ids = auto.format.encode_prompt("He is")
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1
    # what the tokenizer itself produces with its defaults (the authors' tokenizer call)
    assert auto.format.encode_requests([Request("He is a", " man.")])[0].context_ids == tuple(tok("He is a")["input_ids"])


def _args(request: Request) -> tuple[str, str]:
    return request.context, request.continuation


def test_auto_leaves_a_tokenizer_without_default_bos_unchanged(tiny_causal_model, tiny_tokenizer):
    """The default model's byte-level BPE adds no BOS: auto scores exactly as before (no BOS on prompts)."""
    auto = CausalScorer(tiny_causal_model, tiny_tokenizer).loglikelihood(REQUESTS)
    off = CausalScorer(tiny_causal_model, tiny_tokenizer, add_bos=False).loglikelihood(REQUESTS)
    assert [s.logprob for s in auto] == [s.logprob for s in off]
    forced = CausalScorer(tiny_causal_model, tiny_tokenizer, add_bos=True).loglikelihood(REQUESTS)
    for request, got in zip(REQUESTS, forced):
        want = naive_loglikelihood(tiny_causal_model, tiny_tokenizer, *_args(request), add_bos=True)[0]
        assert got.logprob == pytest.approx(want, abs=1e-5)


def test_sentences_are_always_scored_from_bos(tiny_causal_model, gemma_tokenizer):
    """Empty contexts condition on BOS whatever add_bos says: CrowS-Pairs stays lm-evaluation-harness' number."""
    on = CausalScorer(tiny_causal_model, gemma_tokenizer, add_bos=True).sentence_scores(SENTENCES)
    off = CausalScorer(tiny_causal_model, gemma_tokenizer, add_bos=False).sentence_scores(SENTENCES)
    assert on == off
    bos = gemma_tokenizer.bos_token_id
    for sentence, score in zip(SENTENCES, on):
        ids = [bos] + encode(gemma_tokenizer, sentence)
        assert score.logprob == pytest.approx(naive_logprob(tiny_causal_model, ids, 1), abs=1e-5)


def test_prompt_variant_puts_bos_before_the_prefix(tiny_causal_model, gemma_tokenizer):
    scorer = CausalScorer(tiny_causal_model, gemma_tokenizer).with_prefix(PREFIX)
    bos = gemma_tokenizer.bos_token_id
    qa = scorer.format.encode_requests(REQUESTS[1:2])[0]
    assert qa.context_ids == (bos, *encode(gemma_tokenizer, f"{PREFIX} {REQUESTS[1].context}"))
    sentence = scorer.format.sentence_request(SENTENCES[0])
    assert sentence.context_ids == (bos, *encode(gemma_tokenizer, PREFIX))  # base: (bos,); prompt: bos + prefix


def test_forcing_bos_without_a_bos_token_is_a_clear_error(tiny_tokenizer):
    from transformers import PreTrainedTokenizerFast

    no_bos = PreTrainedTokenizerFast(tokenizer_object=tiny_tokenizer.backend_tokenizer, eos_token="</s>")
    with pytest.raises(FormatError, match="scoring.add_bos: true"):
        PromptFormat.create(no_bos, True)
    assert PromptFormat.create(no_bos).add_bos is False


# ---------------------------------------------------------------------------------------------- LoRA data
def trl_prompt_completion_ids(tokenizer, prompt: str, completion: str) -> tuple[list[int], list[int]]:
    """TRL 1.16 SFTTrainer on a non-conversational prompt-completion dataset (sft_trainer.tokenize_fn):
    ``completion += eos_token``; ``tokenizer(prompt)``, ``tokenizer(prompt + completion)``; the completion
    starts at their common prefix."""
    prompt_ids = tokenizer(text=prompt)["input_ids"]
    ids = tokenizer(text=prompt + completion + tokenizer.eos_token)["input_ids"]
    n = 0
    while n < min(len(prompt_ids), len(ids)) and prompt_ids[n] == ids[n]:
        n += 1
    return ids, [0] * n + [1] * (len(ids) - n)


@pytest.mark.parametrize("which", ["plain", "gemma"])
def test_lora_examples_are_tokenised_as_trl_does_and_as_the_scorer_scores(tiny_tokenizer, gemma_tokenizer, which):
    from biaslab.mitigation.lora.sft_data import tokenized_examples

    tok = tiny_tokenizer if which == "plain" else gemma_tokenizer
    examples = pd.DataFrame({"prompt": ["Відповідай так чи ні: Чи може він?", "Відповідай так чи ні: Чи може вона?"],
                             "completion": [" так", " так"]})
    fmt = PromptFormat.create(tok)  # auto, raw: the defaults
    got = tokenized_examples(examples, fmt)
    for row, prompt, completion in zip(got.itertuples(), examples["prompt"], examples["completion"]):
        ids, mask = trl_prompt_completion_ids(tok, prompt, completion)
        assert row.input_ids == ids and row.completion_mask == mask
        scored = fmt.encode_requests([Request(prompt, completion)])[0]  # what evaluation scores
        assert row.input_ids == [*scored.context_ids, *scored.continuation_ids, tok.eos_token_id]
        assert row.input_ids.count(tok.bos_token_id) == (1 if which == "gemma" else 0)
    forced = tokenized_examples(examples, PromptFormat.create(tok, True))
    assert all(ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1 for ids in forced["input_ids"])


# ---------------------------------------------------------------------------------------------- chat
def test_chat_wraps_prompts_as_user_turns_with_the_prefix_as_system_prompt(tiny_causal_model, tiny_tokenizer):
    model = tiny_causal_model
    tok = with_chat_template(tiny_tokenizer, CHAT_TEMPLATE)  # writes its own BOS, has a system role
    assert has_system_role(tok)
    scorer = CausalScorer(model, tok, prompt_format="chat").with_prefix(PREFIX)
    request = REQUESTS[1]
    rendered = tok.apply_chat_template([{"role": "system", "content": PREFIX},
                                        {"role": "user", "content": request.context}],
                                       tokenize=False, add_generation_prompt=True)
    assert rendered.startswith("<s><|system|>\n" + PREFIX)
    (got,) = scorer.loglikelihood([request])
    # the answer starts the assistant turn: no leading space (harness: target_delimiter "" under a chat template)
    want, _ = naive_loglikelihood(model, tok, rendered, request.continuation.lstrip())
    assert got.logprob == pytest.approx(want, abs=1e-5)
    tr = scorer.format.encode_requests([request])[0]
    assert tr.context_ids.count(tok.bos_token_id) == 1  # the template's BOS, not a second one
    for add_bos in (True, False):  # forced or not, the template's own BOS stays single
        ids = CausalScorer(model, tok, prompt_format="chat", add_bos=add_bos).format.encode_prompt("Hi")
        assert ids.count(tok.bos_token_id) == 1
    # a sentence has no prompt: chat scores it exactly as raw (RuBia, CrowS-Pairs, probability sets)
    raw = CausalScorer(model, tiny_tokenizer).with_prefix(PREFIX)
    assert scorer.sentence_scores(SENTENCES) == raw.sentence_scores(SENTENCES)


def test_chat_without_a_system_role_prepends_the_prefix_to_the_user_turn(tiny_causal_model, gemma_tokenizer):
    tok = with_chat_template(gemma_tokenizer, CHAT_TEMPLATE_NO_SYSTEM)  # Gemma-like: raises on system
    assert not has_system_role(tok)
    scorer = CausalScorer(tiny_causal_model, tok, prompt_format="chat").with_prefix(PREFIX)
    prompt = scorer.format.prompt("Чи може вона?")
    assert prompt == f"<turn user>{PREFIX} Чи може вона?</turn>\n<turn assistant>"
    (got,) = scorer.loglikelihood([Request("Чи може вона?", " так")])
    want, _ = naive_loglikelihood(tiny_causal_model, tok, prompt, "так", add_bos=True)  # the tokenizer's BOS
    assert got.logprob == pytest.approx(want, abs=1e-5)
    answers = scorer.generate(["Чи може вона?"], max_new_tokens=2)
    assert len(answers) == 1 and isinstance(answers[0], str)


def test_a_benchmark_in_chat_format_scores_the_assistant_answer(tiny_causal_model, tiny_tokenizer):
    from biaslab.benchmarks.gbem_ua.qa_parsers import parse_by_logprob

    tok = with_chat_template(tiny_tokenizer)
    scorer = CausalScorer(tiny_causal_model, tok, prompt_format="chat")
    prompts = ["Відповідай так чи ні: Чи може вона?"]
    parsed = parse_by_logprob(scorer, prompts, "lower")
    rendered = tok.apply_chat_template([{"role": "user", "content": prompts[0]}], tokenize=False,
                                       add_generation_prompt=True)
    assert parsed["logprob_yes"][0] == pytest.approx(naive_loglikelihood(tiny_causal_model, tok, rendered, "так")[0],
                                                     abs=1e-5)
    raw = parse_by_logprob(CausalScorer(tiny_causal_model, tok), prompts, "lower")
    assert not math.isclose(parsed["logprob_yes"][0], raw["logprob_yes"][0], abs_tol=1e-4)  # raw stays the default


def test_chat_needs_a_chat_template_and_a_causal_lm(tiny_causal_model, tiny_tokenizer):
    from biaslab.models.load import LoadedModel, ModelLoadError, make_scorer

    with pytest.raises(FormatError, match="prompt_format: chat.*no chat"):
        CausalScorer(tiny_causal_model, tiny_tokenizer, prompt_format="chat")
    model, tokenizer = build_tiny_bert()
    with pytest.raises(ModelLoadError, match="masked LM"):
        make_scorer(LoadedModel(model, tokenizer, "masked", "fp", "bert"), prompt_format="chat")
