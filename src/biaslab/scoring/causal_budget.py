"""How many tokens the causal engine may put in one chunk: a slice of the free device memory, capped
(:func:`memory_token_budget`), and the KV-cache slots a suffix pass may gather (:func:`kv_slot_budget`)."""

from __future__ import annotations

from biaslab.scoring.device import free_memory_bytes, model_devices


def _memory_slice(free_bytes: int, fraction: float, ceiling_bytes: int) -> int:
    """Bytes the engine may use for one pass's big tensors: min(``fraction`` of free memory, ceiling)."""
    return min(int(free_bytes * fraction), ceiling_bytes)


def model_free_memory(model, probe=free_memory_bytes) -> int:
    """Free memory where the model computes: the least free of the devices it spans.

    ``probe(device) -> bytes`` is :func:`~biaslab.scoring.device.free_memory_bytes` (CUDA: the device's
    free memory, ``torch.cuda.mem_get_info``; CPU: available RAM); tests inject their own.
    """
    return min(int(probe(device)) for device in model_devices(model))


def memory_token_budget(model, fraction: float = 0.05, ceiling_bytes: int = 1 << 30,
                        free_bytes: int | None = None) -> int:
    """Largest batch (in tokens) whose float32 logits ``[tokens, V]`` fit a slice of free memory.

    The logits tensor dominates memory for real vocabularies (16k tokens x 50k vocab x 4 B = 3.3 GB),
    and smaller batches also stay in cache, so the budget is min(5% of free memory, 1 GiB) / (4 V),
    the free memory being the scoring device's (:func:`model_free_memory`).
    """
    free = model_free_memory(model) if free_bytes is None else free_bytes
    vocab = int(getattr(model.config, "vocab_size", 32000) or 32000)
    return max(64, _memory_slice(free, fraction, ceiling_bytes) // (4 * vocab))


def kv_slot_budget(model, token_budget: int, fraction: float = 0.05, ceiling_bytes: int = 1 << 30,
                   free_bytes: int | None = None) -> int:
    """How many (row, position) key/value slots the prefix-shared pass may gather at once.

    One slot holds ``layers x 2 x kv_heads x head_dim`` float32 values (4 KB for the default model,
    72 KB for GPT-2-small); the gathered cache gets the same memory slice as the logits
    (min(5% of free device memory, 1 GiB)), and never less than the token budget itself.
    """
    free = model_free_memory(model) if free_bytes is None else free_bytes
    cfg = model.config
    heads = int(getattr(cfg, "num_attention_heads", 1) or 1)
    head_dim = int(getattr(cfg, "head_dim", 0) or cfg.hidden_size // heads)
    kv_heads = int(getattr(cfg, "num_key_value_heads", heads) or heads)
    slot_bytes = 4 * 2 * int(getattr(cfg, "num_hidden_layers", 1)) * kv_heads * head_dim
    return max(token_budget, _memory_slice(free, fraction, ceiling_bytes) // max(1, slot_bytes))
