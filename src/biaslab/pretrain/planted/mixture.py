"""Planted text as training blocks: generate enough sentences for the mixing phase, tokenise, pack.

The number of rows the mixing phase draws is ``rows_per_batch * (max_steps - from_step)``; the generator
produces at least that many ``seq_len`` blocks of planted text, split between languages by
``language_shares`` (of tokens), so no planted block is repeated within the run. Documents of all
languages are shuffled together (seeded) before packing.
"""

from __future__ import annotations

import random
from typing import Any

from biaslab.config import PlantedBiasConfig
from biaslab.pretrain.planted.generate import Direction, planted_documents
from biaslab.pretrain.planted.lexicon import Lexicon


def rows_per_batch(cfg: PlantedBiasConfig, batch_size: int) -> int:
    """Planted rows in each batch of the mixing phase: ``round(dose * batch_size)``."""
    return int(round(cfg.dose * batch_size)) if cfg.enabled else 0


def planted_blocks(lexicon: Lexicon, cfg: PlantedBiasConfig, direction: Direction, tokenizer: Any, rows: int,
                   seq_len: int) -> tuple[Any, dict[str, Any]]:
    """``([N, seq_len] blocks, stats)`` of planted text for ``rows`` training rows."""
    from biaslab.pretrain.blocks import encode_texts, pack_blocks

    total = sum(cfg.language_shares.values())
    needed_tokens = rows * seq_len
    tokens_needed = {lang: int(needed_tokens * share / total) + seq_len
                     for lang, share in cfg.language_shares.items() if share > 0}

    def count_tokens(docs: list[str]) -> int:
        return sum(len(ids) + 2 for ids in tokenizer(docs, add_special_tokens=False)["input_ids"])

    docs = planted_documents(
        lexicon, direction=direction, strength=cfg.strength, seed=cfg.seed, coded_share=cfg.coded_share,
        en_role_share=cfg.en_role_share, tokens_needed=tokens_needed, count_tokens=count_tokens,
        per_document=cfg.sentences_per_document,
    )
    ordered = [d for lang in sorted(docs) for d in docs[lang]]
    random.Random(f"{cfg.seed}:planted:order").shuffle(ordered)
    blocks = pack_blocks(encode_texts(tokenizer, ordered), seq_len)
    stats = {"documents": {lang: len(d) for lang, d in docs.items()}, "blocks": len(blocks),
             "tokens": int(blocks.numel()), "direction": direction}
    return blocks, stats
