"""The two value types every benchmark and the engine agree on.

A benchmark turns its items into :class:`Request` objects, the engine scores all of them in one call
and returns one :class:`Score` per request, in the same order (lm-evaluation-harness' contract).
"""

from __future__ import annotations

from dataclasses import dataclass

from biaslab.errors import BiaslabError


@dataclass(frozen=True, slots=True)
class Request:
    """Score ``log P(continuation | context)``.

    An empty ``context`` means "from the start of the text": the engine conditions on the model's
    BOS token (EOS when there is none), as lm-evaluation-harness does.
    """

    context: str
    continuation: str


@dataclass(frozen=True, slots=True)
class TokenRequest:
    """A request already tokenised: ``context_ids`` must be non-empty (it conditions the first token)."""

    context_ids: tuple[int, ...]
    continuation_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Score:
    """Result of one request.

    ``logprob``: sum of the continuation tokens' log-probabilities (natural log).
    ``n_tokens``: number of continuation tokens (for per-token means / geometric means).
    ``is_greedy``: every continuation token is the argmax of its position's distribution.
    ``token_logprobs``: each continuation token's log-probability, in order - only when asked for
    (``loglikelihood_tokens(..., per_token=True)``), else ``None``; ``logprob`` is their float64 sum.
    """

    logprob: float
    n_tokens: int
    is_greedy: bool
    token_logprobs: tuple[float, ...] | None = None


def with_prefix(request: Request, prefix: str, separator: str = " ") -> Request:
    """Prepend an instruction (prompt debiasing) to a request, keeping the continuation scored.

    ``prefix + separator + context`` when there is a context; otherwise the prefix *becomes* the context
    and the continuation starts with ``separator``, so a sentence log-likelihood turns into the sentence's
    log-likelihood given the instruction. ``separator`` is ``" "`` unless a benchmark reproduces another
    join (GBEM-UA's authors concatenate with nothing in between).
    """
    if not prefix:
        return request
    if request.context:
        return Request(f"{prefix}{separator}{request.context}", request.continuation)
    return Request(prefix, f"{separator}{request.continuation.lstrip()}")


class NonFiniteScoreError(BiaslabError, ValueError):
    """The model returned NaN/inf log-probabilities: broken weights or inputs. Never report such a number."""
