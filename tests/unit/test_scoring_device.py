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
    from biaslab.models import LoadedModel, make_scorer

    cfg = ScoringConfig(cache_dir=str(tmp_path))
    full = make_scorer(LoadedModel(tiny_causal_model, tiny_tokenizer, "causal", "m", "fp"), cfg)
    half_model = copy.deepcopy(tiny_causal_model).to(torch.bfloat16)
    half = make_scorer(LoadedModel(half_model, tiny_tokenizer, "causal", "m", "fp"), cfg)
    assert full.cache.fingerprint != half.cache.fingerprint
    full_scores = full.loglikelihood(REQUESTS)
    assert half.loglikelihood(REQUESTS) != full_scores  # not read back from the float32 entries
