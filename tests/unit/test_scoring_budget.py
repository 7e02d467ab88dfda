"""``scoring.max_batch_tokens: auto``: the memory formula on hand-computed numbers, and the CPU default kept."""

from __future__ import annotations

import pytest
import torch

from biaslab.scoring.causal import CausalScorer
from biaslab.scoring.causal_budget import AUTO_MEMORY_FRACTION, CPU_BATCH_TOKENS, auto_budget, batch_budgets


def tiny_config():
    from transformers import LlamaConfig

    # H = 64, 4 heads of 16 (Hq = 64), 2 KV heads (kv = 32), I = 128, L = 4, V = 400
    return LlamaConfig(vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16)


def test_auto_budget_on_hand_computed_numbers():
    # bf16 (b = 2), rows of 256 tokens:
    # activations  2 x (3*64 + 2*64 + 2*32 + 3*128 + 2*4*32) = 2 x 1024 = 2048
    # attention    4 heads x 256 x (2*2 + 4)                           = 8192
    # logits       400 x (2 + 4)                                       = 2400   -> 12640 bytes per token
    # KV slot      2 x 4 layers x 32 x 2                               =  512 bytes
    # usable: 10 MiB x 0.5 = 5 MiB, half each: 2621440 bytes -> 2621440 // 12640 = 207 tokens, // 512 = 5120 slots
    budget = auto_budget(tiny_config(), dtype_bytes=2, free_bytes=10 * 2**20, fraction=0.5, row_tokens=256)
    assert (budget.token_bytes, budget.slot_bytes) == (12640, 512)
    assert (budget.tokens, budget.kv_slots) == (207, 5120)
    # float32 doubles the dtype terms: 4 x 1024 + 4 x 256 x 12 + 400 x 8 = 19584 bytes per token
    fp32 = auto_budget(tiny_config(), dtype_bytes=4, free_bytes=10 * 2**20, fraction=0.5, row_tokens=256)
    assert (fp32.token_bytes, fp32.tokens, fp32.slot_bytes) == (19584, 2621440 // 19584, 1024)
    assert auto_budget(tiny_config(), 2, free_bytes=0).tokens == 64  # the floor


def test_auto_budget_for_llama_3_1_8b_on_an_h100():
    """The documented example (docs/speed.md): Llama-3.1-8B in bf16 with 63 GiB free after loading."""
    from transformers import LlamaConfig

    config = LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8)
    budget = auto_budget(config, dtype_bytes=2, free_bytes=63 * 2**30)
    # 2 x (12288 + 8192 + 2048 + 43008 + 65536) + 32 x 256 x 8 + 128256 x 6 = 262144 + 65536 + 769536
    assert budget.token_bytes == 1_097_216
    assert budget.slot_bytes == 2 * 32 * 1024 * 2
    assert budget.tokens == int(63 * 2**30 * AUTO_MEMORY_FRACTION) // 2 // 1_097_216 == 15_413
    assert budget.kv_slots == 129_024


def test_auto_on_a_gpu_model_uses_its_dtype_and_the_free_memory():
    """A model whose parameters are not on the CPU (here: the meta device, as no GPU is at hand) gets
    :func:`auto_budget` with its parameter dtype."""
    from transformers import LlamaForCausalLM

    with torch.device("meta"):
        model = LlamaForCausalLM(tiny_config()).to(torch.bfloat16)
    assert batch_budgets(model, "auto", 10 * 2**20) == (207, 5120)
    assert batch_budgets(model, 512, 1 << 40)[0] == 512  # an explicit number is still the number


@pytest.mark.parametrize("free", [0, 20 * 200 * 4 * 400, 1 << 40])
def test_auto_on_the_cpu_is_exactly_the_1024_default(tiny_causal_model, free):
    assert CPU_BATCH_TOKENS == 1024
    assert batch_budgets(tiny_causal_model, "auto", free) == batch_budgets(tiny_causal_model, 1024, free)


def test_scorers_accept_auto(tiny_causal_model, tiny_tokenizer):
    from tiny_models import build_tiny_bert

    from biaslab.scoring.masked import MaskedScorer

    def probe(device):  # available RAM moves between two calls; the two scorers must see the same
        return 1 << 33

    auto = CausalScorer(tiny_causal_model, tiny_tokenizer, max_batch_tokens="auto", memory_probe=probe)
    default = CausalScorer(tiny_causal_model, tiny_tokenizer, memory_probe=probe)
    assert (auto.max_batch_tokens, auto._kv_budget) == (default.max_batch_tokens, default._kv_budget)
    bert, bert_tokenizer = build_tiny_bert()
    assert MaskedScorer(bert, bert_tokenizer, max_batch_tokens="auto").max_batch_tokens == 1024


def test_params_accept_auto_and_reject_nonsense():
    from biaslab.config.model import ScoringConfig

    assert ScoringConfig(max_batch_tokens="auto").max_batch_tokens == "auto"
    assert ScoringConfig().max_batch_tokens == 1024
    for bad in (0, "lots"):
        with pytest.raises(ValueError):
            ScoringConfig(max_batch_tokens=bad)
