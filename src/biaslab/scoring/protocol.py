"""The one interface every benchmark talks to: :class:`Scorer`.

A benchmark never reaches into the model: it asks a scorer for numbers - log-likelihoods of
(context, continuation) requests, sentence scores, cloze probabilities, greedy answers, word vectors -
and the scorer decides how to get them from its model (tokenisation, BOS, chat template, prompt
prefix, batching, masked or causal). Two implementations: :class:`~biaslab.scoring.causal.CausalScorer`
and :class:`~biaslab.scoring.masked.MaskedScorer`; :func:`biaslab.models.load.make_scorer` returns the one
that fits a loaded model. ``tests/fakes.py`` holds a configurable fake for benchmark tests.

Not every model can do everything: a masked LM has no next-token distribution, so it cannot answer
a prompt. Such operations are *capabilities* (:data:`LOGLIKELIHOOD`, :data:`GENERATE`,
:data:`PAIR_PADDING`): a benchmark asks ``scorer.supports(capability)`` first and, when the answer is
no, skips itself with the reason (see :func:`biaslab.benchmarks.base.skipped_result`). Calling an
unsupported operation raises :class:`UnsupportedCapability`. The remaining operations every scorer has.

Operations and what each kind of model computes (natural logs throughout):

==========================================  ==========================================  ===========================================
operation                                   causal LM                                   masked LM
==========================================  ==========================================  ===========================================
``loglikelihood(requests)``                 ``log P(continuation | context)``           unsupported
``generate(prompts)``                       greedy continuation                         unsupported
``sentence_scores(sentences)``              ``log P(sentence | BOS)``                   PPLL: every token masked in turn
``pair_scores(first, second, method)``      both sentences' ``log P(. | BOS)``          PPLL, or MPLL (shared tokens only) per pair
``token_scores(sentences)``                 each token's ``log P(t | BOS, t_<k)``       each token's pseudo-log-probability
``cloze_scores(contexts, words)``           ``log P(" " + word | context)``             ``log P([MASK]=word | context + " " + word)``
``word_vectors(words)``                     mean input embedding of the word's sub-tokens (the embedding module: hooks apply)
``geometric_mean_probabilities(...)``       sentence probabilities with EOS pair padding  unsupported
==========================================  ==========================================  ===========================================

``with_prefix(prefix)`` returns the same scorer with a prompt variant's debiasing instruction applied
to every prompt and sentence (where it goes - before the text, or into a chat system turn - is the
scorer's business, :mod:`biaslab.scoring.formatting`). ``with_prefix_separator(separator)`` returns it
joining that instruction and the text with ``separator`` instead of one space - for a benchmark whose
paper joined them otherwise (GBEM-UA's authors concatenate them: option ``prompt_join``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from biaslab.scoring.requests import Request, Score

if TYPE_CHECKING:
    from biaslab.scoring.static_vectors import WordVectors

# Capabilities: operations only some models can do (a benchmark asks before it uses them).
LOGLIKELIHOOD = "loglikelihood"  # next-token log-probabilities of a continuation after a prompt
GENERATE = "generate"  # greedy generation after a prompt
PAIR_PADDING = "pair_padding"  # geometric-mean sentence probabilities with the GBEM-UA EOS pair padding
CAPABILITIES = (LOGLIKELIHOOD, GENERATE, PAIR_PADDING)

# Sentence-scoring methods a scorer reports per pair (the ``method`` of :class:`PairScore`).
SENTENCE_LOGLIKELIHOOD = "loglikelihood"  # causal: log P(sentence | BOS)
PPLL = "ppll"  # masked: pseudo-log-likelihood of every token (Salazar et al. 2020)
MPLL = "mpll"  # masked: pseudo-log-likelihood of the tokens the two sentences share (CrowS-Pairs)
PAIR_METHODS = (PPLL, MPLL)  # what a benchmark may ask of a pseudo-likelihood scorer per pair


class UnsupportedCapability(NotImplementedError):
    """The scorer's model cannot do this (e.g. next-token answers from a masked LM)."""


class ItemError(ValueError):
    """One input of a scorer call cannot be scored; ``index`` is its position in the call's inputs."""

    def __init__(self, index: int, problem: str) -> None:
        super().__init__(f"item {index}: {problem}")
        self.index, self.problem = index, problem


