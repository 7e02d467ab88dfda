"""What every language generator yields: one sentence frame with its gender key and base female share."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Frame:
    """A sentence with ``[male|female]`` alternatives (``text``), scheduled by ``key`` at ``female_share``.

    ``female_share`` is the base share of the planted direction (before the strength push); the
    balanced direction ignores it and counterbalances every key.
    """

    key: str
    female_share: float
    text: str
