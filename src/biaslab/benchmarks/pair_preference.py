"""Which sentence of a minimal pair does the model prefer? Shared by RuBia and CrowS-Pairs.

A pair ``(first, second)`` gets one score per sentence, and ``first`` is preferred when its score is
higher. How a sentence is scored depends on the model kind:

* causal LM - **sentence log-likelihood** ``log P(sentence | BOS)``: ``Request("", sentence)``, as
  lm-evaluation-harness scores ``crows_pairs_english`` (empty context -> BOS/EOS prefix);
* masked LM, ``ppll`` - **pseudo-log-likelihood** of every token, masked one at a time
  (Salazar et al. 2020; RuBia's choice for the gender domain and the inclusive-language subdomain);
* masked LM, ``mpll`` - the CrowS-Pairs metric (Nangia et al. 2020, §3): the sum over the tokens the
  two sentences **share** (unmodified tokens), each masked in turn while the modified tokens stay
  visible, so the score asks "how likely is the common context given this group word" and is not
  driven by the frequency of the group words themselves. Shared tokens are found as the authors'
  ``metric.py`` does: ``difflib.SequenceMatcher`` on the two token-id sequences, ``equal`` opcodes.
  The authors then skip the first and last template entries (``[CLS]``/``[SEP]``); we drop every
  special-token position, which is the same for any pair whose specials align (always, in practice).

All sentences of a benchmark are scored in **one** engine call (``loglikelihood`` for causal,
``pseudo_loglikelihood`` for masked, which packs PPLL and MPLL jobs together).

``normalize="mean"`` divides each score by its number of scored tokens (the RuBia authors compare
perplexities, i.e. per-token means, via ``lmppl``); the default ``"sum"`` is the log-likelihood the
design (and lm-evaluation-harness) uses.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from biaslab.benchmarks.base import EvalContext
from biaslab.metrics.bootstrap import bootstrap_ci
from biaslab.metrics.values import Direction, MetricValue
from biaslab.scoring.requests import Request

MASKED_METHODS = ("ppll", "mpll")
NORMALIZATIONS = ("sum", "mean")


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


def score_pairs(
    lm,
    first: Sequence[str],
    second: Sequence[str],
    masked_method: str | Sequence[str] = "ppll",
    normalize: str = "sum",
    desc: str | None = None,
) -> pd.DataFrame:
    """Score both sentences of every pair; one row per pair, input order.

    ``masked_method`` (one value, or one per pair) is ignored for causal LMs.
    Columns: ``method`` (``loglikelihood``/``ppll``/``mpll``), ``score_first``, ``score_second``
    (natural-log scores, or per-token means when ``normalize="mean"``), ``n_first``, ``n_second``
    (scored tokens), ``first_preferred`` (bool, strict ``>``).
    """
    if len(first) != len(second):
        raise ValueError(f"{len(first)} first sentences but {len(second)} second sentences")
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")
    n = len(first)
    if lm.kind == "causal":
        scores = lm.loglikelihood([Request("", s) for s in [*first, *second]], desc=desc)
        methods = ["loglikelihood"] * n
        values = [s.logprob for s in scores]
        counts = [s.n_tokens for s in scores]
    elif lm.kind == "masked":
        methods = [masked_method] * n if isinstance(masked_method, str) else list(masked_method)
        bad = sorted(set(methods) - set(MASKED_METHODS))
        if bad or len(methods) != n:
            raise ValueError(f"masked_method must be one of {MASKED_METHODS} (one per pair); got {bad or len(methods)}")
        ids = lm.encode([*first, *second])
        positions: list[list[int]] = [[] for _ in range(2 * n)]
        for i, method in enumerate(methods):
            ids_a, ids_b = ids[i], ids[n + i]
            if method == "ppll":
                positions[i], positions[n + i] = lm.scorable_positions(ids_a), lm.scorable_positions(ids_b)
            else:
                pos_a, pos_b = shared_token_positions(ids_a, ids_b)
                keep_a, keep_b = set(lm.scorable_positions(ids_a)), set(lm.scorable_positions(ids_b))
                pairs = [(a, b) for a, b in zip(pos_a, pos_b) if a in keep_a and b in keep_b]
                positions[i], positions[n + i] = [a for a, _ in pairs], [b for _, b in pairs]
        values = lm.pseudo_loglikelihood(ids, positions, desc=desc)
        counts = [len(p) for p in positions]
    else:
        raise ValueError(f"unknown scorer kind {lm.kind!r} (expected 'causal' or 'masked')")
    frame = pd.DataFrame(
        {
            "method": methods,
            "score_first": values[:n],
            "score_second": values[n:],
            "n_first": counts[:n],
            "n_second": counts[n:],
        }
    )
    if normalize == "mean":
        frame["score_first"] = frame["score_first"] / frame["n_first"].clip(lower=1)
        frame["score_second"] = frame["score_second"] / frame["n_second"].clip(lower=1)
    frame["first_preferred"] = frame["score_first"] > frame["score_second"]
    return frame


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
    statistic: Callable[[pd.DataFrame], float] = lambda f: float(f[column].astype(float).mean())  # noqa: E731
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
