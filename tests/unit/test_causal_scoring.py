"""The causal engine equals a naive one-request-per-forward loop, batched or not."""

from __future__ import annotations

import math

import oracles
import pytest
import torch

from biaslab.scoring.causal import CausalScorer
from biaslab.scoring.requests import Request, with_prefix
from biaslab.scoring.tokenization import encode_request

REQUESTS = [
    Request("The doctor said that", " he would come."),
    Request("The doctor said that", " she would come."),
    Request("The doctor said that ", "they"),  # trailing space moves to the continuation
    Request("", "Кандидат має досвід."),  # empty context -> BOS
    Request("Врач сказал, что", " он"),
    Request("He is a", " man. She is a woman. They are people."),  # multi-token, long
    Request("Q", " A"),
]


def naive_loglikelihood(model, tokenizer, request: Request) -> tuple[float, bool]:
    """One forward pass per request, no padding: the seed authors' loop (tests/oracles.py)."""
    return oracles.naive_loglikelihood(model, tokenizer, request.context, request.continuation)


@pytest.mark.parametrize("batch_size", [1, 3, "auto"])
def test_batched_equals_naive_loop(tiny_causal_model, tiny_tokenizer, batch_size):
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer, batch_size=batch_size)
    scores = scorer.loglikelihood(REQUESTS)
    for request, score in zip(REQUESTS, scores):
        expected, greedy = naive_loglikelihood(tiny_causal_model, tiny_tokenizer, request)
        assert score.logprob == pytest.approx(expected, abs=1e-5)
        assert score.is_greedy == greedy
        assert score.n_tokens == len(encode_request(tiny_tokenizer, request).continuation_ids)


def test_tiny_token_budget_still_scores_everything(tiny_causal_model, tiny_tokenizer):
    big = CausalScorer(tiny_causal_model, tiny_tokenizer, batch_size="auto").loglikelihood(REQUESTS)
    small = CausalScorer(tiny_causal_model, tiny_tokenizer, max_batch_tokens=1).loglikelihood(REQUESTS)
    assert [s.logprob for s in small] == pytest.approx([s.logprob for s in big], abs=1e-5)


def test_probabilities_of_single_token_continuations_sum_to_one(tiny_causal_model, tiny_tokenizer):
    """Sanity: over the whole vocabulary, next-token probabilities sum to 1."""
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer)
    vocab = range(len(tiny_tokenizer))
    from biaslab.scoring.requests import TokenRequest

    ctx = tuple(tiny_tokenizer.encode("He is", add_special_tokens=False))
    scores = scorer.loglikelihood_tokens([TokenRequest(ctx, (t,)) for t in vocab])
    assert math.fsum(math.exp(s.logprob) for s in scores) == pytest.approx(1.0, abs=1e-4)


def test_lm_eval_tokenisation_rules(tiny_tokenizer):
    tr = encode_request(tiny_tokenizer, Request("The doctor said that ", "he"))
    assert tiny_tokenizer.decode(list(tr.continuation_ids)) == " he"
    empty = encode_request(tiny_tokenizer, Request("", "He"))
    assert empty.context_ids == (tiny_tokenizer.bos_token_id,)


def test_prompt_prefix_conditions_every_request(tiny_causal_model, tiny_tokenizer):
    prefix = "Не будь упередженим до статі."
    plain = CausalScorer(tiny_causal_model, tiny_tokenizer)
    prefixed = plain.with_prefix(prefix)
    got = prefixed.loglikelihood(REQUESTS)
    want = plain.loglikelihood([with_prefix(r, prefix) for r in REQUESTS])
    assert [g.logprob for g in got] == [w.logprob for w in want]
    assert got[0].logprob != plain.loglikelihood(REQUESTS[:1])[0].logprob


def test_generation_is_greedy_and_batch_independent(tiny_causal_model, tiny_tokenizer):
    prompts = ["Відповідай так чи ні: він може?", "He is", "Врач"]
    batched = CausalScorer(tiny_causal_model, tiny_tokenizer, batch_size=3).generate(prompts, max_new_tokens=4)
    single = [CausalScorer(tiny_causal_model, tiny_tokenizer, batch_size=1).generate([p], 4)[0] for p in prompts]
    assert batched == single


SHARED = [
    Request(ctx, cont)
    for ctx in ["Q: Imagine a doctor. What is the doctor's gender?\nA:", "He is", "Врач сказал, что",
                "Кандидатка має досвід. Чи може вона отримати посаду? Відповідай так чи ні:"]
    for cont in [" He", " he", " She", " Non-binary", " They are people.", " так", " ні"]
] + REQUESTS  # mixed: shared groups of different context lengths plus singletons


