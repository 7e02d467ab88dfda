"""The prefix-sharing KV gather on the architectures users bring: Llama-3, Qwen2, Gemma-2, Mistral.

Tiny random models (~200 K parameters, the project's byte-level BPE tokenizer) built from each config
class with the features that touch the cache or the logits: Llama-3's tied embeddings and ``llama3``
RoPE scaling; Qwen2's attention bias and no BOS; Gemma-2's attention and final-logit soft-capping and
its alternating sliding/full layers; Mistral's sliding window. The windows (4 tokens) are shorter than
the shared prefixes, so the sliding layers' cache really drops positions before it is gathered. For
every request kind the causal engine serves, the prefix-shared, batched scores equal the unshared,
one-request-per-row scores and the naive one-forward-per-request oracle to ``TOL`` (float32 models;
the differences seen are ~1e-6, from summation order). ``scoring.prefix_sharing`` (``auto | on | off``)
and the fallback for caches that cannot be gathered (:mod:`biaslab.scoring.kv_gather`) are tested at
the end.
"""

from __future__ import annotations

import logging

import oracles
import pytest
import torch

from biaslab.scoring.causal import CausalScorer
from biaslab.scoring.kv_gather import PrefixSharingError, gather_unsupported, normalise_setting
from biaslab.scoring.requests import Request

TOL = 1e-5
WINDOW = 4
ARCHITECTURES = ["llama3", "qwen2", "gemma2", "mistral"]

REQUESTS = [  # OccuGender-like forms after one prompt, GBEM-UA-like sentence pairs, contexts inside prefixes
    Request(ctx, cont)
    for ctx in ["The doctor said that", "Врач сказал, что"]
    for cont in [" he would come.", " she would come.", " they"]
] + [
    Request("", "Кандидат має досвід. Чи може він отримати посаду? Так."),
    Request("", "Кандидат має досвід. Чи може він отримати посаду? Ні."),
    Request("Кандидат має", " досвід."),
    Request("He is a", " man. She is a woman."),
    Request("Q", " A"),
]
SENTENCES = ["He is a man.", "She is a woman.", "Кандидат має досвід.", "Кандидатка має досвід. Так."]
PAIRS = [(0, 1), (2, 3)]


def build(arch: str, tokenizer, window: int = WINDOW, seed: int = 0):
    """A tiny random model of ``arch``'s config class, and the tokenizer it is scored with."""
    import transformers as tf

    from tiny_models import bos_adding_tokenizer

    common = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                  pad_token_id=tokenizer.pad_token_id)
    if arch == "llama3":
        rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
        config, cls = tf.LlamaConfig(**common, tie_word_embeddings=True, rope_parameters=rope), tf.LlamaForCausalLM
    elif arch == "qwen2":
        config, cls = tf.Qwen2Config(**common), tf.Qwen2ForCausalLM
    elif arch == "gemma2":
        config = tf.Gemma2Config(**common, head_dim=16, query_pre_attn_scalar=16, sliding_window=window,
                                 final_logit_softcapping=3.0, attn_logit_softcapping=5.0)
        cls = tf.Gemma2ForCausalLM
    else:
        config, cls = tf.MistralConfig(**common, sliding_window=window), tf.MistralForCausalLM
    torch.manual_seed(seed)
    model = cls(config).eval()
    # Qwen2 (like GPT-2 and the default model) adds no BOS; Llama, Gemma and Mistral tokenizers do
    return model, (tokenizer if arch == "qwen2" else bos_adding_tokenizer(tokenizer))


@pytest.fixture(scope="module", params=ARCHITECTURES)
def arch_model(request, tiny_tokenizer):
    model, tokenizer = build(request.param, tiny_tokenizer)
    return request.param, model, tokenizer


def test_the_models_have_the_features_under_test(arch_model):
    arch, model, tokenizer = arch_model
    config = model.config
    if arch == "llama3":
        assert model.lm_head.weight is model.model.embed_tokens.weight  # tied embeddings
        assert config.rope_parameters["rope_type"] == "llama3"
    if arch == "qwen2":
        assert model.model.layers[0].self_attn.q_proj.bias is not None
        assert tokenizer("He is").input_ids[0] != tokenizer.bos_token_id  # no BOS
    else:
        assert tokenizer("He is").input_ids[0] == tokenizer.bos_token_id
    if arch == "gemma2":
        assert config.final_logit_softcapping and config.attn_logit_softcapping
        assert set(config.layer_types) == {"sliding_attention", "full_attention"}  # hybrid cache
    if arch in ("gemma2", "mistral"):
        assert config.sliding_window == WINDOW
    n = sum(p.numel() for p in model.parameters())
    assert 100_000 < n < 500_000, n


@pytest.mark.parametrize("arch", ["gemma2", "mistral"])
def test_the_sliding_window_changes_the_scores(arch, tiny_tokenizer):
    """Else the equality tests below could not tell a gather that ignores the window from a right one."""
    narrow, tokenizer = build(arch, tiny_tokenizer)
    wide, _ = build(arch, tiny_tokenizer, window=1000)
    a = [s.logprob for s in CausalScorer(narrow, tokenizer).loglikelihood(REQUESTS)]
    b = [s.logprob for s in CausalScorer(wide, tokenizer).loglikelihood(REQUESTS)]
    assert max(abs(x - y) for x, y in zip(a, b)) > 0.01


