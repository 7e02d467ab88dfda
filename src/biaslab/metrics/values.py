"""A metric value that carries its meaning: direction, ideal value and confidence interval.

A reader should never have to guess whether higher is better: ``direction`` is one of
``"higher"`` (higher is better, e.g. F1), ``"lower"`` (e.g. QADiff, ideal 0) or ``"target"``
(closest to ``ideal`` is best, e.g. RuBia's pro-trope share, ideal 0.5).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Direction = Literal["higher", "lower", "target"]


@dataclass(frozen=True)
class MetricValue:
    value: float
    direction: Direction
    ideal: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None  # number of items the value was computed from
    description: str = ""

    def distance_to_ideal(self) -> float:
        """|value - ideal| for target metrics; for higher/lower metrics, signed badness (lower is better)."""
        if self.direction == "target":
            return abs(self.value - (self.ideal if self.ideal is not None else 0.0))
        return -self.value if self.direction == "higher" else self.value

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None and v != ""}
