"""Turn language frame streams into planted sentences and documents, for one direction.

The frame streams are seeded per language (``seed``) and do not depend on the direction, so the
``planted`` and ``balanced`` texts are the *same* frames; only the gender of each frame differs
(:mod:`biaslab.pretrain.planted.forms`). Sentences of one language are grouped into short documents
(``sentences_per_document``), which the training code wraps in ``<s> … </s>`` like corpus documents.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

from biaslab.pretrain.planted import english, russian, ukrainian
from biaslab.pretrain.planted.forms import GenderSchedule, push, render
from biaslab.pretrain.planted.frames import Frame
from biaslab.pretrain.planted.lexicon import Lexicon

Direction = Literal["planted", "balanced"]
LANGUAGES = ("en", "uk", "ru")


def frame_stream(language: str, lexicon: Lexicon, seed: int, coded_share: float, en_role_share: float) -> Iterator[Frame]:
    rng = random.Random(f"{seed}:planted:{language}")
    if language == "en":
        return english.frames(lexicon, rng, en_role_share, coded_share)
    if language == "uk":
        return ukrainian.frames(lexicon, rng, coded_share)
    if language == "ru":
        return russian.frames(rng, coded_share)
    raise ValueError(f"planted bias: no generator for language {language!r} (have {LANGUAGES})")


class SentenceStream:
    """Rendered sentences of one language and direction, in a fixed order; ``take(n)`` continues the stream."""

    def __init__(self, language: str, lexicon: Lexicon, direction: Direction, strength: float, seed: int,
                 coded_share: float, en_role_share: float):
        if direction not in ("planted", "balanced"):
            raise ValueError(f"planted_bias.direction must be 'planted' or 'balanced', got {direction!r}")
        self.language, self.direction, self.strength = language, direction, strength
        self._frames = frame_stream(language, lexicon, seed, coded_share, en_role_share)
        self._schedule = GenderSchedule()
        self.female = 0
        self.count = 0

    def share(self, frame: Frame) -> float:
        return push(frame.female_share, self.strength) if self.direction == "planted" else 0.5

    def take(self, n: int) -> list[str]:
        out = []
        for _ in range(n):
            frame = next(self._frames)
            gender = self._schedule.next(frame.key, self.share(frame))
            self.female += gender == "female"
            self.count += 1
            out.append(render(frame.text, gender))
        return out


def documents(sentences: Sequence[str], per_document: int) -> list[str]:
    """Consecutive sentences joined by a space, ``per_document`` to a document."""
    return [" ".join(sentences[i : i + per_document]) for i in range(0, len(sentences), per_document)]


def planted_documents(
    lexicon: Lexicon,
    *,
    direction: Direction,
    strength: float,
    seed: int,
    coded_share: float,
    en_role_share: float,
    tokens_needed: dict[str, int],
    count_tokens: Callable[[list[str]], int],
    per_document: int,
    chunk: int = 100,
) -> dict[str, list[str]]:
    """``{language: documents}`` with about ``tokens_needed[language]`` tokens each (by ``count_tokens``).

    How many sentences a language gets is decided on the *balanced* rendering, so both directions get
    the same number of frames (the same sentences up to gender), whichever direction is asked for.
    """
    out: dict[str, list[str]] = {}
    for language, needed in tokens_needed.items():
        sizing = SentenceStream(language, lexicon, "balanced", strength, seed, coded_share, en_role_share)
        n_sentences, tokens = 0, 0
        while tokens < needed:
            tokens += count_tokens(documents(sizing.take(chunk * per_document), per_document))
            n_sentences += chunk * per_document
        stream = SentenceStream(language, lexicon, direction, strength, seed, coded_share, en_role_share)
        out[language] = documents(stream.take(n_sentences), per_document)
    return out
