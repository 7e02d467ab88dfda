"""Expected GPU memory of the model presets (docs/presets.md), from parameter counts (an estimate, not a measurement).

    python bench/preset_memory.py            # prints docs/presets.md's table (markdown)

Each architecture is built on PyTorch's ``meta`` device from the hyper-parameters of its published
``config.json`` (no weights, nothing downloaded), so the parameter counts and the LoRA adapter sizes are the
real ones. The arithmetic is the library's (:mod:`biaslab.mitigation.lora.memory_estimate`, which the preflight
check uses too):

* **evaluate** (no gradients): weights × bytes per parameter of the checkpoint dtype (``model.dtype: auto``)
  + one scoring batch of ``scoring.max_batch_tokens`` tokens + the CUDA context;
* **LoRA** (the ``lora`` variant: gradient checkpointing, bf16 autocast, r = 16 on q/k/v, batch 2 × 256
  tokens, ``paged_adamw_8bit``): the base at bf16 / 8 / 4 bits, on a k-bit base PEFT's float32 casts of every
  unquantised parameter, the adapter and its optimizer state, the checkpointed activations, TRL's fused
  completion-only LM head;
* **lora_clp** (counterfactual logit pairing, ``pairing_pairs: 2`` over the three pair sources): the same plus
  the larger of the anchor pass (256 sequences × :data:`PAIR_SEQ_LEN` tokens × the whole vocabulary of logits,
  twice for Gemma-2's soft-capping) and the pairing term's pass with gradient.

:data:`PAIR_SEQ_LEN` is an assumption, not a tokenizer count (the hub's tokenizers are not reachable here):
the longest GBEM-UA QA prompt is 140 characters, and 128 tokens allows 1.1 characters per token.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from biaslab.mitigation.lora.memory_estimate import (
    GIB,
    LoraRun,
    ModelShape,
    evaluate_memory,
    lora_memory,
    shape_of,
)

PAIR_SEQ_LEN = 128


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
        num_attention_heads=16, num_key_value_heads=8, head_dim=256, tie_word_embeddings=True,
        final_logit_softcapping=30.0), 2),
    Preset("XLM-R base", "FacebookAI/xlm-roberta-base", dict(
        model_type="xlm-roberta", vocab_size=250002, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
        num_attention_heads=12, max_position_embeddings=514, type_vocab_size=1), 4, masked=True),
]


def shape(preset: Preset, r: int = 16) -> ModelShape:
    from transformers import AutoConfig

    fields = dict(preset.config)
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    qkv = ("query", "key", "value") if preset.masked else ("q_proj", "k_proj", "v_proj")
    return shape_of(config, r, qkv, preset.masked)


def needs(preset: Preset, s: ModelShape) -> dict[str, float]:
    """Bytes per column of the table: evaluate, then LoRA and lora_clp at 16 / 8 / 4 bits."""
    columns = {"evaluate": evaluate_memory(s, preset.dtype_bytes).total}
    if not preset.masked:
        for pairing, label in ((False, "lora"), (True, "lora_clp")):
            for bits in (16, 8, 4):
                columns[f"{label} {bits}"] = lora_memory(s, LoraRun(bits=bits, pairing=pairing,
                                                                    pair_seq_len=PAIR_SEQ_LEN)).total
    return columns


def table() -> str:
    rows = ["| model | parameters | weights (checkpoint dtype) | evaluate | LoRA, bf16 base | LoRA, 8-bit base | "
            "LoRA, 4-bit base | lora_clp, bf16 base | lora_clp, 8-bit base | lora_clp, 4-bit base |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p in PRESETS:
        s = shape(p)
        columns = needs(p, s)
        gib = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
        lora = (["skipped (masked LM)"] * 6 if p.masked else
                [gib(columns[f"{label} {bits}"]) for label in ("lora", "lora_clp") for bits in (16, 8, 4)])
        rows.append(f"| {p.name} | {s.parameters / 1e9:.2f} B | {gib(s.parameters * p.dtype_bytes)} | "
                    f"{gib(columns['evaluate'])} | {' | '.join(lora)} |")
    return "\n".join(rows)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(table())


if __name__ == "__main__":
    main()
