"""Evaluate loads a model straight onto the scoring device in its dtype (``load_model(..., device=...)``).

No GPU here: the CPU checks that a bfloat16 checkpoint asked for in bfloat16 is never materialised in
float32 on the way (every tensor an operator produces during loading is watched), on the plain path and
on the ``device_map`` path a GPU takes; and that a non-CPU ``device`` reaches ``from_pretrained`` as
``device_map=device``.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from biaslab.models.load import load_model


class Float32Watch(TorchDispatchMode):
    """Records the largest float32 tensor any operator returns while active."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
                self.largest = max(self.largest, t.numel())
        return out


@pytest.fixture(scope="module")
def bf16_checkpoint(tmp_path_factory, tiny_tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path_factory.mktemp("bf16_llama")
    config = LlamaConfig(vocab_size=len(tiny_tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(path)  # safetensors, config.json says bfloat16
    tiny_tokenizer.save_pretrained(path)
    smallest_weight = min(p.numel() for p in model.parameters() if p.dim() == 2)
    return path, model.state_dict(), smallest_weight


@pytest.mark.parametrize("placement", [{"device": "cpu"}, {"device_map": "cpu"}])
def test_bfloat16_is_loaded_in_bfloat16_without_a_float32_copy(bf16_checkpoint, placement):
    path, weights, smallest_weight = bf16_checkpoint
    with Float32Watch() as watch:
        loaded = load_model(path, dtype="bfloat16", **placement)
    assert {p.dtype for p in loaded.model.parameters()} == {torch.bfloat16}
    assert {p.device.type for p in loaded.model.parameters()} == {"cpu"}
    state = loaded.model.state_dict()
    assert all(torch.equal(state[name], value) for name, value in weights.items())  # the checkpoint's bits
    assert watch.largest < smallest_weight, "a weight matrix was materialised in float32 while loading"


def test_the_watch_sees_an_upcast(bf16_checkpoint):
    """The positive control: asking for float32 does build float32 weights, and the watch notices."""
    path, _, smallest_weight = bf16_checkpoint
    with Float32Watch() as watch:
        loaded = load_model(path, dtype="float32", device="cpu")
    assert next(loaded.model.parameters()).dtype == torch.float32
    assert watch.largest >= smallest_weight


def test_a_gpu_device_becomes_a_device_map(bf16_checkpoint, monkeypatch):
    """``device="cuda:0"`` is passed as ``device_map="cuda:0"``: the weights are created on the GPU.

    (The recorded call is then run on the CPU, as no GPU is at hand, so the whole load still happens.)"""
    from transformers import AutoModelForCausalLM

    path, _, _ = bf16_checkpoint
    real = AutoModelForCausalLM.from_pretrained.__func__
    seen = []

    def recording(cls, *args, **kwargs):
        seen.append(kwargs.get("device_map"))
        kwargs["device_map"] = {"": "cpu"}
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", classmethod(recording))
    loaded = load_model(path, dtype="bfloat16", device="cuda:0")
    assert seen == ["cuda:0"]
    assert next(loaded.model.parameters()).dtype == torch.bfloat16
    load_model(path, dtype="bfloat16", device="cuda:0", device_map="auto")  # an explicit map wins
    load_model(path, dtype="bfloat16", device="cpu")  # the CPU keeps the plain load
    assert seen[1:] == ["auto", None]
