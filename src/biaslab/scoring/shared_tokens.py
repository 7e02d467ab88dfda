"""The tokens two sentences of a minimal pair share: what CrowS-Pairs' MPLL sums over.

Found as the CrowS authors' ``metric.py`` does: ``difflib.SequenceMatcher`` on the two token-id
sequences, positions inside ``equal`` opcodes.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def shared_token_positions(ids_a: Sequence[int], ids_b: Sequence[int]) -> tuple[list[int], list[int]]:
    """Positions of the tokens common to both sequences (difflib ``equal`` blocks), in order."""
    matcher = difflib.SequenceMatcher(None, list(ids_a), list(ids_b))
    pos_a: list[int] = []
    pos_b: list[int] = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            pos_a += range(a0, a1)
            pos_b += range(b0, b1)
    return pos_a, pos_b