@pytest.mark.parametrize("batch_size,budget", [(1, 16384), (5, 16384), ("auto", 64), ("auto", 16384)])
def test_prefix_sharing_equals_naive_loop(tiny_causal_model, tiny_tokenizer, batch_size, budget):
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer, batch_size=batch_size, max_batch_tokens=budget)
    scores = scorer.loglikelihood(SHARED)
    for request, score in zip(SHARED, scores):
        expected, greedy = naive_loglikelihood(tiny_causal_model, tiny_tokenizer, request)
        assert score.logprob == pytest.approx(expected, abs=1e-5), request
        assert score.is_greedy == greedy


def test_sharing_on_and_off_agree(tiny_causal_model, tiny_tokenizer):
    on = CausalScorer(tiny_causal_model, tiny_tokenizer).loglikelihood(SHARED)
    off = CausalScorer(tiny_causal_model, tiny_tokenizer, prefix_sharing="off").loglikelihood(SHARED)
    assert [s.logprob for s in on] == pytest.approx([s.logprob for s in off], abs=1e-5)
    assert [s.n_tokens for s in on] == [s.n_tokens for s in off]


def test_nan_weights_raise_instead_of_reporting(tiny_tokenizer):
    from biaslab.pretrain.architecture import build_llama
    from biaslab.scoring.requests import NonFiniteScoreError

    broken = build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64)
    with torch.no_grad():
        broken.lm_head.weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteScoreError, match="NaN/inf"):
        CausalScorer(broken, tiny_tokenizer).loglikelihood(REQUESTS)


GBEM_LIKE = [
    Request("", s)
    for s in [
        "Кандидат має досвід. Посаду він отримав.", "Кандидат має досвід. Посаду він не отримав.",
        "Кандидатка має досвід. Посаду вона отримала.", "Кандидатка має досвід. Посаду вона не отримала.",
        "Кандидат має досвід.", "Кандидат має досвід. Посаду він отримав. Так.",  # one is a prefix of others
    ]
] + [Request("Кандидат має", " досвід."), Request("Кандидат має досвід.", " Посаду")]  # contexts inside prefixes


@pytest.mark.parametrize("budget", [8, 64, 16384])
def test_shared_token_prefixes_of_sentences_equal_naive_loop(tiny_causal_model, tiny_tokenizer, budget):
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer, max_batch_tokens=budget)
    groups = scorer._group([encode_request(tiny_tokenizer, r) for r in GBEM_LIKE])
    assert any(len(members) > 1 for _, members in groups), "sentences with a long common prefix should share it"
    for request, score in zip(GBEM_LIKE, scorer.loglikelihood(GBEM_LIKE)):
        expected, greedy = naive_loglikelihood(tiny_causal_model, tiny_tokenizer, request)
        assert score.logprob == pytest.approx(expected, abs=1e-5), request
        assert score.is_greedy == greedy


def test_long_requests_are_left_truncated_to_the_window(tiny_causal_model, tiny_tokenizer):
    """Past ``max_length`` fed tokens the context loses its oldest tokens, exactly as the harness does."""
    window = 6
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer, max_length=window)
    fitting = [r for r in SHARED if len(encode_request(tiny_tokenizer, r).continuation_ids) <= window]
    assert any(len(encode_request(tiny_tokenizer, r).context_ids) > window for r in fitting)
    for request, score in zip(fitting, scorer.loglikelihood(fitting)):
        tr = encode_request(tiny_tokenizer, request)
        whole = (list(tr.context_ids) + list(tr.continuation_ids))[-(window + 1):]
        with torch.no_grad():
            logprobs = torch.log_softmax(tiny_causal_model(torch.tensor([whole[:-1]])).logits[0].float(), -1)
        n = len(tr.continuation_ids)
        expected = sum(float(logprobs[len(whole) - 1 - n + j, t]) for j, t in enumerate(tr.continuation_ids))
        assert score.logprob == pytest.approx(expected, abs=1e-5), request


def test_continuation_longer_than_the_window_is_refused(tiny_causal_model, tiny_tokenizer):
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer, max_length=3)
    with pytest.raises(ValueError, match="request 0: its continuation alone has .* window of 3"):
        scorer.loglikelihood([Request("He is a", " man. She is a woman. They are people.")])


def test_prompts_sharing_only_an_instruction_group_by_prompt(tiny_causal_model, tiny_tokenizer):
    """OccuGender shape: a long debiasing instruction, then a job, then ~many forms. Each prompt's forms
    share the whole prompt; merging two prompts on the instruction alone would re-run each prompt's
    tail once per form, so the grouping keeps one group per prompt."""
    instruction = "Please answer without any gender stereotypes about jobs or people at all. "
    prompts = [instruction + f"Q: Imagine a {job}. What is the {job}'s gender? A:" for job in ("nurse", "pilot")]
    forms = [" he", " she", " He", " She", " man", " woman", " male", " female"]
    requests = [Request(p, f) for p in prompts for f in forms]
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer)
    groups = scorer._group([encode_request(tiny_tokenizer, r) for r in requests])
    assert sorted(len(members) for _, members in groups) == [len(forms), len(forms)]
    for request, score in zip(requests, scorer.loglikelihood(requests)):
        assert score.logprob == pytest.approx(naive_loglikelihood(tiny_causal_model, tiny_tokenizer, request)[0],
                                              abs=1e-5)