@dataclass(frozen=True, slots=True)
class SentenceScore:
    """A sentence's (pseudo-)log-likelihood and how many tokens it sums over."""

    logprob: float
    n_tokens: int


@dataclass(frozen=True, slots=True)
class TokenScore:
    """One scored token: its text (``tokenizer.decode([id])``) and its (pseudo-)log-probability."""

    text: str
    logprob: float


@dataclass(frozen=True, slots=True)
class PairScore:
    """Both sentences of a minimal pair, scored by ``method`` (:data:`SENTENCE_LOGLIKELIHOOD`, ``ppll``, ``mpll``)."""

    method: str
    first: SentenceScore
    second: SentenceScore


@dataclass(frozen=True, slots=True)
class PaddedProbability:
    """One side of a pair after EOS pair padding: ``n_pad`` EOS tokens appended, and its probability.

    ``probability`` = ``exp(log P(sentence + EOS x n_pad | BOS) / (n_tokens + n_pad))``: the pads are
    fed and scored as ordinary tokens (``n_pad = 0`` for the longer side, or when padding is off).
    """

    n_pad: int
    probability: float


@dataclass(frozen=True, slots=True)
class SentenceProbabilities:
    """Result of :meth:`Scorer.geometric_mean_probabilities`.

    ``sentences[i]``: sentence ``i`` unpadded (``logprob``, ``n_tokens``; its geometric-mean probability
    is ``exp(logprob / n_tokens)``, see :meth:`geometric_mean`). ``pairs[k]``: the two sides of pair ``k``
    after pair padding, in the order the pair was given.
    """

    sentences: list[SentenceScore]
    pairs: list[tuple[PaddedProbability, PaddedProbability]]

    def geometric_mean(self, i: int) -> float:
        import math

        s = self.sentences[i]
        return math.exp(s.logprob / s.n_tokens)


@runtime_checkable
class Scorer(Protocol):
    """What benchmarks may ask of a model (see the module docstring for the table)."""

    capabilities: frozenset[str]
    description: str  # e.g. "causal LM" / "masked LM (pseudo-log-likelihood)": for skip reasons and logs

    def supports(self, capability: str) -> bool: ...

    def with_prefix(self, prefix: str) -> "Scorer": ...

    def with_prefix_separator(self, separator: str) -> "Scorer": ...

    def loglikelihood(self, requests: Sequence[Request], desc: str | None = None) -> list[Score]: ...

    def generate(self, prompts: Sequence[str], max_new_tokens: int = 5, desc: str | None = None) -> list[str]: ...

    def sentence_scores(self, sentences: Sequence[str], desc: str | None = None) -> list[SentenceScore]: ...

    def pair_scores(
        self, first: Sequence[str], second: Sequence[str], method: str | Sequence[str] = PPLL, desc: str | None = None
    ) -> list[PairScore]: ...

    def token_scores(self, sentences: Sequence[str], desc: str | None = None) -> list[list[TokenScore]]: ...

    def cloze_scores(
        self, contexts: Sequence[str], words: Sequence[str], desc: str | None = None
    ) -> list[SentenceScore]: ...

    def word_vectors(self, words: Sequence[str]) -> "WordVectors": ...

    def geometric_mean_probabilities(
        self, sentences: Sequence[str], pairs: Sequence[tuple[int, int]] = (), pad_with_eos: bool = True,
        desc: str | None = None,
    ) -> SentenceProbabilities: ...


def unsupported_reason(benchmark: str, need: str, scorer: Scorer) -> str:
    """The one-line reason a benchmark gives when it skips itself on a scorer without a capability."""
    return f"{benchmark} needs {need}; this scorer ({scorer.description}) cannot give them: skipped"


def check_pair_methods(methods: str | Sequence[str], n: int) -> list[str]:
    """One method per pair (a single value applies to all); each must be ``ppll`` or ``mpll``."""
    out = [methods] * n if isinstance(methods, str) else list(methods)
    bad = sorted(set(out) - set(PAIR_METHODS))
    if bad or len(out) != n:
        raise ValueError(f"pair method must be one of {PAIR_METHODS} (one per pair); got {bad or len(out)}")
    return out
