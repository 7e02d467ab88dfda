"""scoring.device / scoring.dtype: resolved sensibly, honoured, and part of a cached score's identity."""

from __future__ import annotations

import copy

import pytest
import torch

from biaslab.config import ScoringConfig
from biaslab.scoring.causal import CausalScorer
from biaslab.scoring.device import DeviceError, resolve_placement
from biaslab.scoring.requests import Request

REQUESTS = [Request("The doctor said that", " he would come."), Request("", "Кандидат має досвід.")]


def test_auto_is_float32_on_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_placement("auto", "auto") == ("cpu", "float32")
    assert resolve_placement("cpu", "bfloat16") == ("cpu", "bfloat16")  # an explicit choice is kept


def test_auto_is_bfloat16_on_a_gpu_that_supports_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert resolve_placement("auto", "auto") == ("cuda", "bfloat16")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert resolve_placement("auto", "auto") == ("cuda", "float32")


def test_asking_for_a_missing_gpu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DeviceError, match="scoring.device: cuda"):
        resolve_placement("cuda", "auto")


def test_a_bfloat16_model_scores_close_to_float32(tiny_causal_model, tiny_tokenizer):
    half = copy.deepcopy(tiny_causal_model).to(torch.bfloat16)
    exact = CausalScorer(tiny_causal_model, tiny_tokenizer).loglikelihood(REQUESTS)
    approx = CausalScorer(half, tiny_tokenizer).loglikelihood(REQUESTS)
    assert [s.logprob for s in approx] == pytest.approx([s.logprob for s in exact], rel=0.05)
    assert [s.logprob for s in approx] != [s.logprob for s in exact]  # it really ran in bfloat16


def test_the_dtype_is_part_of_the_cache_identity(tmp_path, tiny_causal_model, tiny_tokenizer):
    from biaslab.models.load import LoadedModel, make_scorer

    cfg = ScoringConfig(cache_dir=str(tmp_path))
    full = make_scorer(LoadedModel(tiny_causal_model, tiny_tokenizer, "causal", "m", "fp"), cfg)
    half_model = copy.deepcopy(tiny_causal_model).to(torch.bfloat16)
    half = make_scorer(LoadedModel(half_model, tiny_tokenizer, "causal", "m", "fp"), cfg)
    assert full.cache.fingerprint != half.cache.fingerprint
    full_scores = full.loglikelihood(REQUESTS)
    assert half.loglikelihood(REQUESTS) != full_scores  # not read back from the float32 entries


# ---------------------------------------------------------------------------------------------- memory budget
def test_on_cuda_the_budget_comes_from_the_gpus_free_memory_not_cpu_ram(monkeypatch):
    """free_memory_bytes asks torch.cuda.mem_get_info for a CUDA device and never looks at CPU RAM."""
    import psutil

    from biaslab.scoring.device import free_memory_bytes

    asked = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: asked.append(device) or (3 << 30, 80 << 30))
    monkeypatch.setattr(psutil, "virtual_memory", lambda: pytest.fail("CPU RAM read for a CUDA device"))
    assert free_memory_bytes(torch.device("cuda", 1)) == 3 << 30
    assert asked == [torch.device("cuda", 1)]


def test_the_token_budget_follows_the_injected_memory_probe(tiny_causal_model, tiny_tokenizer):
    vocab = tiny_causal_model.config.vocab_size
    seen = []

    def probe(device):
        seen.append(device)
        return 20 * 200 * 4 * vocab  # 5% of it holds float32 logits for 200 tokens

    scorer = CausalScorer(tiny_causal_model, tiny_tokenizer, max_batch_tokens=100_000, memory_probe=probe)
    assert seen == [torch.device("cpu")]  # the model's own device
    assert scorer.max_batch_tokens == 200
    roomy = CausalScorer(tiny_causal_model, tiny_tokenizer, max_batch_tokens=512, memory_probe=lambda d: 1 << 40)
    assert roomy.max_batch_tokens == 512  # the configured budget when memory allows it
    tight = CausalScorer(tiny_causal_model, tiny_tokenizer, memory_probe=lambda d: 0)
    assert tight.max_batch_tokens == 64  # the floor
    want = CausalScorer(tiny_causal_model, tiny_tokenizer).loglikelihood(REQUESTS)
    assert [s.logprob for s in tight.loglikelihood(REQUESTS)] == pytest.approx([s.logprob for s in want], abs=1e-5)


# ---------------------------------------------------------------------------------------------- device map
@pytest.fixture(scope="module")
def saved_tiny_model(tmp_path_factory, tiny_causal_model, tiny_tokenizer):
    path = tmp_path_factory.mktemp("tiny_llama")
    tiny_causal_model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.mark.parametrize("device_map", ["cpu", {"model.embed_tokens": "cpu", "model.layers": "cpu",
                                                "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}])
def test_a_model_loaded_with_a_device_map_scores_like_the_plain_one(saved_tiny_model, device_map):
    from biaslab.models.load import load_model, make_scorer

    plain = make_scorer(load_model(saved_tiny_model))
    mapped = load_model(saved_tiny_model, device_map=device_map)
    assert {p.device.type for p in mapped.model.parameters()} == {"cpu"}
    got = make_scorer(mapped).loglikelihood(REQUESTS)
    assert [s.logprob for s in got] == pytest.approx([s.logprob for s in plain.loglikelihood(REQUESTS)], abs=1e-5)


def test_layers_offloaded_by_accelerate_hooks_score_like_the_plain_model(saved_tiny_model, tmp_path):
    """A dispatched model (accelerate hooks move weights and activations per layer, here offloading two layers
    to disk): the scorer feeds inputs to the embeddings' device and reads hidden states and logits wherever
    they come out."""
    from accelerate import dispatch_model

    from biaslab.models.load import load_model, make_scorer

    plain = make_scorer(load_model(saved_tiny_model)).loglikelihood(REQUESTS)
    loaded = load_model(saved_tiny_model)
    device_map = {"model.embed_tokens": "cpu", "model.layers.0": "disk", "model.layers.1": "disk",
                  "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}
    loaded.model = dispatch_model(loaded.model, device_map=device_map, offload_dir=str(tmp_path))
    got = make_scorer(loaded).loglikelihood(REQUESTS)
    assert [s.logprob for s in got] == pytest.approx([s.logprob for s in plain], abs=1e-5)
