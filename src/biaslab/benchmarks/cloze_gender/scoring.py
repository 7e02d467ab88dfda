"""ClozeGender requests to the scorer: ClozeLast pronoun probabilities and whole-sentence probabilities.

Each kind of request goes to the scorer (:class:`~biaslab.scoring.protocol.Scorer`) in one call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from biaslab.scoring.protocol import ItemError

# dataset -> per scored sentence column: (sentence column, its log-prob column, its probability column) in the
# prediction table; the datasets in the order ``run`` queues their sentences for its one scorer call
SENTENCE_COLUMNS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "winobias": (("pro_sentence", "logprob_pro", "prob_pro"), ("anti_sentence", "logprob_anti", "prob_anti")),
    "winogender": (("sentence_male", "logprob_male", "prob_male"), ("sentence_female", "logprob_female", "prob_female"),
                   ("sentence_neutral", "logprob_neutral", "prob_neutral")),
    "genderlex_wino": (("sent_m", "logprob_m", "p_m"), ("sent_w", "logprob_w", "p_w")),
    "crows_pairs": (("sent_m", "logprob_m", "p_m"), ("sent_w", "logprob_w", "p_w")),
}


@dataclass
class SentenceScores:
    """Per-sentence probability (as defined by ``sentence_prob``) with its log-prob sum and token count."""

    prob: dict[str, float]
    logprob: dict[str, float]
    n_tokens: dict[str, int]


def score_cloze(lm, items: pd.DataFrame) -> list:
    """ClozeLast scores, all ``last_m`` rows then all ``last_w`` rows, in one scorer call (``cloze_scores``).

    Causal: ``log P(" " + last word | prefix)``. Masked: ``log P([MASK]... = pronoun | sentence)`` with the
    pronoun's tokens masked (:meth:`~biaslab.scoring.masked.MaskedScorer.cloze_scores`).
    """
    n = len(items)
    contexts = list(items["prefix"]) * 2
    words = list(items["last_m"]) + list(items["last_w"])
    try:
        return lm.cloze_scores(contexts, words)
    except ItemError as exc:  # name the genderlex row the scorer could not handle
        column = "last_m" if exc.index < n else "last_w"
        raise ValueError(f"genderlex.parquet row {exc.index % n} ({column}): {exc.problem}") from None


def predicts_first_token(lm) -> bool:
    """Whether the authors' ``prob_mean`` would score a sentence's first token with this scorer.

    Their forward pass starts at the tokenizer's output: the first token is predicted only after a BOS
    the tokenizer adds. A causal scorer reports that as its resolved ``format.add_bos`` (a prompt prefix or
    chat template also precedes the sentence); a scorer without a prompt format (masked) predicts every token.
    """
    fmt = getattr(lm, "format", None)
    return fmt is None or bool(fmt.add_bos or fmt.prefix or fmt.chat)


def score_sentences(lm, sentences: Sequence[str], mode: str) -> SentenceScores:
    """Score unique sentences in one scorer call: geometric mean of token probabilities, or the authors' mean.

    ``geometric``: ``exp(log P / n_tokens)`` from ``lm.sentence_scores`` (causal: from BOS; masked: PPLL).
    ``authors``: the arithmetic mean of token probabilities leaving out the ``"."`` token
    (``meanpro_metric.prob_mean``), from ``lm.token_scores``; ``logprob`` is still the sum over every token.
    Like the authors' ``model(tokenizer.encode(text))``, the sentence's first token is predicted only when
    something precedes it: a BOS the tokenizer adds (``scoring.add_bos``), a prompt prefix, or a masked
    LM's own context (:func:`predicts_first_token`); GPT-2 and the default model never predict it.
    """
    unique = list(dict.fromkeys(sentences))
    if not unique:
        return SentenceScores({}, {}, {})
    if mode == "geometric":
        scores = lm.sentence_scores(unique)
        for s, sc in zip(unique, scores):
            if sc.n_tokens == 0:
                raise ValueError(f"sentence has no scorable tokens: {s!r}")
        logprob = {s: sc.logprob for s, sc in zip(unique, scores)}
        n_tokens = {s: sc.n_tokens for s, sc in zip(unique, scores)}
        prob = {s: math.exp(logprob[s] / n_tokens[s]) for s in unique}
        return SentenceScores(prob, logprob, n_tokens)
    tokens = lm.token_scores(unique)
    skip = 0 if predicts_first_token(lm) else 1
    prob, logprob, n_tokens = {}, {}, {}
    for s, scored in zip(unique, tokens):
        if not scored:
            raise ValueError(f"sentence has no scorable tokens: {s!r}")
        kept = [math.exp(t.logprob) for t in scored[skip:] if t.text != "."]
        logprob[s] = float(sum(t.logprob for t in scored))
        n_tokens[s] = len(kept)
        prob[s] = float(np.mean(kept)) if kept else float("nan")
    return SentenceScores(prob, logprob, n_tokens)


def queued_sentences(tables: dict[str, pd.DataFrame]) -> list[str]:
    """Every sentence of the sentence-scored datasets among ``tables``, in :data:`SENTENCE_COLUMNS` order."""
    return [s for d, sides in SENTENCE_COLUMNS.items() if d in tables for column, _, _ in sides for s in tables[d][column]]


def rescore_sentences(lm, rows: pd.DataFrame, dataset: str, mode: str) -> dict[str, np.ndarray]:
    """The log-prob and probability columns of stored ``rows`` of ``dataset``'s prediction table, their sentences
    scored again by :func:`score_sentences` (as ``run`` scores them, mode ``sentence_prob``)."""
    scores = score_sentences(lm, queued_sentences({dataset: rows}), mode)
    out: dict[str, np.ndarray] = {}
    for column, logprob, prob in SENTENCE_COLUMNS[dataset]:
        out[logprob] = rows[column].map(scores.logprob).to_numpy(dtype=float)
        out[prob] = rows[column].map(scores.prob).to_numpy(dtype=float)
    return out


def rescore_cloze(lm, rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """``logprob_m``/``logprob_w`` and ``n_tokens_m``/``n_tokens_w`` of stored GenderLex rows: their ClozeLast
    items rebuilt from ``sent_m``/``sent_w`` (:func:`~.items.cloze_items`) and scored by :func:`score_cloze`."""
    from .items import cloze_items

    items = cloze_items(rows.reset_index(drop=True))
    scores, n = score_cloze(lm, items), len(items)
    return {"logprob_m": np.array([s.logprob for s in scores[:n]], dtype=float),
            "logprob_w": np.array([s.logprob for s in scores[n:]], dtype=float),
            "n_tokens_m": np.array([s.n_tokens for s in scores[:n]], dtype=float),
            "n_tokens_w": np.array([s.n_tokens for s in scores[n:]], dtype=float)}
