"""How much GPU memory evaluation and LoRA training need, estimated from a model's shape (nothing is loaded).

An estimate, not a measurement: it counts the tensors that dominate, in bytes, part by part, so a preflight
check can compare the total with the free memory and name the largest part when it does not fit
(``bench/preset_memory.py`` prints docs/presets.md's table from it). Allocator fragmentation is not modelled.

LoRA training (:func:`lora_memory`), one optimizer step of the plan (:class:`LoraRun`):

* ``weights``: the base at its load dtype (bf16 / fp16 on a GPU, float32 on the CPU), its decoder layers'
  linear weights at 8 bits (LLM.int8: one int8 per weight + an fp32 scale per row of ~4k) or 4.127 bits (NF4
  with double quantisation) on a k-bit base;
* ``kbit_fp32_casts``: on a k-bit base PEFT's ``prepare_model_for_kbit_training`` casts *every* parameter
  that bitsandbytes did not quantise (embeddings, LM head, norms, biases) from bf16 / fp16 to float32: two
  more bytes each (``peft/utils/other.py``: "cast all non INT8 parameters to fp32");
* ``adapter``: the LoRA weights in float32 (PEFT's ``autocast_adapter_dtype``), their gradients, and the
  optimizer's moments (2 bytes with a bitsandbytes 8-bit optimizer, 8 with AdamW);
* ``activations``: with gradient checkpointing each layer's input of every token plus one layer recomputed
  (10 hidden + 3 intermediate values per token), without it every layer's;
* ``sft_head``: TRL's fused LM head scores only the completion tokens (labels not -100), in vocabulary
  tiles: their float32 log-probabilities and gradient;
* with logit pairing (``lora.objective: logit_pairing``) the larger of two passes, on top of the above:
  ``anchor_pass`` - the base's anchors, no gradient, ``anchor_sequences`` (4 per pair, 64 pairs per batch:
  :func:`~biaslab.mitigation.lora.logit_pairing.anchor_means`) x ``pair_seq_len`` x the *whole vocabulary*
  of logits (a second copy where the model soft-caps its logits, Gemma-2), plus the float32 copy and
  log-softmax at the completion positions and one layer's activations; ``pairing_pass`` - the pairing term
  with gradient: the same over ``pairing_sequences`` (4 x ``pairing_pairs`` x pair sources) plus their
  checkpointed activations.

Logits are in the compute dtype: under mixed precision the LM head runs in autocast (2 bytes), in float32
on the CPU (4 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GIB = 1024**3
CUDA_CONTEXT = int(0.5 * GIB)
NF4_BITS = 4 + 8 / 64 + 32 / (64 * 256)  # 4-bit codes + 8-bit block scale per 64 + fp32 scale per 256 blocks
INT8_BYTES = 1 + 4 / 4096  # LLM.int8: one byte per weight + an fp32 scale per row (rows of ~4k)
ANCHOR_SEQUENCES = 4 * 64  # anchor_means: 64 pairs per batch, 4 sequences each
EIGHT_BIT_OPTIMIZER_STATE = 2  # two 8-bit moments per parameter (paged_adamw_8bit, adamw_8bit ...)
ADAMW_STATE = 8  # two float32 moments


@dataclass(frozen=True)
class ModelShape:
    """The sizes the estimate needs (from :func:`shape_of`, or written by hand in tests)."""

    parameters: int
    linear_in_layers: int  # parameters of the decoder layers' nn.Linear weights (what bitsandbytes quantises)
    lora: int  # adapter parameters at the rank and target modules asked for
    kv_per_token: int  # key + value elements per token, all layers
    hidden: int
    intermediate: int
    vocab: int
    layers: int
    softcap: bool = False  # final logit soft-capping (Gemma-2): one more logits-sized tensor


def shape_of(config: Any, r: int = 16, target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj"),
             masked: bool = False) -> ModelShape:
    """``config``'s model built on PyTorch's ``meta`` device (no weights), counted."""
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    auto = AutoModelForMaskedLM if masked else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config)
    lora = linear = 0
    for name, module in model.named_modules():
        in_a_layer = ".layers." in name or ".layer." in name  # decoder layers (Llama...) / encoder layers (RoBERTa)
        if isinstance(module, torch.nn.Linear) and in_a_layer:
            linear += module.weight.numel()
            if name.rsplit(".", 1)[-1] in target_modules:
                lora += r * (module.in_features + module.out_features)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    return ModelShape(
        parameters=sum(p.numel() for p in model.parameters()), linear_in_layers=linear, lora=lora,
        kv_per_token=2 * config.num_hidden_layers * kv_heads * head_dim, hidden=config.hidden_size,
        intermediate=config.intermediate_size, vocab=config.vocab_size, layers=config.num_hidden_layers,
        softcap=bool(getattr(config, "final_logit_softcapping", None)),
    )


@dataclass(frozen=True)
class LoraRun:
    """What one LoRA training step holds (the GBEM-UA defaults: batch 2 x 256 tokens, r = 16 on q/k/v)."""

    bits: int = 16  # the base's decoder linears: 16 (no quantisation), 8 (LLM.int8) or 4 (NF4)
    mixed_precision: bool = True  # bf16 / fp16 weights and compute (a GPU); False = float32 (the CPU)
    checkpointing: bool = True
    optimizer_state_bytes: int = EIGHT_BIT_OPTIMIZER_STATE
    batch: int = 2
    seq_len: int = 256
    completion_tokens: int = 2  # " так" / " ні": the tokens the loss and the pairing term read per sequence
    pairing: bool = False
    pairing_sequences: int = 4 * 2 * 3  # 4 x pairing_pairs x pair sources (gbem_ua, occupations_en(_odds))
    anchor_sequences: int = ANCHOR_SEQUENCES
    pair_seq_len: int = 128  # tokens of the longest pair sequence


@dataclass
class MemoryEstimate:
    """Bytes per part; ``total`` is their sum (``anchor_pass`` and ``pairing_pass`` overlap: the larger counts)."""

    parts: dict[str, float] = field(default_factory=dict)
    overlapping: tuple[str, ...] = ()

    @property
    def total(self) -> float:
        shared = [v for k, v in self.parts.items() if k in self.overlapping]
        return sum(v for k, v in self.parts.items() if k not in self.overlapping) + max(shared, default=0.0)

    def largest(self) -> str:
        return max(self.parts, key=self.parts.get)

    def describe(self) -> str:
        return ", ".join(f"{k} {v / GIB:.2f} GiB" for k, v in self.parts.items())


def _layer_activations(tokens: int, shape: ModelShape, act: int, checkpointing: bool) -> float:
    per_layer = tokens * (10 * shape.hidden + 3 * shape.intermediate) * act
    if checkpointing:  # every layer's input kept, one layer's internals recomputed at a time
        return shape.layers * tokens * shape.hidden * act + per_layer
    return shape.layers * per_layer


def lora_memory(shape: ModelShape, run: LoraRun = LoraRun()) -> MemoryEstimate:
    """One LoRA training step of ``run`` on a model of ``shape``, part by part (module docstring)."""
    act = 2 if run.mixed_precision else 4  # bytes of weights, activations and logits
    others = shape.parameters - shape.linear_in_layers
    per_linear = {16: act, 8: INT8_BYTES, 4: NF4_BITS / 8}[run.bits]
    parts = {
        "cuda_context": float(CUDA_CONTEXT),
        "weights": shape.linear_in_layers * per_linear + others * act,
        "kbit_fp32_casts": float(others * (4 - act)) if run.bits < 16 else 0.0,
        "adapter": float(shape.lora * (4 + 4 + run.optimizer_state_bytes)),
        "activations": _layer_activations(run.batch * run.seq_len, shape, act, run.checkpointing),
        "sft_head": float(run.batch * run.completion_tokens * shape.vocab * 8),
    }
    if not run.pairing:
        return MemoryEstimate(parts)
    logits_copies = 2 if shape.softcap else 1
    anchor_tokens = run.anchor_sequences * run.pair_seq_len
    parts["anchor_pass"] = (anchor_tokens * shape.vocab * act * logits_copies
                            + run.anchor_sequences * run.completion_tokens * shape.vocab * 8
                            + anchor_tokens * (4 * shape.hidden + 3 * shape.intermediate) * act)
    pairing_tokens = run.pairing_sequences * run.pair_seq_len
    parts["pairing_pass"] = (pairing_tokens * shape.vocab * act * logits_copies
                             + _layer_activations(pairing_tokens, shape, act, run.checkpointing))
    return MemoryEstimate(parts, overlapping=("anchor_pass", "pairing_pass"))


def evaluate_memory(shape: ModelShape, dtype_bytes: int, tokens: int = 1024) -> MemoryEstimate:
    """Scoring without gradients: the weights, one batch of ``tokens`` (``scoring.max_batch_tokens``: KV cache,
    the widest layer activations, float32 log-probabilities over the vocabulary at every token) and the context."""
    batch = tokens * (shape.kv_per_token * dtype_bytes + 3 * shape.intermediate * dtype_bytes + shape.vocab * 4)
    return MemoryEstimate({"cuda_context": float(CUDA_CONTEXT), "weights": float(shape.parameters * dtype_bytes),
                           "batch": float(batch)})


def pair_sources(sources: tuple[str, ...] | list[str]) -> int:
    """Pair sources drawn per forward pass: ``gbem_ua`` is one, ``occupations_en`` two (the occupation pairs
    and the completion-swapped odds pairs: :func:`~biaslab.mitigation.lora.logit_pairing.english_pairs`)."""
    return ("gbem_ua" in sources) + 2 * ("occupations_en" in sources)


def run_for(cfg: Any, plan: Any, pair_seq_len: int = 128) -> LoraRun:
    """The :class:`LoraRun` of params' ``lora`` section ``cfg`` under a resolved
    :class:`~biaslab.mitigation.lora.training_plan.TrainingPlan` (what the preflight check estimates)."""
    eight_bit = "8bit" in plan.optimizer
    return LoraRun(
        bits={"none": 16, "8bit": 8, "4bit": 4}[plan.quantization], mixed_precision=plan.mixed_precision != "none",
        checkpointing=plan.gradient_checkpointing,
        optimizer_state_bytes=EIGHT_BIT_OPTIMIZER_STATE if eight_bit else ADAMW_STATE,
        batch=cfg.per_device_batch_size, seq_len=cfg.max_length, pairing=cfg.objective == "logit_pairing",
        pairing_sequences=4 * cfg.pairing_pairs * pair_sources(tuple(cfg.sources)), pair_seq_len=pair_seq_len,
    )


def estimate_lora(config: Any, cfg: Any, plan: Any, pair_seq_len: int = 128) -> MemoryEstimate:
    """The LoRA training memory of a model ``config`` (a transformers config: ``AutoConfig.from_pretrained`` of
    the base) under params' ``lora`` section ``cfg`` and its resolved plan - the preflight's one call.

    ``pair_seq_len``: the longest logit-pairing sequence in tokens, e.g. ``max(map(len, encode_pairs(pairs,
    fmt).sequences))`` with the base's tokenizer (:mod:`biaslab.mitigation.lora.logit_pairing`).
    """
    shape = shape_of(config, cfg.r, tuple(cfg.target_modules))
    return lora_memory(shape, run_for(cfg, plan, pair_seq_len))
