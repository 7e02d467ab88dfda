"""Fakes shared by the unit tests of the sentence-pair benchmarks (CrowS-Pairs, RuBia)."""

from __future__ import annotations

import pytest

from biaslab.scoring.requests import Score


class FakeLM:
    """A causal scorer with a fixed log-likelihood per sentence (``table``: sentence -> log P); counts engine calls.

    Sentence-pair benchmarks score each whole sentence from an empty context (the lm-eval-harness
    ``loglikelihood("", sentence)`` rule), so the fake asserts that; every sentence counts 2 tokens.
    """

    kind = "causal"

    def __init__(self, table):
        self.table, self.calls = table, 0

    def loglikelihood(self, requests, desc=None):
        self.calls += 1
        assert all(r.context == "" for r in requests)
        return [Score(self.table[r.continuation], 2, False) for r in requests]


@pytest.fixture()
def fake_lm() -> type[FakeLM]:
    """The :class:`FakeLM` class: call it with a table, or subclass it for another scoring rule."""
    return FakeLM
