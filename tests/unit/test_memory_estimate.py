"""The LoRA / evaluate memory estimate against numbers worked out by hand on a tiny Llama config.

Tiny config: vocabulary 100, hidden 8, intermediate 16, 2 layers, 2 heads of 4, 1 key/value head, untied.
By hand: embeddings 800; per layer q 64 + k 32 + v 32 + o 64 + gate/up/down 3 x 128 = 576 linear weights and
2 x 8 norm weights; final norm 8; LM head 800. Parameters 800 + 2 x 592 + 8 + 800 = 2792, of which 1152 in
the layers' linears and 1640 elsewhere (what PEFT casts to float32 on a k-bit base). LoRA r = 2 on q/k/v:
2 x (8 + 8) + 2 x (8 + 4) + 2 x (8 + 4) = 80 per layer, 160 in all. KV per token 2 x 2 layers x 1 x 4 = 16.
"""

from __future__ import annotations

import pytest

from biaslab.config import LoraConfig
from biaslab.mitigation.lora.memory_estimate import (
    CUDA_CONTEXT,
    INT8_BYTES,
    LoraRun,
    ModelShape,
    evaluate_memory,
    lora_memory,
    run_for,
    shape_of,
)
from biaslab.mitigation.lora.training_plan import Capabilities, plan_training

TINY = ModelShape(parameters=2792, linear_in_layers=1152, lora=160, kv_per_token=16, hidden=8, intermediate=16,
                  vocab=100, layers=2)
RUN = LoraRun(bits=8, mixed_precision=True, checkpointing=True, optimizer_state_bytes=2, batch=2, seq_len=10,
              completion_tokens=2, pairing=True, pairing_sequences=8, anchor_sequences=16, pair_seq_len=6)


def test_the_shape_of_a_tiny_llama_is_counted_as_by_hand():
    from transformers import LlamaConfig

    config = LlamaConfig(vocab_size=100, hidden_size=8, intermediate_size=16, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False)
    assert shape_of(config, r=2) == TINY


def test_lora_with_logit_pairing_on_an_8bit_base_part_by_part():
    parts = lora_memory(TINY, RUN).parts
    assert parts == {
        "cuda_context": CUDA_CONTEXT,
        "weights": pytest.approx(1152 * INT8_BYTES + 1640 * 2),  # 4433.125: int8 linears, bf16 the rest
        "kbit_fp32_casts": 1640 * 2,  # prepare_model_for_kbit_training: the rest bf16 -> float32
        "adapter": 160 * (4 + 4 + 2),  # fp32 weight + gradient, two 8-bit moments
        "activations": 2 * 20 * 8 * 2 + 20 * (10 * 8 + 3 * 16) * 2,  # 640 layer inputs + 5120 one layer = 5760
        "sft_head": 2 * 2 * 100 * 8,  # 3200: the completion tokens' fp32 log-probabilities and gradient
        # 16 sequences x 6 tokens x 100 x 2 bytes of logits = 19200, + the completion positions' float32 copy and
        # log-softmax 16 x 2 x 100 x 8 = 25600, + one layer's activations 96 x (32 + 48) x 2 = 15360
        "anchor_pass": 19200 + 25600 + 15360,
        # 8 x 6 = 48 tokens: logits 9600 + checkpointed activations 2 x 48 x 8 x 2 + 48 x 128 x 2 = 13824
        "pairing_pass": 9600 + 13824,
    }
    assert lora_memory(TINY, RUN).total == pytest.approx(CUDA_CONTEXT + 4433.125 + 3280 + 1600 + 5760 + 3200 + 60160)
    assert lora_memory(TINY, RUN).largest() == "cuda_context"


def test_softcapping_keeps_a_second_logits_copy_and_plain_sft_has_no_pairing_parts():
    capped = lora_memory(ModelShape(**{**TINY.__dict__, "softcap": True}), RUN).parts
    assert capped["anchor_pass"] == 2 * 19200 + 25600 + 15360 and capped["pairing_pass"] == 2 * 9600 + 13824
    sft = lora_memory(TINY, LoraRun(bits=8, batch=2, seq_len=10))
    assert "anchor_pass" not in sft.parts and sft.total == pytest.approx(CUDA_CONTEXT + 4433.125 + 3280 + 1600
                                                                         + 5760 + 3200)


def test_an_unquantised_base_has_no_fp32_casts_and_float32_doubles_weights_and_activations():
    bf16 = lora_memory(TINY, LoraRun(bits=16, batch=2, seq_len=10)).parts
    assert bf16["weights"] == 2792 * 2 and bf16["kbit_fp32_casts"] == 0
    fp32 = lora_memory(TINY, LoraRun(bits=16, mixed_precision=False, checkpointing=False, optimizer_state_bytes=8,
                                     batch=2, seq_len=10)).parts
    assert fp32["weights"] == 2792 * 4 and fp32["adapter"] == 160 * 16
    assert fp32["activations"] == 2 * 20 * (10 * 8 + 3 * 16) * 4  # no checkpointing: every layer's internals
    four = lora_memory(TINY, LoraRun(bits=4, batch=2, seq_len=10)).parts
    assert four["weights"] == pytest.approx(1152 * (4 + 8 / 64 + 32 / (64 * 256)) / 8 + 1640 * 2)


def test_evaluate_counts_weights_and_one_scoring_batch():
    parts = evaluate_memory(TINY, dtype_bytes=2, tokens=4).parts
    assert parts == {"cuda_context": CUDA_CONTEXT, "weights": 2792 * 2, "batch": 4 * (16 * 2 + 48 * 2 + 100 * 4)}


def test_the_run_of_a_params_lora_section_under_a_resolved_plan():
    gpu = Capabilities(cuda=True, bf16=True, bitsandbytes="0.50.2")
    clp = LoraConfig(objective="logit_pairing", pairing_pairs=2, quantization="8bit")
    assert run_for(clp, plan_training(clp, gpu), pair_seq_len=40) == LoraRun(
        bits=8, mixed_precision=True, checkpointing=True, optimizer_state_bytes=2, batch=2, seq_len=256,
        pairing=True, pairing_sequences=4 * 2 * 3, pair_seq_len=40)
    cpu = LoraConfig(sources=("gbem_ua",))
    run = run_for(cpu, plan_training(cpu, Capabilities(cuda=False, bf16=False, bitsandbytes=None)))
    assert (run.bits, run.mixed_precision, run.checkpointing, run.optimizer_state_bytes, run.pairing,
            run.pairing_sequences) == (16, False, False, 8, False, 4 * 4 * 1)


def test_the_preflight_call_estimates_a_config_under_a_params_section_and_its_plan():
    from transformers import LlamaConfig

    from biaslab.mitigation.lora.memory_estimate import estimate_lora

    config = LlamaConfig(vocab_size=100, hidden_size=8, intermediate_size=16, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False)
    cfg = LoraConfig(r=2, objective="logit_pairing", pairing_pairs=1, sources=("gbem_ua",), quantization="8bit",
                     per_device_batch_size=2, max_length=10)
    plan = plan_training(cfg, Capabilities(cuda=True, bf16=True, bitsandbytes="0.50.2"))
    got = estimate_lora(config, cfg, plan, pair_seq_len=6)
    want = lora_memory(TINY, LoraRun(bits=8, batch=2, seq_len=10, pairing=True, pairing_sequences=4, pair_seq_len=6))
    assert got.parts == want.parts and got.parts["kbit_fp32_casts"] == 1640 * 2
