"""Tiny models and tokenizers built in the tests (seconds, nothing downloaded).

* :func:`build_tiny_bert`: a WordPiece tokenizer + 2-layer ``BertForMaskedLM`` (masked-LM tests);
* :func:`bos_adding_tokenizer`: a byte-level BPE that adds BOS by default, as Llama/Gemma/Mistral
  tokenizers do (``add_special_tokens=True`` puts ``<s>`` first) - the BOS tests;
* :data:`CHAT_TEMPLATE` / :data:`CHAT_TEMPLATE_NO_SYSTEM`: small Jinja chat templates written into a test
  tokenizer, one with a system role and a BOS of its own (Llama-3 style), one that rejects system
  messages (Gemma style).
"""

from __future__ import annotations

import copy

import torch

BERT_TEXT = [
    "The doctor said that he would come. The nurse said that she would come.",
    "He is a man. She is a woman. They are people. Him, her, them.",
    "Врач сказал, что он придёт. Медсестра сказала, что она придёт. Мужчина, женщина.",
    "Women are bad at math. Men are bad at math. Poor people are lazy. Rich people are lazy.",
] * 10


def build_tiny_bert(seed: int = 0):
    """A WordPiece tokenizer + BertForMaskedLM small enough to build in well under a second."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(vocab_size=200, special_tokens=special, show_progress=False)
    tok.train_from_iterator(BERT_TEXT, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]",
    )
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64)
    model = BertForMaskedLM(config).eval()
    return model, tokenizer


def bos_adding_tokenizer(tokenizer):
    """A copy of a byte-level BPE test tokenizer whose default encoding starts with ``<s>`` (Gemma-style).

    Same vocabulary and merges (so the same model scores it); only the post-processor differs.
    """
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    backend = copy.deepcopy(tokenizer.backend_tokenizer)
    bos = tokenizer.bos_token
    backend.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tokenizer.bos_token_id)]
    )
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=bos, eos_token=tokenizer.eos_token,
                                   pad_token=tokenizer.pad_token, clean_up_tokenization_spaces=False)


# A Llama-3-like template: its own BOS, a system turn when given, headers around each turn.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
# A Gemma-like template: no system role (raises), no BOS of its own.
CHAT_TEMPLATE_NO_SYSTEM = (
    "{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}<turn {{ m['role'] }}>{{ m['content'] }}</turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<turn assistant>{% endif %}"
)


def with_chat_template(tokenizer, template: str = CHAT_TEMPLATE):
    """A copy of ``tokenizer`` carrying ``template`` as its chat template."""
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = template
    return tok
