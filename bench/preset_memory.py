"""Expected GPU memory of the model presets (docs/presets.md), from parameter counts (an estimate, not a measurement).

    python bench/preset_memory.py            # prints docs/presets.md's table (markdown)

Each architecture is built on PyTorch's ``meta`` device from the hyper-parameters of its published
``config.json`` (no weights, nothing downloaded), so the parameter counts and the LoRA adapter sizes are the
real ones. Memory is then

* **evaluate** (no gradients): weights × bytes per parameter of the checkpoint dtype (``model.dtype: auto``)
  + one scoring batch of ``scoring.max_batch_tokens`` tokens (KV cache, the widest layer activations, and
  float32 log-probabilities over the vocabulary at every token: the worst case) + the CUDA context;
* **LoRA** (gradient checkpointing, the GBEM-UA defaults r = 16 on q/k/v, batch 2 × 256 tokens): the base's
  weights — bf16, or its decoder linears at 8 bits (``lora.quantization: 8bit``, LLM.int8 as the GBEM-UA
  authors trained) or 4.127 bits (``4bit``: NF4 with double quantisation); embeddings, LM head and norms stay
  bf16 — + adapter × 10 bytes (fp32 weight and gradient, ``paged_adamw_8bit`` moments: ``lora.optimizer:
  auto`` on a GPU) + the checkpointed layer inputs + one layer's recomputed activations + the logits (bf16,
  their fp32 copy and its gradient) + the CUDA context.

Allocator fragmentation and the scorer's memory-based token budget (which grows batches into free memory)
are not modelled: the numbers are what a stage needs, not what it will take on a larger GPU.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

GIB = 1024**3
CUDA_CONTEXT = 0.5 * GIB
NF4_BITS = 4 + 8 / 64 + 32 / (64 * 256)  # 4-bit codes + 8-bit block scale per 64 + fp32 scale per 256 blocks


@dataclass(frozen=True)
class Preset:
    name: str
    repo: str
    config: dict  # the architecture fields of the repository's config.json
    dtype_bytes: int  # of the checkpoint's weights (model.dtype: auto keeps them)
    masked: bool = False


PRESETS = [
    Preset("Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3-8B-Instruct", dict(
        model_type="llama", vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False), 2),
    Preset("Mistral-7B-Instruct-v0.3", "mistralai/Mistral-7B-Instruct-v0.3", dict(
        model_type="mistral", vocab_size=32768, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False), 2),
    Preset("Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct", dict(
        model_type="qwen2", vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False), 2),
    Preset("Gemma-2-9b-it", "google/gemma-2-9b-it", dict(
        model_type="gemma2", vocab_size=256000, hidden_size=3584, intermediate_size=14336, num_hidden_layers=42,
        num_attention_heads=16, num_key_value_heads=8, head_dim=256, tie_word_embeddings=True), 2),
    Preset("XLM-R base", "FacebookAI/xlm-roberta-base", dict(
        model_type="xlm-roberta", vocab_size=250002, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
        num_attention_heads=12, max_position_embeddings=514, type_vocab_size=1), 4, masked=True),
]


@dataclass
class Shape:
    parameters: int
    linear_in_layers: int  # parameters of the decoder layers' nn.Linear weights (what 4-bit quantises)
    lora_qkv: int  # adapter parameters at r = 16 on the q/k/v projections
    kv_per_token: int  # key + value elements per token, all layers
    hidden: int
    intermediate: int
    vocab: int
    layers: int


def shape(preset: Preset, r: int = 16) -> Shape:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

    fields = dict(preset.config)
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    auto = AutoModelForMaskedLM if preset.masked else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config)
    qkv = ("query", "key", "value") if preset.masked else ("q_proj", "k_proj", "v_proj")
    lora = linear = 0
    for name, module in model.named_modules():
        in_a_layer = ".layers." in name or ".layer." in name  # decoder layers (Llama...) / encoder layers (RoBERTa)
        if isinstance(module, torch.nn.Linear) and in_a_layer:
            linear += module.weight.numel()
            if name.rsplit(".", 1)[-1] in qkv:
                lora += r * (module.in_features + module.out_features)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    return Shape(
        parameters=sum(p.numel() for p in model.parameters()), linear_in_layers=linear, lora_qkv=lora,
        kv_per_token=2 * config.num_hidden_layers * kv_heads * head_dim, hidden=config.hidden_size,
        intermediate=config.intermediate_size, vocab=config.vocab_size, layers=config.num_hidden_layers,
    )


def evaluate_bytes(p: Preset, s: Shape, tokens: int = 1024) -> float:
    batch = tokens * (s.kv_per_token * p.dtype_bytes + 3 * s.intermediate * p.dtype_bytes + s.vocab * 4)
    return s.parameters * p.dtype_bytes + batch + CUDA_CONTEXT


def lora_bytes(s: Shape, *, bits: int = 16, batch: int = 2, seq: int = 256) -> float:
    """One LoRA training step's memory with the base's decoder linears at ``bits`` (16 = bf16, 8, 4 = NF4)."""
    tokens = batch * seq
    per_linear = {16: 2.0, 8: 1.0 + 4 / 4096, 4: NF4_BITS / 8}[bits]  # int8: one fp32 scale per row of ~4k
    weights = s.linear_in_layers * per_linear + (s.parameters - s.linear_in_layers) * 2
    adapter = s.lora_qkv * (4 + 4 + 2)  # fp32 weight + gradient, paged_adamw_8bit moments (lora.optimizer auto)
    checkpointed = s.layers * tokens * s.hidden * 2
    one_layer = tokens * (10 * s.hidden + 3 * s.intermediate) * 2
    logits = tokens * s.vocab * (2 + 4 + 4)
    return weights + adapter + checkpointed + one_layer + logits + CUDA_CONTEXT


def table() -> str:
    rows = ["| model | parameters | weights (checkpoint dtype) | evaluate | LoRA, bf16 base | LoRA, 8-bit base | "
            "LoRA, 4-bit base |", "|---|---:|---:|---:|---:|---:|---:|"]
    for p in PRESETS:
        s = shape(p)
        gib = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
        lora = ["skipped (masked LM)"] * 3 if p.masked else [gib(lora_bytes(s, bits=b)) for b in (16, 8, 4)]
        rows.append(f"| {p.name} | {s.parameters / 1e9:.2f} B | {gib(s.parameters * p.dtype_bytes)} | "
                    f"{gib(evaluate_bytes(p, s))} | {' | '.join(lora)} |")
    return "\n".join(rows)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(table())


if __name__ == "__main__":
    main()
