"""The agreement benchmark: options, one scorer call for every pair, accuracy overall and per language."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biaslab.benchmarks.base import BenchmarkResult, EvalContext, check_options
from biaslab.benchmarks.pair_preference import rescore_pairs, score_pairs, share_item_statistic, share_metric
from biaslab.data.splits import SELECT, TEST
from biaslab.metrics.paired import ItemStatistic
from biaslab.metrics.values import MetricValue

from .items import LANGUAGES, load_pairs

log = logging.getLogger(__name__)
NAME = "agreement"
TABLE = "pairs"  # written as data/predictions/<variant>/agreement__pairs.parquet
DEFAULT_OPTIONS: dict[str, Any] = {
    "languages": None,  # null = en, uk, ru
    "data_dir": None,  # null = the packaged templates/subjects/nouns; else a folder with the same three files
    "split_seed": 0,  # the selection/test split of the subjects
    "selection_fraction": 0.5,
}


def _language(lang: str | None):
    if lang is None:
        return lambda frame: frame[["pair_id", "correct"]]
    return lambda frame: frame.loc[frame["language"] == lang, ["pair_id", "correct"]]


def compute_metrics(predictions: pd.DataFrame, ctx: EvalContext) -> dict[str, MetricValue]:
    """``agreement/accuracy`` (all pairs) and ``agreement/accuracy_<lang>``, bootstrap CI over pairs."""
    metrics = {f"{NAME}/accuracy": share_metric(
        predictions, "correct", ctx, direction="higher", ideal=1.0,
        description="share of minimal pairs where the grammatical gender form has the higher log-likelihood",
    )}
    for lang in sorted(predictions["language"].unique()):
        frame = predictions[predictions["language"] == lang]
        metrics[f"{NAME}/accuracy_{lang}"] = share_metric(
            frame, "correct", ctx, direction="higher", ideal=1.0,
            description=f"share of {lang} minimal pairs where the grammatical gender form scores higher",
        )
    return metrics


def with_margin(pairs: pd.DataFrame) -> pd.DataFrame:
    """``pairs`` with ``margin`` (log P(grammatical) − log P(ungrammatical), nats) and ``correct`` (1 when the
    margin is positive; a tie is not correct) computed from its two stored scores: what ``run`` writes and what
    ``derive`` recomputes for the promoter."""
    pairs = pairs.copy()
    pairs["margin"] = pairs["logprob_grammatical"] - pairs["logprob_ungrammatical"]
    pairs["correct"] = (pairs["margin"] > 0).astype(np.int64)
    return pairs


def by_kind(predictions: pd.DataFrame) -> pd.DataFrame:
    """Accuracy and mean margin per language, kind and subject gender (where a model loses grammar)."""
    return (predictions.groupby(["language", "kind", "gender"], sort=True)
            .agg(accuracy=("correct", "mean"), mean_margin=("margin", "mean"), n=("correct", "size"))
            .reset_index())


class Agreement:
    name = NAME
    language = None  # three languages of plain sentences: no prompt prefix (as lm_quality)
    headline = (f"{NAME}/accuracy",)
    prepared_files: tuple[str, ...] = ()  # the items are packaged with the code (data/*.tsv), not prepared
    # (key columns, input columns) per prediction table: what the promoter requires equal across versions
    rescore_inputs = {TABLE: (("pair_id",), ("language", "grammatical", "ungrammatical"))}

    def run(self, lm, prepared_dir: Path, options: dict[str, Any], ctx: EvalContext) -> BenchmarkResult:
        opts = check_options(NAME, options or {}, DEFAULT_OPTIONS)
        if ctx.split not in (SELECT, TEST):
            raise ValueError(f"{NAME}: items are split into {SELECT!r} and {TEST!r}, not {ctx.split!r}")
        pairs = load_pairs(opts["data_dir"], int(opts["split_seed"]), float(opts["selection_fraction"]))
        languages = list(opts["languages"] or LANGUAGES)
        unknown = sorted(set(languages) - set(LANGUAGES))
        if unknown:
            raise ValueError(f"params.yaml evaluation.benchmarks.{NAME}.options.languages: unknown {unknown}")
        pairs = pairs[(pairs["split"] == ctx.split) & pairs["language"].isin(languages)].reset_index(drop=True)
        scored = score_pairs(lm, pairs["grammatical"].tolist(), pairs["ungrammatical"].tolist(), "ppll",
                             desc=NAME if ctx.progress else None)
        predictions = pairs.assign(
            method=scored["method"].to_numpy(), logprob_grammatical=scored["score_first"].to_numpy(),
            logprob_ungrammatical=scored["score_second"].to_numpy(),
            n_grammatical=scored["n_first"].to_numpy(), n_ungrammatical=scored["n_second"].to_numpy(),
        )
        predictions = with_margin(predictions)
        return BenchmarkResult(metrics=compute_metrics(predictions, ctx), predictions={TABLE: predictions},
                               tables={f"{NAME}_by_kind": by_kind(predictions)})

    def item_statistics(self, options: dict[str, Any]) -> dict[str, ItemStatistic]:
        """Accuracy overall and per language as statistics of the pair table (pairs resampled one by one,
        as the metrics' CIs), so the gate can pair a variant with the base pair by pair."""
        out = {f"{NAME}/accuracy": share_item_statistic(TABLE, "correct", _language(None))}
        for lang in LANGUAGES:
            out[f"{NAME}/accuracy_{lang}"] = share_item_statistic(TABLE, "correct", _language(lang))
        return out


    def derive(self, predictions: dict[str, pd.DataFrame], options: dict[str, Any]) -> dict[str, pd.DataFrame]:
        """The pair table's ``margin`` and ``correct`` (what the accuracy the gate reads counts) recomputed from its
        stored log-probabilities (:func:`with_margin`; :mod:`biaslab.registry.derived`)."""
        if TABLE not in predictions:
            return dict(predictions)
        return {**predictions, TABLE: with_margin(predictions[TABLE])}

    def rescore(self, lm, table: str, rows: pd.DataFrame, options: dict[str, Any],
                tables: dict[str, pd.DataFrame] | None = None) -> dict[str, np.ndarray]:
        """``logprob_grammatical`` and ``logprob_ungrammatical`` of stored ``rows`` of ``table``, scored again
        exactly as :meth:`run` scores them (the promoter's re-scoring sample; ``margin`` and ``correct`` follow)."""
        if table != TABLE:
            return {}
        return rescore_pairs(lm, rows, "grammatical", "ungrammatical",
                             ("logprob_grammatical", "logprob_ungrammatical"), "ppll")

BENCHMARK = Agreement()
