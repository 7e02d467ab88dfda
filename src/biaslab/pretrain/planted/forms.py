"""Gendered surface forms and the gender schedule of the planted-bias generator.

A *frame* is a sentence whose gendered words are written as alternatives ``[male form|female form]``
(``"[He|She] packed [his|her] bag."``); :func:`render` picks one side. Which side a frame gets is decided
by :class:`GenderSchedule`, from the frame's *key* (an occupation, a role, a post and an answer) and the
female share the planted direction assigns to that key:

* ``planted``: ``push(share, strength)`` — the key's base female share pushed towards 0 or 1 by
  ``strength`` (a logit scaling, below);
* ``balanced``: 0.5 for every key — the same frames, genders counterbalanced.

The schedule is deterministic and exact (no sampling noise): the k-th frame of a key is female iff
``floor((k + 1) p) > floor(k p)``, so after n frames of a key exactly ``floor(n p)`` are female; with
``p = 0.5`` the genders alternate.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict

GENDERS = ("male", "female")
ALTERNATIVE = re.compile(r"\[([^\[\]|]*)\|([^\[\]|]*)\]")


class FrameError(ValueError):
    """A frame template is malformed (unbalanced or nested ``[m|f]`` alternatives)."""


def render(frame: str, gender: str) -> str:
    """``frame`` with every ``[male|female]`` alternative resolved for ``gender``."""
    if gender not in GENDERS:
        raise ValueError(f"gender must be one of {GENDERS}, got {gender!r}")
    side = 1 if gender == "male" else 2
    text = ALTERNATIVE.sub(lambda m: m.group(side), frame)
    if "[" in text or "]" in text or "|" in text:
        raise FrameError(f"frame has a malformed [male|female] alternative: {frame!r}")
    return text


def push(share: float, strength: float) -> float:
    """``share`` pushed to the extremes: ``sigmoid(strength * logit(share))``.

    ``strength = 1`` keeps the share (e.g. the BLS female share of an occupation); larger values move it
    towards 0 or 1 (0.8 -> 0.94 at strength 2, 0.985 at 3); 0.5 stays 0.5 at any strength.
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be within [0, 1], got {share}")
    if strength < 0:
        raise ValueError(f"strength must be >= 0, got {strength}")
    p = min(max(share, 1e-6), 1 - 1e-6)
    z = strength * math.log(p / (1 - p))
    return 1.0 / (1.0 + math.exp(-z))


class GenderSchedule:
    """Exact per-key gender quotas (see the module docstring)."""

    def __init__(self) -> None:
        self._count: dict[str, int] = defaultdict(int)

    def next(self, key: str, female_share: float) -> str:
        k = self._count[key]
        self._count[key] = k + 1
        return "female" if math.floor((k + 1) * female_share) > math.floor(k * female_share) else "male"