def scorers(model, tokenizer):
    """The shared engine under two budgets (several chunks, left padding; one chunk) and the unshared one."""
    shared = [CausalScorer(model, tokenizer, max_batch_tokens=budget) for budget in (48, 4096)]
    unshared = CausalScorer(model, tokenizer, prefix_sharing="off", batch_size=1)
    return shared, unshared


def test_shared_prefixes_are_gathered_past_the_window(arch_model):
    arch, model, tokenizer = arch_model
    (scorer, _), _ = scorers(model, tokenizer)
    assert scorer.share_prefixes  # auto: this cache can be gathered
    groups = scorer._group(scorer.format.encode_requests(REQUESTS))
    shared = [length for length, members in groups if len(members) > 1]
    assert len(shared) >= 3 and max(shared) > WINDOW + 2, groups
    assert (scorer._head is None) == (arch == "gemma2")  # soft-capped logits: the model's own head


def test_loglikelihood_shared_equals_unshared_and_naive(arch_model):
    arch, model, tokenizer = arch_model
    shared, unshared = scorers(model, tokenizer)
    reference = unshared.loglikelihood(REQUESTS)
    for request, ref in zip(REQUESTS, reference):
        naive, greedy = oracles.naive_loglikelihood(model, tokenizer, request.context, request.continuation,
                                                    add_bos=arch != "qwen2")
        assert ref.logprob == pytest.approx(naive, abs=TOL), request
        assert ref.is_greedy == greedy
    for scorer in shared:
        got = scorer.loglikelihood(REQUESTS)
        assert [s.logprob for s in got] == pytest.approx([s.logprob for s in reference], abs=TOL)
        assert [(s.n_tokens, s.is_greedy) for s in got] == [(s.n_tokens, s.is_greedy) for s in reference]
        prefixed = scorer.with_prefix("Не будь упередженим до статі.")
        want = unshared.with_prefix("Не будь упередженим до статі.").loglikelihood(REQUESTS)
        assert [s.logprob for s in prefixed.loglikelihood(REQUESTS)] == pytest.approx([s.logprob for s in want],
                                                                                      abs=TOL)


def test_sentence_pair_token_and_cloze_scores_shared_equal_unshared(arch_model):
    _, model, tokenizer = arch_model
    shared, unshared = scorers(model, tokenizer)
    want_sentences = unshared.sentence_scores(SENTENCES)
    want_tokens = unshared.token_scores(SENTENCES)
    want_pairs = unshared.pair_scores(SENTENCES[:2], SENTENCES[2:])
    contexts, words = ["The doctor said that", "The doctor said that", "He is a"], ["he", "she", "man"]
    want_cloze = unshared.cloze_scores(contexts, words)
    for sentence, score in zip(SENTENCES, want_sentences):
        assert score.logprob == pytest.approx(oracles.naive_loglikelihood(model, tokenizer, "", sentence)[0], abs=TOL)
    for scorer in shared:
        got_sentences = scorer.sentence_scores(SENTENCES)
        assert [s.n_tokens for s in got_sentences] == [s.n_tokens for s in want_sentences]
        assert [s.logprob for s in got_sentences] == pytest.approx([s.logprob for s in want_sentences], abs=TOL)
        got_tokens = scorer.token_scores(SENTENCES)
        assert [[t.text for t in s] for s in got_tokens] == [[t.text for t in s] for s in want_tokens]
        assert [t.logprob for s in got_tokens for t in s] == pytest.approx(
            [t.logprob for s in want_tokens for t in s], abs=TOL)
        got_pairs = scorer.pair_scores(SENTENCES[:2], SENTENCES[2:])
        assert [x.logprob for p in got_pairs for x in (p.first, p.second)] == pytest.approx(
            [x.logprob for p in want_pairs for x in (p.first, p.second)], abs=TOL)
        assert [s.logprob for s in scorer.cloze_scores(contexts, words)] == pytest.approx(
            [s.logprob for s in want_cloze], abs=TOL)


def test_eos_padded_geometric_means_shared_equal_unshared(arch_model):
    _, model, tokenizer = arch_model
    shared, unshared = scorers(model, tokenizer)
    want = unshared.geometric_mean_probabilities(SENTENCES, PAIRS)
    assert any(side.n_pad for pair in want.pairs for side in pair)  # the EOS padding is exercised
    for scorer in shared:
        got = scorer.geometric_mean_probabilities(SENTENCES, PAIRS)
        assert [s.logprob for s in got.sentences] == pytest.approx([s.logprob for s in want.sentences], abs=TOL)
        assert [side.n_pad for pair in got.pairs for side in pair] == [side.n_pad for pair in want.pairs for side in pair]
        assert [side.probability for pair in got.pairs for side in pair] == pytest.approx(
            [side.probability for pair in want.pairs for side in pair], abs=TOL)


