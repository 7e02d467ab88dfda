"""The one fake scorer of the test suite: a :class:`biaslab.scoring.protocol.Scorer` whose numbers the test gives.

Benchmark tests check metrics by hand against known scores; they build a :class:`FakeScorer` from
tables (mappings) or functions, one per operation they use, and read ``calls`` to check that each kind
of request went to the scorer in one call. Anything a test does not configure raises, so a benchmark
that asks for an unexpected number fails loudly::

    lm = FakeScorer(sentences={"He is a man.": -3.0, "She is a man.": -5.0})
    lm = FakeScorer(loglikelihood=lambda r: math.log(0.5 if r.continuation == " так" else 0.1))
    lm = FakeScorer.masked()          # no capabilities: causal-only benchmarks must skip

Values may be full result objects (:class:`~biaslab.scoring.requests.Score`,
:class:`~biaslab.scoring.protocol.SentenceScore`) or plain log-probabilities (then ``n_tokens`` is
``default_tokens``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from biaslab.scoring.protocol import (
    CAPABILITIES,
    SENTENCE_LOGLIKELIHOOD,
    PaddedProbability,
    PairScore,
    SentenceProbabilities,
    SentenceScore,
    TokenScore,
    UnsupportedCapability,
    check_pair_methods,
)
from biaslab.scoring.requests import Request, Score
from biaslab.scoring.static_vectors import WordVectors

Table = Mapping[Any, Any] | Callable[[Any], Any] | None


def _lookup(table: Table, key: Any, operation: str) -> Any:
    if table is None:
        raise AssertionError(f"FakeScorer: the test gave no table for {operation}, but the benchmark called it")
    if callable(table):
        return table(key)
    if key not in table:
        raise AssertionError(f"FakeScorer.{operation}: no entry for {key!r}")
    return table[key]


class FakeScorer:
    """Implements the scorer protocol from per-operation tables (see the module docstring).

    ``loglikelihood``: ``Request -> Score | logprob``; ``sentences``: ``sentence -> SentenceScore | logprob``
    (also what ``pair_scores`` and ``geometric_mean_probabilities`` use); ``tokens``: ``sentence ->
    [TokenScore | (text, logprob)]``; ``cloze``: ``(context, word) -> SentenceScore | logprob`` (default: the
    ``loglikelihood`` table on ``Request(context, " " + word)``); ``answers``: ``prompt -> text``;
    ``vectors``: ``word -> vector``; ``eos_logprob``: log P of every EOS pad. ``pair_method``: ``None``
    scores pairs as sentence log-likelihoods (a causal LM), ``"requested"`` reports the method asked for
    (a masked LM's PPLL/MPLL).
    """

    def __init__(
        self,
        *,
        loglikelihood: Table = None,
        sentences: Table = None,
        tokens: Table = None,
        cloze: Table = None,
        answers: Table = None,
        vectors: Mapping[str, Sequence[float]] | None = None,
        eos_logprob: float | None = None,
        capabilities: Sequence[str] = CAPABILITIES,
        description: str = "fake causal LM",
        pair_method: str | None = None,
        default_tokens: int = 1,
    ) -> None:
        self.tables = {"loglikelihood": loglikelihood, "sentences": sentences, "tokens": tokens, "cloze": cloze,
                       "answers": answers}
        self.vectors = vectors
        self.eos_logprob = eos_logprob
        self.capabilities = frozenset(capabilities)
        self.description = description
        self.pair_method = pair_method
        self.default_tokens = default_tokens
        self.prefix = ""
        self.prefix_separator = " "
        self.calls: list[tuple[str, int]] = []

    @classmethod
    def masked(cls, **tables: Any) -> "FakeScorer":
        """A fake masked LM: sentence scores only, pairs scored by the method asked for, no capabilities."""
        return cls(capabilities=(), description="fake masked LM", pair_method="requested", **tables)

    # ------------------------------------------------------------------ protocol
    def supports(self, capability: str) -> bool:
        return capability in self.capabilities

    def with_prefix(self, prefix: str) -> "FakeScorer":
        other = copy.copy(self)
        other.prefix = prefix
        return other

    def with_prefix_separator(self, separator: str) -> "FakeScorer":
        other = copy.copy(self)
        other.prefix_separator = separator
        return other

    def _need(self, capability: str) -> None:
        if capability not in self.capabilities:
            raise UnsupportedCapability(f"{self.description} cannot {capability}")

    def _score(self, value: Any) -> Score:
        return value if isinstance(value, Score) else Score(float(value), self.default_tokens, False)

    def _sentence(self, value: Any) -> SentenceScore:
        if isinstance(value, SentenceScore):
            return value
        if isinstance(value, Score):
            return SentenceScore(value.logprob, value.n_tokens)
        return SentenceScore(float(value), self.default_tokens)

    def loglikelihood(self, requests: Sequence[Request], desc: str | None = None) -> list[Score]:
        self._need("loglikelihood")
        self.calls.append(("loglikelihood", len(requests)))
        return [self._score(_lookup(self.tables["loglikelihood"], r, "loglikelihood")) for r in requests]

    def generate(self, prompts: Sequence[str], max_new_tokens: int = 5, desc: str | None = None) -> list[str]:
        self._need("generate")
        self.calls.append(("generate", len(prompts)))
        return [_lookup(self.tables["answers"], p, "generate") for p in prompts]

    def sentence_scores(self, sentences: Sequence[str], desc: str | None = None) -> list[SentenceScore]:
        self.calls.append(("sentence_scores", len(sentences)))
        return [self._sentence(_lookup(self.tables["sentences"], s, "sentence_scores")) for s in sentences]

    def pair_scores(self, first: Sequence[str], second: Sequence[str], method: str | Sequence[str] = "ppll",
                    desc: str | None = None) -> list[PairScore]:
        methods = check_pair_methods(method, len(first))
        self.calls.append(("pair_scores", len(first)))
        table = self.tables["sentences"]
        return [PairScore(m if self.pair_method == "requested" else SENTENCE_LOGLIKELIHOOD,
                          self._sentence(_lookup(table, a, "pair_scores")),
                          self._sentence(_lookup(table, b, "pair_scores")))
                for a, b, m in zip(first, second, methods)]

    def token_scores(self, sentences: Sequence[str], desc: str | None = None) -> list[list[TokenScore]]:
        self.calls.append(("token_scores", len(sentences)))
        out = []
        for s in sentences:
            out.append([t if isinstance(t, TokenScore) else TokenScore(*t)
                        for t in _lookup(self.tables["tokens"], s, "token_scores")])
        return out

    def cloze_scores(self, contexts: Sequence[str], words: Sequence[str], desc: str | None = None) -> list[SentenceScore]:
        self.calls.append(("cloze_scores", len(contexts)))
        if self.tables["cloze"] is not None:
            return [self._sentence(_lookup(self.tables["cloze"], (c, w), "cloze_scores")) for c, w in zip(contexts, words)]
        return [self._sentence(self._score(_lookup(self.tables["loglikelihood"], Request(c, f" {w}"), "cloze_scores")))
                for c, w in zip(contexts, words)]

    def word_vectors(self, words: Sequence[str]) -> WordVectors:
        if self.vectors is None:
            raise AssertionError("FakeScorer: the test gave no vectors, but the benchmark asked for word_vectors")
        return WordVectors({w: np.asarray(self.vectors[w], dtype=np.float64) for w in words if w in self.vectors},
                           source="fake")

    def geometric_mean_probabilities(self, sentences: Sequence[str], pairs: Sequence[tuple[int, int]] = (),
                                     pad_with_eos: bool = True, desc: str | None = None) -> SentenceProbabilities:
        """Sentences from the ``sentences`` table; a pad adds ``eos_logprob`` and one token (the real rule)."""
        self._need("pair_padding")
        self.calls.append(("geometric_mean_probabilities", len(sentences)))
        scores = [self._sentence(_lookup(self.tables["sentences"], s, "geometric_mean_probabilities"))
                  for s in sentences]

        def side(own: SentenceScore, other: SentenceScore) -> PaddedProbability:
            k = max(0, other.n_tokens - own.n_tokens) if pad_with_eos else 0
            if k and self.eos_logprob is None:
                raise AssertionError("FakeScorer: pair padding needs eos_logprob")
            return PaddedProbability(k, math.exp((own.logprob + k * (self.eos_logprob or 0.0)) / (own.n_tokens + k)))

        return SentenceProbabilities(scores, [(side(scores[i], scores[j]), side(scores[j], scores[i])) for i, j in pairs])
