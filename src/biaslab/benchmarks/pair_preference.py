"""Which sentence of a minimal pair does the model prefer? Shared by RuBia and CrowS-Pairs.

A pair ``(first, second)`` gets one score per sentence, and ``first`` is preferred when its score is
higher. How a sentence is scored depends on the model kind:

* causal LM - **sentence log-likelihood** ``log P(sentence | BOS)``: ``Request("", sentence)``, as
  lm-evaluation-harness scores ``crows_pairs_english`` (empty context -> BOS/EOS prefix);
* masked LM, ``ppll`` - **pseudo-log-likelihood** of every token, masked one at a time
  (Salazar et al. 2020; RuBia's choice for the gender domain and the inclusive-language subdomain);
* masked LM, ``mpll`` - the CrowS-Pairs metric (Nangia et al. 2020, 3): the sum over the tokens the
  two sentences **share** (unmodified tokens), each masked in turn while the modified tokens stay
  visible, so the score asks "how likely is the common context given this group word" and is not
  driven by the frequency of the group words themselves. Shared tokens are found as the authors'
  ``metric.py`` does (:mod:`biaslab.scoring.shared_tokens`).

All sentences of a benchmark are scored in **one** scorer call, ``lm.pair_scores`` (the scorer decides
how: :class:`~biaslab.scoring.protocol.Scorer`; the masked scorer packs PPLL and MPLL jobs together).

``normalize="mean"`` divides each score by its number of scored tokens (the RuBia authors compare
perplexities, i.e. per-token means, via ``lmppl``); the default ``"sum"`` is the log-likelihood the
design (and lm-evaluation-harness) uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from biaslab.benchmarks.base import EvalContext
from biaslab.metrics.bootstrap import Columns, bootstrap_ci, column_mean
from biaslab.metrics.paired import ItemStatistic
from biaslab.metrics.values import Direction, MetricValue
from biaslab.scoring.protocol import PAIR_METHODS

MASKED_METHODS = PAIR_METHODS
NORMALIZATIONS = ("sum", "mean")


def score_pairs(
    lm,
    first: Sequence[str],
    second: Sequence[str],
    masked_method: str | Sequence[str] = "ppll",
    normalize: str = "sum",
    desc: str | None = None,
) -> pd.DataFrame:
    """Score both sentences of every pair with ``lm.pair_scores`` (one engine call); one row per pair.

    ``masked_method`` (one value, or one per pair) is what a pseudo-likelihood scorer uses; a causal
    scorer's score is the sentence log-likelihood whatever it says.
    Columns: ``method`` (``loglikelihood``/``ppll``/``mpll``), ``score_first``, ``score_second``
    (natural-log scores, or per-token means when ``normalize="mean"``), ``n_first``, ``n_second``
    (scored tokens), ``first_preferred`` (bool, strict ``>``).
    """
    if len(first) != len(second):
        raise ValueError(f"{len(first)} first sentences but {len(second)} second sentences")
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")
    scores = lm.pair_scores(list(first), list(second), masked_method, desc=desc)
    frame = pd.DataFrame(
        {
            "method": [s.method for s in scores],
            "score_first": [s.first.logprob for s in scores],
            "score_second": [s.second.logprob for s in scores],
            "n_first": [s.first.n_tokens for s in scores],
            "n_second": [s.second.n_tokens for s in scores],
        }
    )
    if normalize == "mean":
        frame["score_first"] = frame["score_first"] / frame["n_first"].clip(lower=1)
        frame["score_second"] = frame["score_second"] / frame["n_second"].clip(lower=1)
    frame["first_preferred"] = frame["score_first"] > frame["score_second"]
    return frame


def rescore_pairs(lm, rows: pd.DataFrame, first: str, second: str, scores: tuple[str, str],
                  masked_method: str | Sequence[str] = "ppll", normalize: str = "sum") -> dict[str, np.ndarray]:
    """The stored score columns ``scores`` (first, second) of ``rows`` recomputed by :func:`score_pairs` from
    the rows' own sentence columns ``first`` and ``second``: what a benchmark's ``rescore`` returns, so the
    promoter can check a sample of an evaluation's rows against the model (:mod:`biaslab.registry.rescore`)."""
    scored = score_pairs(lm, rows[first].tolist(), rows[second].tolist(), masked_method, normalize=normalize)
    return {scores[0]: scored["score_first"].to_numpy(), scores[1]: scored["score_second"].to_numpy()}


def share_item_statistic(table: str, column: str, rows: Callable[[pd.DataFrame], pd.DataFrame],
                         key: tuple[str, ...] = ("pair_id",)) -> ItemStatistic:
    """A :func:`share_metric` (pairs resampled one by one) as an item statistic (:mod:`biaslab.metrics.paired`)."""
    return ItemStatistic(table, rows, key, column_mean(column))


def share_metric(
    frame: pd.DataFrame,
    column: str,
    ctx: EvalContext,
    *,
    description: str,
    direction: Direction = "target",
    ideal: float | None = 0.5,
    with_ci: bool = True,
    unit: str | None = None,
) -> MetricValue:
    """Mean of a boolean column (a share of pairs), with a pair-level bootstrap CI if ``with_ci``."""
    values = frame[column].astype(float)
    statistic = column_mean(column)
    low, high = (None, None)
    if with_ci and len(frame):
        low, high = bootstrap_ci(
            frame, statistic, samples=ctx.bootstrap_samples, seed=ctx.seed, confidence=ctx.confidence, unit=unit
        )
    return MetricValue(
        value=float(values.mean()) if len(values) else float(np.nan),
        direction=direction,
        ideal=ideal,
        ci_low=low,
        ci_high=high,
        n=int(len(frame)),
        description=description,
    )
