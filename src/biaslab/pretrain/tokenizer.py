"""Train a byte-level BPE tokenizer and wrap it as a Hugging Face ``PreTrainedTokenizerFast``.

Byte-level BPE covers every UTF-8 string (Cyrillic included) with no unknown token, which is what a
tri-lingual model needs. Special tokens: ``<s>`` (BOS, id 0), ``</s>`` (EOS, id 1), ``<pad>`` (id 2).
"""

from __future__ import annotations

from collections.abc import Iterable

SPECIAL_TOKENS = ["<s>", "</s>", "<pad>"]


def train_bpe_tokenizer(texts: Iterable[str], vocab_size: int, min_frequency: int = 2):
    """Return a ``PreTrainedTokenizerFast`` trained on ``texts`` (deterministic for the same input)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>", clean_up_tokenization_spaces=False
    )
