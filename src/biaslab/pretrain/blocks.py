"""The pretraining text as tensors: documents tokenised and packed into fixed-length blocks, the
validation sets per language, and the seeded row sampler and batches the training loop draws from
(:func:`prepare_data`). No model and no optimizer: :mod:`biaslab.pretrain.train` trains on what this builds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from biaslab.config import PretrainConfig
from biaslab.data.corpus import LanguageSplit


IGNORE_INDEX = -100  # label value that cross-entropy skips (padding of the last validation block)


@dataclass
class ValidationSet:
    """One language's held-out blocks: ``input_ids``/``labels`` ``[N, seq_len]`` and its character count."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    n_chars: int


# --------------------------------------------------------------------------- data
def encode_texts(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """``<s> text </s>`` for every text, concatenated into one token stream."""
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    stream: list[int] = []
    for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]:
        stream.extend([bos, *ids, eos])
    return stream


def pack_blocks(stream: Sequence[int], seq_len: int) -> torch.Tensor:
    """Cut a token stream into ``[len(stream) // seq_len, seq_len]`` blocks (the tail is dropped)."""
    n = len(stream) // seq_len
    if n == 0:
        raise ValueError(f"training text too short: {len(stream)} tokens make no block of seq_len={seq_len}")
    return torch.tensor(stream[: n * seq_len], dtype=torch.long).view(n, seq_len)


def validation_set(tokenizer: Any, texts: Sequence[str], seq_len: int) -> ValidationSet:
    """All held-out tokens in ``[N, seq_len]`` blocks; the last block is padded and its padding not scored."""
    stream = encode_texts(tokenizer, texts)
    n = math.ceil(len(stream) / seq_len)
    ids = torch.full((n * seq_len,), tokenizer.pad_token_id, dtype=torch.long)
    ids[: len(stream)] = torch.tensor(stream, dtype=torch.long)
    labels = ids.clone()
    labels[len(stream) :] = IGNORE_INDEX
    return ValidationSet(ids.view(n, seq_len), labels.view(n, seq_len), sum(map(len, texts)))


class RowSampler:
    """An endless stream of row indices into ``n`` blocks: a fresh seeded permutation every epoch.

    ``take(m)`` returns the next ``m`` indices (crossing epoch boundaries); ``consumed`` counts them, and
    a new sampler with the same ``n`` and ``seed`` that ``skip(consumed)`` continues the same stream, so
    training can stop after any step and resume bit-identically in another process.
    """

    def __init__(self, n: int, seed: int):
        if n < 1:
            raise ValueError("cannot sample rows from zero blocks")
        self.n, self.consumed = n, 0
        self._generator = torch.Generator().manual_seed(seed)
        self._order = torch.randperm(n, generator=self._generator)
        self._pos = 0

    def take(self, m: int) -> torch.Tensor:
        out = []
        while m > 0:
            if self._pos == self.n:
                self._order, self._pos = torch.randperm(self.n, generator=self._generator), 0
            k = min(m, self.n - self._pos)
            out.append(self._order[self._pos : self._pos + k])
            self._pos, m, self.consumed = self._pos + k, m - k, self.consumed + k
        return torch.cat(out) if out else torch.empty(0, dtype=torch.long)

    def skip(self, m: int) -> None:
        self.take(m)


def batches(blocks: torch.Tensor, batch_size: int, seed: int) -> Iterator[torch.Tensor]:
    """Endless ``[batch_size, seq_len]`` batches drawn by a :class:`RowSampler`."""
    if len(blocks) < batch_size:
        raise ValueError(f"{len(blocks)} training blocks cannot fill one batch of {batch_size}")
    sampler = RowSampler(len(blocks), seed)
    while True:
        yield blocks[sampler.take(batch_size)]


def unigram_perplexity(train_blocks: torch.Tensor, vs: ValidationSet, vocab_size: int) -> float:
    """Perplexity of the add-one-smoothed unigram distribution of the training tokens on validation tokens."""
    counts = torch.bincount(train_blocks.reshape(-1), minlength=vocab_size).double() + 1.0  # [V]
    log_p = counts.log() - counts.sum().log()  # [V]
    target = vs.labels[:, 1:].reshape(-1)
    target = target[target != IGNORE_INDEX]
    return math.exp(-float(log_p[target].mean()))


# --------------------------------------------------------------------------- data of a run
@dataclass
class PretrainData:
    """The tokenised training stream and validation sets of one corpus under one tokenizer."""

    tokenizer: Any
    blocks: torch.Tensor  # [N, seq_len], languages mixed
    val_sets: dict[str, ValidationSet]
    unigram: dict[str, float]
    splits: Mapping[str, LanguageSplit]
    tokenizer_seconds: float = 0.0


def prepare_data(splits: Mapping[str, LanguageSplit], cfg: PretrainConfig, tokenizer: Any = None,
                 device: str = "cpu") -> PretrainData:
    """Tokenise ``splits`` onto ``device``; trains the BPE tokenizer on the training text unless one is given."""
    from biaslab.pretrain.tokenizer import train_bpe_tokenizer

    train_texts = [t for s in splits.values() for t in s.train_texts]
    started = time.monotonic()
    if tokenizer is None:
        tokenizer = train_bpe_tokenizer((line for t in train_texts for line in t.split("\n")), cfg.vocab_size)
    tokenizer_seconds = time.monotonic() - started
    blocks = pack_blocks(encode_texts(tokenizer, train_texts), cfg.seq_len)
    val_sets = {lang: validation_set(tokenizer, s.validation_texts, cfg.seq_len) for lang, s in splits.items()}
    unigram = {lang: unigram_perplexity(blocks, vs, len(tokenizer)) for lang, vs in val_sets.items()}
    if device != "cpu":
        blocks = blocks.to(device)
        val_sets = {lang: ValidationSet(vs.input_ids.to(device), vs.labels.to(device), vs.n_chars)
                    for lang, vs in val_sets.items()}
    return PretrainData(tokenizer, blocks, val_sets, unigram, splits, tokenizer_seconds)
