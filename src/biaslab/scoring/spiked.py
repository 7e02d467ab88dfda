"""A scorer with a known bias added: δ nats on the stereotype-consistent option of every request.

The spike-in self-test (docs/spike_in.md) asks what each benchmark reads when a model is made *more*
biased by a known amount, without training and without touching benchmark text. :class:`SpikedScorer`
wraps any :class:`~biaslab.scoring.protocol.Scorer` and adds ``delta`` to the log-score of the option a
:class:`Stereotype` names as stereotype-consistent (a pair's pro / more-stereotypical sentence, a yes/no
answer, a pronoun); every other number passes through unchanged. ``delta = 0`` returns the wrapped
scorer's numbers exactly.

The calibrate stage does not re-score: each benchmark's ``spike(predictions, delta, options)`` applies the
same shift to its stored per-item predictions (seconds, not an evaluation); the unit tests check on a
tiny model that the two agree.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from biaslab.scoring.protocol import PPLL, PairScore, SentenceScore
from biaslab.scoring.requests import Request, Score


@dataclass(frozen=True)
class Stereotype:
    """Which option of each request is the stereotype-consistent one, per scorer operation.

    ``pairs``: the side of every ``pair_scores`` pair (RuBia's pro and CrowS' more-stereotypical sentence
    come first). ``requests``: for ``loglikelihood``, whether request ``i`` of the call is a stereotyped
    option (GBEM-UA: «так» after a man, «ні» after a woman; OccuGender: a form of the job's BLS majority
    gender). ``cloze``: the same for ``cloze_scores`` (context, word) requests (GenderLex: the pronoun of
    the human-bias label). An operation without a rule is not spiked.
    """

    pairs: Literal["first", "second"] | None = None
    requests: Callable[[int, Request], bool] | None = None
    cloze: Callable[[int, Request], bool] | None = None


class SpikedScorer:
    """``scorer`` with ``delta`` nats added to every stereotype-consistent option (module docstring)."""

    def __init__(self, scorer, delta: float, stereotyped: Stereotype):
        self.scorer, self.delta, self.stereotyped = scorer, float(delta), stereotyped
        self.capabilities = scorer.capabilities
        self.description = f"{scorer.description}, spiked by {self.delta:g} nats"

    def supports(self, capability: str) -> bool:
        return self.scorer.supports(capability)

    def with_prefix(self, prefix: str) -> "SpikedScorer":
        return SpikedScorer(self.scorer.with_prefix(prefix), self.delta, self.stereotyped)

    def with_prefix_separator(self, separator: str) -> "SpikedScorer":
        return SpikedScorer(self.scorer.with_prefix_separator(separator), self.delta, self.stereotyped)

    def _shift(self, scores: list[Score], requests: Sequence[Request], rule) -> list[Score]:
        if rule is None or not self.delta:
            return scores
        return [replace(s, logprob=s.logprob + self.delta) if rule(i, r) else s
                for i, (s, r) in enumerate(zip(scores, requests))]

    def loglikelihood(self, requests: Sequence[Request], desc: str | None = None) -> list[Score]:
        return self._shift(self.scorer.loglikelihood(requests, desc=desc), requests, self.stereotyped.requests)

    def cloze_scores(self, contexts: Sequence[str], words: Sequence[str], desc: str | None = None) -> list[SentenceScore]:
        scores = self.scorer.cloze_scores(contexts, words, desc=desc)
        return self._shift(scores, [Request(c, w) for c, w in zip(contexts, words)], self.stereotyped.cloze)

    def pair_scores(self, first: Sequence[str], second: Sequence[str], method: str | Sequence[str] = PPLL,
                    desc: str | None = None) -> list[PairScore]:
        scores = self.scorer.pair_scores(first, second, method, desc=desc)
        side = self.stereotyped.pairs
        if side is None or not self.delta:
            return scores
        bump = lambda s: replace(s, logprob=s.logprob + self.delta)  # noqa: E731
        return [replace(p, first=bump(p.first)) if side == "first" else replace(p, second=bump(p.second))
                for p in scores]

    # operations no benchmark's stereotyped option is read from: passed through unchanged
    def generate(self, prompts, max_new_tokens: int = 5, desc: str | None = None):
        return self.scorer.generate(prompts, max_new_tokens=max_new_tokens, desc=desc)

    def sentence_scores(self, sentences, desc: str | None = None):
        return self.scorer.sentence_scores(sentences, desc=desc)

    def token_scores(self, sentences, desc: str | None = None):
        return self.scorer.token_scores(sentences, desc=desc)

    def word_vectors(self, words):
        return self.scorer.word_vectors(words)

    def geometric_mean_probabilities(self, sentences, pairs=(), pad_with_eos: bool = True, desc: str | None = None):
        return self.scorer.geometric_mean_probabilities(sentences, pairs, pad_with_eos, desc=desc)


__all__ = ["SpikedScorer", "Stereotype"]