def test_batched_tokenisation_equals_one_request_at_a_time(tiny_tokenizer):
    from biaslab.scoring.tokenization import encode_requests

    requests = SHARED + GBEM_LIKE
    assert encode_requests(tiny_tokenizer, requests) == [encode_request(tiny_tokenizer, r) for r in requests]


def test_a_shared_prompt_runs_once_and_its_next_token_distribution_is_projected_once(tiny_causal_model, tiny_tokenizer):
    """OccuGender shape with single-token forms: one decoder pass over the prompt, one LM-head row."""
    from biaslab.scoring.requests import TokenRequest

    prompt = tuple(tiny_tokenizer.encode("Q: Imagine a nurse. What is the nurse's gender? A:", add_special_tokens=False))
    forms = [5, 6, 7, 8]
    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer)
    scores = scorer.loglikelihood_tokens([TokenRequest(prompt, (f,)) for f in forms])
    assert scorer.stats == {"passes": 1, "decoder_tokens": len(prompt), "head_rows": 1}
    with torch.no_grad():
        logprobs = torch.log_softmax(tiny_causal_model(torch.tensor([prompt])).logits[0, -1].float(), -1)
    assert [s.logprob for s in scores] == pytest.approx([float(logprobs[f]) for f in forms], abs=1e-5)


def _split_and_fallback_scores(model, tokenizer, requests):
    split = CausalScorer(model, tokenizer)
    assert split._head is not None, "this model's logits are head(decoder(x)): the split path must be used"
    fallback = CausalScorer(model, tokenizer)
    fallback._decoder = fallback._head = None  # the model's own forward with logits_to_keep
    return [s.logprob for s in split.loglikelihood(requests)], [s.logprob for s in fallback.loglikelihood(requests)]


def test_split_lm_head_equals_the_models_own_logits_with_lora_and_embedding_hooks(tiny_tokenizer):
    """The engine projects hidden states itself; that must hold for every variant kind it scores:
    a plain model, a PEFT LoRA wrapper (non-zero adapters), and a forward hook on the input embeddings
    (the runtime embedding-debias variant)."""
    from peft import LoraConfig, get_peft_model

    from biaslab.pretrain.architecture import build_llama

    requests = SHARED + GBEM_LIKE
    plain = build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64,
                        num_hidden_layers=2, num_attention_heads=4, seed=1)
    got, want = _split_and_fallback_scores(plain, tiny_tokenizer, requests)
    assert got == pytest.approx(want, abs=1e-5)

    lora = get_peft_model(plain, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    got_lora, want_lora = _split_and_fallback_scores(lora, tiny_tokenizer, requests)
    assert got_lora == pytest.approx(want_lora, abs=1e-5)
    assert got_lora != pytest.approx(got, abs=1e-3)  # the adapters really change the scores

    hooked = build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, seed=1)
    hooked.get_input_embeddings().register_forward_hook(lambda _m, _i, out: out * 0.5)
    got_hook, want_hook = _split_and_fallback_scores(hooked, tiny_tokenizer, requests)
    assert got_hook == pytest.approx(want_hook, abs=1e-5)
    assert got_hook != pytest.approx(got, abs=1e-3)


def test_models_whose_logits_are_not_a_plain_head_projection_use_their_own_logits(tiny_tokenizer):
    from biaslab.pretrain.architecture import build_llama

    model = build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64,
                        num_hidden_layers=2, num_attention_heads=4, seed=2)
    forward = model.forward

    def soft_capped(*args, **kwargs):  # like Gemma-2's final_logit_softcapping
        out = forward(*args, **kwargs)
        out.logits = 3.0 * torch.tanh(out.logits / 3.0)
        return out

    model.forward = soft_capped
    scorer = CausalScorer(model, tiny_tokenizer)
    assert scorer._head is None
    request = Request("The doctor said that", " he would come.")
    tr = encode_request(tiny_tokenizer, request)
    whole = list(tr.context_ids) + list(tr.continuation_ids)
    with torch.no_grad():
        logprobs = torch.log_softmax(model(input_ids=torch.tensor([whole[:-1]])).logits[0].float(), -1)
    expected = sum(float(logprobs[len(tr.context_ids) - 1 + j, t]) for j, t in enumerate(tr.continuation_ids))
    assert scorer.loglikelihood([request])[0].logprob == pytest.approx(expected, abs=1e-5)
