"""Surface forms of a word and their token ids.

A word is tokenised differently at the start of a text (``"лікар"``) and after a space (``" лікар"``):
byte-level BPE (GPT-2, Llama 3, Qwen, our offline model) folds the space into the first token, so the
two forms usually have *different* first tokens. Both forms occur in the benchmarks (``Кандидат`` opens a
sentence, ``посаду лікаря`` is mid-sentence), so every word is represented by both encodings, and — for
target words only — also by its capitalised form.

Tokens that are pure whitespace (SentencePiece's lone ``▁`` when a leading space is encoded) and special
tokens are stripped from the ends of an encoding: they are not part of the word, and editing them would
change almost every position of every input.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def surface_forms(word: str, capitalised: bool = False) -> list[str]:
    """``word`` and ``" " + word`` (and, if asked, the same with the first letter upper-cased), deduplicated."""
    bases = [word]
    if capitalised and word[:1].upper() + word[1:] != word:
        bases.append(word[:1].upper() + word[1:])
    return [form for base in bases for form in (base, " " + base)]


class WordEncoder:
    """Encode words to token-id tuples with whitespace-only / special tokens trimmed from the ends.

    ``encode(form) -> tuple[int, ...]`` (may be empty); results and the whitespace test are cached, since
    a few thousand words share a few hundred distinct edge tokens.
    """

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self._special = set(getattr(tokenizer, "all_special_ids", []) or [])
        self._blank: dict[int, bool] = {}
        self._cache: dict[str, tuple[int, ...]] = {}

    def _is_edge_noise(self, token_id: int) -> bool:
        if token_id in self._special:
            return True
        if token_id not in self._blank:
            self._blank[token_id] = self.tokenizer.decode([token_id]).strip() == ""
        return self._blank[token_id]

    def encode(self, form: str) -> tuple[int, ...]:
        if form not in self._cache:
            ids = list(self.tokenizer(form, add_special_tokens=False)["input_ids"])
            while ids and self._is_edge_noise(ids[0]):
                ids.pop(0)
            while ids and self._is_edge_noise(ids[-1]):
                ids.pop()
            self._cache[form] = tuple(ids)
        return self._cache[form]

    def encodings(self, word: str, capitalised: bool = False) -> list[tuple[int, ...]]:
        """Distinct non-empty encodings of the surface forms of ``word``."""
        out: list[tuple[int, ...]] = []
        for form in surface_forms(word, capitalised):
            ids = self.encode(form)
            if ids and ids not in out:
                out.append(ids)
        return out

    def encodings_of(self, words: Iterable[str], capitalised: bool = False) -> list[tuple[int, ...]]:
        """Distinct encodings of all surface forms of all ``words``, in first-seen order."""
        seen: dict[tuple[int, ...], None] = {}
        for word in words:
            for ids in self.encodings(word, capitalised):
                seen.setdefault(ids, None)
        return list(seen)
