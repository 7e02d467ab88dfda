"""The RuBia benchmark: options, one scorer call for every pair, metrics and the paper's table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.benchmarks.base import BenchmarkResult, EvalContext, check_options
from biaslab.benchmarks.pair_preference import NORMALIZATIONS, score_pairs

from .items import load_pairs, masked_methods
from .metrics import compute_metrics, item_statistics, spike

DEFAULT_OPTIONS: dict[str, Any] = {
    "lowercase": False,  # true: lower-case both sentences (the paper's preprocessing; the released file is not)
    "drop_defective": False,  # true: leave out the malformed pair 1370 and the identical pair 2161 (authors score them)
    "normalize": "sum",  # "mean": per-token scores, as the authors' perplexity comparison
    "ppll_domains": ["gender"],  # masked LMs: domains scored with PPLL (others: MPLL)
    "ppll_subdomains": ["lgbtq/freeform_gendergap"],  # masked LMs: <domain>/<subdomain> also scored with PPLL
    "exclude_from_aggregates": ["lgbtq/freeform_gendergap"],  # left out of domain and overall scores
}


class RuBia:
    name = "rubia"
    language = "ru"
    headline = ("rubia/pro_share/gender", "rubia/pro_share")
    prepared_files = ("rubia.parquet",)
    # (key columns, input columns) per prediction table: what the promoter requires equal across versions
    rescore_inputs = {"rubia_pairs": (("pair_id",), ("pro", "anti", "domain", "subdomain"))}

    def run(self, lm, prepared_dir: Path, options: dict[str, Any], ctx: EvalContext) -> BenchmarkResult:
        options = check_options(self.name, options, DEFAULT_OPTIONS)
        if options["normalize"] not in NORMALIZATIONS:
            raise ValueError(f"rubia option normalize must be one of {NORMALIZATIONS}")
        for flag in ("lowercase", "drop_defective"):
            if not isinstance(options[flag], bool):
                raise ValueError(f"rubia option {flag} must be true or false")
        pairs = load_pairs(prepared_dir, options["drop_defective"])
        scored = score_rubia_pairs(lm, pairs, options, desc="rubia" if ctx.progress else None)
        predictions = pd.concat([pairs, scored], axis=1)
        key = predictions["domain"] + "/" + predictions["subdomain"]
        predictions["in_aggregates"] = ~predictions["is_duplicate"] & ~key.isin(options["exclude_from_aggregates"])
        metrics, table = compute_metrics(predictions, ctx)
        return BenchmarkResult(
            metrics=metrics, predictions={"rubia_pairs": predictions}, tables={"rubia_scores": table}
        )

    def item_statistics(self, options: dict[str, Any]) -> dict[str, Any]:
        """The pro-shares as statistics of per-pair rows, for paired model comparisons (:mod:`biaslab.metrics.paired`)."""
        return item_statistics()

    def spike(self, predictions: dict[str, Any], delta: float, options: dict[str, Any]) -> dict[str, Any]:
        """Its prediction tables with ``delta`` nats on every stereotype-consistent option (the pro-trope sentence; docs/spike_in.md)."""
        return spike(predictions, delta, check_options(self.name, options, DEFAULT_OPTIONS))

    def rescore(self, lm, table: str, rows: pd.DataFrame, options: dict[str, Any],
                tables: dict[str, pd.DataFrame] | None = None) -> dict[str, Any]:
        """``score_pro`` and ``score_anti`` of stored ``rows`` of ``rubia_pairs``, scored again by :meth:`run`'s own
        :func:`score_rubia_pairs` from the rows' ``pro``/``anti``/``domain``/``subdomain`` (lower-casing, PPLL or
        MPLL per pair and normalisation as the options say; the promoter's re-scoring sample,
        :mod:`biaslab.registry.rescore`), and ``prefers_pro`` that follows from them: the column the pro-shares and
        the gate's spill-over statistic read, checked as stored."""
        if table != "rubia_pairs":
            return {}
        scored = score_rubia_pairs(lm, rows.reset_index(drop=True), check_options(self.name, options, DEFAULT_OPTIONS))
        return {c: scored[c].to_numpy() for c in ("score_pro", "score_anti", "prefers_pro")}

    def paper_tables(self, variants):
        """The paper's Table 1 for every evaluated variant (:mod:`biaslab.benchmarks.rubia.paper`)."""
        from biaslab.benchmarks.rubia.paper import paper_tables

        return paper_tables(variants)


def score_rubia_pairs(lm, pairs: pd.DataFrame, options: dict[str, Any], desc: str | None = None) -> pd.DataFrame:
    """Both sentences of every pair scored in one scorer call (:func:`score_pairs`): ``method``, ``score_pro``,
    ``score_anti``, ``n_pro``, ``n_anti``, ``prefers_pro``, one row per pair of ``pairs`` (its ``pro``, ``anti``,
    ``domain``, ``subdomain``), as :meth:`RuBia.run` and :meth:`RuBia.rescore` both score them."""
    pro, anti = pairs["pro"].tolist(), pairs["anti"].tolist()
    if options["lowercase"]:
        pro, anti = [t.lower() for t in pro], [t.lower() for t in anti]
    scored = score_pairs(lm, pro, anti, masked_methods(pairs, options), normalize=options["normalize"], desc=desc)
    return scored.rename(columns={"score_first": "score_pro", "score_second": "score_anti", "n_first": "n_pro",
                                  "n_second": "n_anti", "first_preferred": "prefers_pro"})


BENCHMARK = RuBia()
