"""How many tokens the causal engine may put in one chunk: a slice of the free device memory, capped
(:func:`memory_token_budget`), and the KV-cache slots a suffix pass may gather (:func:`kv_slot_budget`);
or, with ``scoring.max_batch_tokens: auto`` on a GPU, both sized from free device memory by
:func:`auto_budget` (:func:`batch_budgets` decides which)."""

from __future__ import annotations

from dataclasses import dataclass

from biaslab.scoring.device import free_memory_bytes, model_devices

CPU_BATCH_TOKENS = 1024  # `auto` on the CPU: small batches stay in CPU cache and ran fastest (bench/, docs/speed.md)
AUTO_MEMORY_FRACTION = 0.5  # of the free device memory after the model is loaded; half tokens, half gathered KV
AUTO_ROW_TOKENS = 256  # row length assumed for the attention-score matrix (bias requests are short sentences)


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


@dataclass(frozen=True)
class AutoBudget:
    """:func:`auto_budget`'s result and the per-unit costs it came from (bytes)."""

    tokens: int  # max_batch_tokens
    kv_slots: int  # gathered (row, position) KV slots of a suffix pass
    token_bytes: int  # activations + attention scores + logits of one token
    slot_bytes: int  # one KV slot: every layer's key and value


def auto_budget(config, dtype_bytes: int, free_bytes: int, fraction: float = AUTO_MEMORY_FRACTION,
                row_tokens: int = AUTO_ROW_TOKENS) -> AutoBudget:
    """``scoring.max_batch_tokens: auto`` on a GPU: tokens per pass and KV slots that fit free device memory.

    ``fraction`` of ``free_bytes`` (measured after the model is loaded) is usable; half goes to the
    token budget, half to the gathered prefix KV. Per token, in the model's dtype (``dtype_bytes``)
    unless said (``H`` hidden, ``Hq`` = heads x head_dim, ``kv`` = kv_heads x head_dim, ``I``
    intermediate, ``L`` layers, ``V`` vocabulary, ``n`` attention heads):

    * activations of the widest layer: residual + normed copy (2H), q/k/v (Hq + 2kv), attention output
      and o_proj (Hq + H), MLP gate, up and their product (3I), plus the pass's own KV cache over all
      layers (2 L kv): ``b (3H + 2Hq + 2kv + 3I + 2L kv)``;
    * attention scores of eager attention (Gemma-2's soft-capping needs it) for a row of ``row_tokens``:
      scores in the dtype, softmax in float32, cast back: ``n x row_tokens x (2b + 4)``;
    * logits over the vocabulary in the dtype and their float32 copy: ``V (b + 4)``.

    A KV slot is ``2 L kv b``. Both budgets are at least 64.
    """
    def get(name: str, default: int) -> int:
        return int(getattr(config, name, None) or default)

    hidden, heads, layers = get("hidden_size", 1), get("num_attention_heads", 1), get("num_hidden_layers", 1)
    head_dim = get("head_dim", hidden // heads)
    kv = get("num_key_value_heads", heads) * head_dim
    q = heads * head_dim
    inter, vocab = get("intermediate_size", 4 * hidden), get("vocab_size", 32000)
    b = int(dtype_bytes)
    activations = b * (3 * hidden + 2 * q + 2 * kv + 3 * inter + 2 * layers * kv)
    attention = heads * row_tokens * (2 * b + 4)
    logits = vocab * (b + 4)
    token_bytes = activations + attention + logits
    slot_bytes = 2 * layers * kv * b
    half = int(free_bytes * fraction) // 2
    return AutoBudget(max(64, half // token_bytes), max(64, half // slot_bytes), token_bytes, slot_bytes)


def batch_budgets(model, setting: int | str, free_bytes: int) -> tuple[int, int]:
    """``(max_batch_tokens, kv_slots)`` for the scorer, from ``scoring.max_batch_tokens`` and free memory.

    An integer is capped by :func:`memory_token_budget` (today's rule). ``auto`` on a model whose
    parameters are all on the CPU is :data:`CPU_BATCH_TOKENS` under the same cap - exactly what the
    default ``1024`` gives, so CPU numbers and bytes do not move; on a GPU it is :func:`auto_budget`
    with the model's parameter dtype.
    """
    if setting == "auto":
        if on_cpu(model):
            setting = CPU_BATCH_TOKENS
        else:
            budget = auto_budget(model.config, next(model.parameters()).element_size(), free_bytes)
            return budget.tokens, budget.kv_slots
    tokens = min(int(setting), memory_token_budget(model, free_bytes=free_bytes))
    return tokens, kv_slot_budget(model, tokens, free_bytes=free_bytes)


def on_cpu(model) -> bool:
    """Whether every parameter of the model is on the CPU (``auto`` keeps the CPU's fixed budget there)."""
    return all(device.type == "cpu" for device in model_devices(model))


def auto_batch_tokens(model, probe=free_memory_bytes) -> int:
    """``max_batch_tokens: auto`` for the masked engine: :data:`CPU_BATCH_TOKENS` on the CPU (as the default
    1024), else :func:`auto_budget`'s token budget from the free memory of the model's device(s)."""
    if on_cpu(model):
        return CPU_BATCH_TOKENS
    return auto_budget(model.config, next(model.parameters()).element_size(), model_free_memory(model, probe)).tokens
