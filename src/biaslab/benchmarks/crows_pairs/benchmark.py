"""The CrowS-Pairs benchmark: options, one scorer call for every pair, metrics and the by-bias-type table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.benchmarks.base import BenchmarkResult, EvalContext, check_options
from biaslab.benchmarks.pair_preference import rescore_pairs, score_pairs

from .items import load_pairs
from .metrics import by_bias_type, compute_metrics, item_statistics, spike, stereotype_votes

DEFAULT_OPTIONS: dict[str, Any] = {
    "drop_duplicates": False,  # true: drop the is_duplicate pair (the harness and metric.py keep it)
    "masked_round_decimals": 3,  # the original metric's tie rule for masked LMs; null = no rounding
}


class CrowsPairs:
    name = "crows_pairs"
    language = "en"
    headline = ("crows_pairs/pct_stereotype_gender", "crows_pairs/pct_stereotype")
    prepared_files = ("crows_pairs.parquet",)
    # (key columns, input columns) per prediction table: what the promoter requires equal across versions
    rescore_inputs = {"crows_pairs_pairs": (("pair_id",), ("sent_more", "sent_less", "stereo_antistereo", "bias_type"))}

    def run(self, lm, prepared_dir: Path, options: dict[str, Any], ctx: EvalContext) -> BenchmarkResult:
        options = check_options(self.name, options, DEFAULT_OPTIONS)
        pairs = load_pairs(prepared_dir, bool(options["drop_duplicates"]))
        scored = score_pairs(
            lm, pairs["sent_more"].tolist(), pairs["sent_less"].tolist(), "mpll",
            desc="crows_pairs" if ctx.progress else None,
        ).rename(columns={"score_first": "score_more", "score_second": "score_less", "n_first": "n_more",
                          "n_second": "n_less"}).drop(columns="first_preferred")
        votes = stereotype_votes(scored, options["masked_round_decimals"])
        predictions = pd.concat([pairs, scored, votes], axis=1)
        predictions["likelihood_diff"] = (predictions["score_more"] - predictions["score_less"]).abs()
        metrics = compute_metrics(predictions, ctx)
        return BenchmarkResult(
            metrics=metrics,
            predictions={"crows_pairs_pairs": predictions},
            tables={"crows_pairs_by_bias_type": by_bias_type(predictions)},
        )

    def item_statistics(self, options: dict[str, Any]) -> dict[str, Any]:
        """The stereotype shares as statistics of per-pair rows, for paired model comparisons (:mod:`biaslab.metrics.paired`)."""
        return item_statistics()

    def spike(self, predictions: dict[str, Any], delta: float, options: dict[str, Any]) -> dict[str, Any]:
        """Its prediction tables with ``delta`` nats on every stereotype-consistent option (sent_more; docs/spike_in.md)."""
        return spike(predictions, delta, check_options(self.name, options, DEFAULT_OPTIONS))


    def rescore(self, lm, table: str, rows: pd.DataFrame, options: dict[str, Any],
                tables: dict[str, pd.DataFrame] | None = None) -> dict[str, Any]:
        """``score_more`` and ``score_less`` of stored ``rows`` of ``table``, scored again exactly as :meth:`run`
        scores them (the promoter's re-scoring sample; the votes and ``likelihood_diff`` follow from them)."""
        if table != "crows_pairs_pairs":
            return {}
        return rescore_pairs(lm, rows, "sent_more", "sent_less", ("score_more", "score_less"), "mpll")

BENCHMARK = CrowsPairs()
