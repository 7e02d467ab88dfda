"""LM quality ("do no harm"): held-out perplexity and bits per character per language.

A mitigation that removes bias by damaging the model is no mitigation, so every variant is also scored on
held-out text (``data/prepared/test/lm_heldout.parquet``: the chunks of the test half of the held-out documents,
:mod:`biaslab.data.splits`; see :mod:`biaslab.data.lm_heldout`: by default corpus text the default model never
trained on, one held-out document per corpus document). Each chunk is scored from BOS as one request,
``log P(chunk | BOS)`` summed over its tokens, and per language:

* ``lm_quality/ppl_<lang>`` = ``exp(Σ NLL / Σ tokens)`` — token perplexity (comparable between variants
  that share a tokenizer, i.e. all variants of one base model);
* ``lm_quality/bits_per_char_<lang>`` = ``Σ NLL / ln 2 / Σ characters`` — tokenizer-independent;
* ``lm_quality/bits_per_char`` — all languages pooled (characters as weights).

All lower is better, each with a percentile-bootstrap CI resampling **documents** (``language``,
``document``: a document's chunks are drawn together, since chunks of one text are not independent; ratio
estimator: numerator and denominator resampled together). The text is scored without a prompt prefix: a prompt variant's weights
are the base model's, so its LM quality is the base's by construction (the benchmark declares no
language). Needs a causal LM; a masked LM is skipped with the reason logged.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biaslab.benchmarks.base import BenchmarkResult, EvalContext, check_options, read_prepared_table, skipped_result
from biaslab.data.splits import split_dir
from biaslab.metrics.bootstrap import Columns, bootstrap_ci
from biaslab.metrics.paired import ItemStatistic
from biaslab.metrics.values import MetricValue
from biaslab.scoring.protocol import LOGLIKELIHOOD, unsupported_reason

log = logging.getLogger(__name__)
NAME = "lm_quality"
DEFAULT_OPTIONS: dict[str, Any] = {"languages": None}  # null = every language of the prepared table
REQUIRED_COLUMNS = ("language", "document", "chunk", "text")
CHUNK = ("language", "document", "chunk")  # names one scored chunk
DOCUMENT = ("language", "document")  # the bootstrap's resampling unit: a held-out document


def _nll(frame: Columns) -> float:
    return float(-np.asarray(frame["logprob"]).sum())


def ppl(frame: Columns) -> float:
    """Token perplexity of the chunks in ``frame``."""
    return math.exp(_nll(frame) / np.asarray(frame["n_tokens"]).sum())


def bits_per_char(frame: Columns) -> float:
    """Bits per character of the chunks in ``frame``."""
    return _nll(frame) / math.log(2) / np.asarray(frame["n_chars"]).sum()


def _chunks(table: pd.DataFrame) -> pd.DataFrame:
    return table[[*CHUNK, "logprob", "n_tokens", "n_chars"]]


def _language_chunks(lang: str):
    return lambda table: _chunks(table[table["language"] == lang])


def compute_metrics(scored: pd.DataFrame, ctx: EvalContext) -> dict[str, MetricValue]:
    metrics: dict[str, MetricValue] = {}
    slim = scored[[*DOCUMENT, "logprob", "n_tokens", "n_chars"]]

    def add(name: str, frame: pd.DataFrame, statistic, description: str) -> None:
        low, high = bootstrap_ci(frame, statistic, samples=ctx.bootstrap_samples, seed=ctx.seed,
                                 confidence=ctx.confidence, unit=list(DOCUMENT))
        metrics[f"{NAME}/{name}"] = MetricValue(statistic(frame), "lower", None, low, high, int(len(frame)),
                                                f"{description}; {frame.drop_duplicates(list(DOCUMENT)).shape[0]} "
                                                "documents resampled")

    for lang, frame in slim.groupby("language", sort=True):
        add(f"ppl_{lang}", frame, ppl, f"token perplexity on held-out {lang} text (chunks scored from BOS)")
        add(f"bits_per_char_{lang}", frame, bits_per_char, f"bits per character on held-out {lang} text")
    add("bits_per_char", slim, bits_per_char, "bits per character on the held-out text of all languages")
    return metrics


def score_chunks(lm, chunks: pd.DataFrame, desc: str | None = None) -> pd.DataFrame:
    """``chunks`` with ``logprob`` (``log P(text | BOS)``, nats), ``n_tokens`` and ``n_chars`` of each chunk's
    ``text``, all chunks in one scorer call: what :meth:`LmQuality.run` and :meth:`LmQuality.rescore` share."""
    scores = lm.sentence_scores(list(chunks["text"]), desc=desc)
    return chunks.assign(
        logprob=[s.logprob for s in scores], n_tokens=[s.n_tokens for s in scores],
        n_chars=chunks["text"].str.len().to_numpy(dtype=np.int64),
    )


class LmQuality:
    name = NAME
    language = None  # no prompt prefix: plain held-out text
    headline = (f"{NAME}/bits_per_char",)
    prepared_files = ("test/lm_heldout.parquet",)  # the test chunks (data.splits)
    # (key columns, input columns) per prediction table: what the promoter requires equal across versions
    rescore_inputs = {"lm_quality_chunks": (CHUNK, ("text",))}

    def run(self, lm, prepared_dir: Path, options: dict[str, Any], ctx: EvalContext) -> BenchmarkResult:
        opts = check_options(NAME, options or {}, DEFAULT_OPTIONS)
        if not lm.supports(LOGLIKELIHOOD):
            reason = unsupported_reason(NAME, "next-token log-probabilities of plain text (a causal LM)", lm)
            log.warning(reason)
            return skipped_result(NAME, reason)
        folder = split_dir(prepared_dir, ctx.split)  # the test chunks, or the selection chunks
        if not (folder / "lm_heldout.parquet").is_file():
            reason = f"{NAME}: no held-out text prepared (data.lm_heldout.languages is empty)"
            log.warning(reason)
            return skipped_result(NAME, reason)
        chunks = read_prepared_table(folder, "lm_heldout", REQUIRED_COLUMNS)
        if opts["languages"] is not None:
            chunks = chunks[chunks["language"].isin(list(opts["languages"]))]
            if chunks.empty:
                raise ValueError(f"lm_quality: no held-out text for languages {opts['languages']}")
        scored = score_chunks(lm, chunks.reset_index(drop=True), desc=NAME if ctx.progress else None)
        metrics = compute_metrics(scored, ctx)
        table = pd.DataFrame([{"metric": k.split("/", 1)[1], **v.to_dict()} for k, v in metrics.items()])
        # the chunk text stays in the table: the promoter re-scores a sample of stored chunks (rescore)
        return BenchmarkResult(metrics=metrics, predictions={"lm_quality_chunks": scored},
                               tables={"lm_quality": table})

    def rescore(self, lm, table: str, rows: pd.DataFrame, options: dict[str, Any],
                tables: dict[str, pd.DataFrame] | None = None) -> dict[str, Any]:
        """``logprob``, ``n_tokens`` and ``n_chars`` of stored ``rows`` of ``lm_quality_chunks``, each stored chunk
        ``text`` scored again by :func:`score_chunks` as :meth:`run` scores it (the promoter's re-scoring sample,
        :mod:`biaslab.registry.rescore`); perplexity and bits per character follow from them (``n_chars`` is the
        divisor of bits per character, so a stored count is checked against the text too). The stored text is
        what is re-scored, so the check does not depend on how documents were chunked."""
        if table != "lm_quality_chunks":
            return {}
        scored = score_chunks(lm, rows.reset_index(drop=True))
        return {c: scored[c].to_numpy() for c in ("logprob", "n_tokens", "n_chars")}

    def derive(self, predictions: dict[str, pd.DataFrame], options: dict[str, Any]) -> dict[str, pd.DataFrame]:
        """Nothing to recompute: every stored column of ``lm_quality_chunks`` is the text, a name, or a raw score
        (``logprob``, ``n_tokens``, ``n_chars``: the re-scoring sample checks those); bits per character is
        computed from them where it is read, never stored per row (:mod:`biaslab.registry.derived`)."""
        return dict(predictions)

    def item_statistics(self, options: dict[str, Any]) -> dict[str, ItemStatistic]:
        """Pooled bits per character (and per language) as statistics of the scored chunks, paired chunk by chunk
        and resampled by document as the metrics' CIs, so the promotion gate pairs a variant's held-out text with
        the base's."""
        out = {f"{NAME}/bits_per_char": ItemStatistic("lm_quality_chunks", _chunks, CHUNK, bits_per_char, DOCUMENT)}
        for lang in ("en", "uk", "ru"):
            out[f"{NAME}/bits_per_char_{lang}"] = ItemStatistic("lm_quality_chunks", _language_chunks(lang), CHUNK,
                                                                bits_per_char, DOCUMENT)
        return out


BENCHMARK = LmQuality()