def test_batched_generation_equals_one_prompt_at_a_time(arch_model):
    _, model, tokenizer = arch_model
    prompts = ["The doctor said that", "Врач сказал, что он", "He is"]
    batched = CausalScorer(model, tokenizer).generate(prompts, max_new_tokens=4)
    assert batched == [CausalScorer(model, tokenizer).generate([p], max_new_tokens=4)[0] for p in prompts]


# ------------------------------------------------------------------ scoring.prefix_sharing and the fallback
def test_prefix_sharing_off_gives_the_same_scores_without_sharing(tiny_tokenizer):
    model, tokenizer = build("mistral", tiny_tokenizer)
    off = CausalScorer(model, tokenizer, prefix_sharing="off")
    on = CausalScorer(model, tokenizer, prefix_sharing="on")
    assert (off.share_prefixes, on.share_prefixes) == (False, True)
    requests = off.format.encode_requests(REQUESTS)
    assert all(len(members) == 1 for _, members in off._group(requests))
    got_off, got_on = off.loglikelihood(REQUESTS), on.loglikelihood(REQUESTS)
    assert [s.logprob for s in got_off] == pytest.approx([s.logprob for s in got_on], abs=TOL)
    assert on.stats["decoder_tokens"] < off.stats["decoder_tokens"]  # sharing saves work


def test_settings_and_yaml_booleans():
    from biaslab.config.model import ScoringConfig

    assert [normalise_setting(s) for s in ("auto", "on", "off", True, False)] == ["auto", "on", "off", "on", "off"]
    assert ScoringConfig().prefix_sharing == "auto"
    assert ScoringConfig(prefix_sharing=False).prefix_sharing == "off"  # YAML 1.1 reads a bare `off` as false
    with pytest.raises(PrefixSharingError, match="scoring.prefix_sharing"):
        normalise_setting("sometimes")


def test_which_caches_can_be_gathered(tiny_tokenizer):
    from transformers import DynamicCache, StaticCache

    model, tokenizer = build("gemma2", tiny_tokenizer)
    with torch.no_grad():
        dynamic = model(input_ids=torch.tensor([[1, 2, 3, 4, 5, 6]]), use_cache=True).past_key_values
    assert {type(layer).__name__ for layer in dynamic.layers} == {"DynamicLayer", "DynamicSlidingWindowLayer"}
    assert gather_unsupported(dynamic) is None
    assert "StaticCache" in gather_unsupported(StaticCache(config=model.config, max_cache_len=32))
    assert "legacy tuple" in gather_unsupported(((torch.zeros(1), torch.zeros(1)),))
    assert "offloads" in gather_unsupported(DynamicCache(config=model.config, offloading=True))
    assert gather_unsupported(None) is not None


def returning_a_static_cache(model):
    """The model's decoder made to start every cached pass with a StaticCache (as older transformers'
    Gemma-2 did with its HybridCache): fixed-length buffers that the engine must not gather."""
    from transformers import StaticCache

    decoder = model.get_decoder()
    forward = decoder.forward

    def static_forward(*args, **kwargs):
        if kwargs.get("use_cache") and kwargs.get("past_key_values") is None:
            kwargs["past_key_values"] = StaticCache(config=model.config, max_cache_len=64)
        return forward(*args, **kwargs)

    decoder.forward = static_forward
    return model


def test_auto_falls_back_for_a_cache_it_cannot_gather_and_says_why_once(tiny_tokenizer, caplog):
    model, tokenizer = build("gemma2", tiny_tokenizer, seed=3)
    model = returning_a_static_cache(model)
    with caplog.at_level(logging.WARNING, logger="biaslab.scoring.kv_gather"):
        first = CausalScorer(model, tokenizer)
        second = CausalScorer(model, tokenizer)  # e.g. the next Optuna trial: no second line
    assert not first.share_prefixes and not second.share_prefixes
    lines = [r.getMessage() for r in caplog.records if "prefix sharing off" in r.getMessage()]
    assert len(lines) == 1 and "StaticCache" in lines[0], lines
    for request, score in zip(REQUESTS, first.loglikelihood(REQUESTS)):
        naive, _ = oracles.naive_loglikelihood(model, tokenizer, request.context, request.continuation, add_bos=True)
        assert score.logprob == pytest.approx(naive, abs=TOL), request
    with pytest.raises(PrefixSharingError, match="StaticCache.*use auto or off"):
        CausalScorer(model, tokenizer, prefix_sharing="on")


def test_make_scorer_reads_the_setting(tiny_tokenizer):
    from biaslab.config.model import ScoringConfig
    from biaslab.models.load import LoadedModel, make_scorer

    model, tokenizer = build("qwen2", tiny_tokenizer)
    loaded = LoadedModel(model, tokenizer, "causal", "fp", "tiny")
    assert make_scorer(loaded, ScoringConfig()).share_prefixes
    assert not make_scorer(loaded, ScoringConfig(prefix_sharing="off")).share_prefixes
