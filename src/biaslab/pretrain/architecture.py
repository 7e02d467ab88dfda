"""Build a randomly initialised Llama-architecture causal LM of a given size.

Llama because it is the architecture most hub models share (q/k/v/o projections, RMSNorm, RoPE), so
LoRA target modules, embedding edits and scoring behave exactly as on a hub model.
"""

from __future__ import annotations


def build_llama(
    vocab_size: int,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_hidden_layers: int = 2,
    num_attention_heads: int = 4,
    num_key_value_heads: int | None = None,
    max_position_embeddings: int = 512,
    tie_word_embeddings: bool = False,
    seed: int = 0,
    bos_token_id: int = 0,
    eos_token_id: int = 1,
    pad_token_id: int = 2,
):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads or num_attention_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.eval()
    return model
