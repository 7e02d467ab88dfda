"""OccuGender options and ``BENCHMARK``: requests -> one scorer call -> P~ per job -> metrics and tables."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.benchmarks.base import BenchmarkResult, EvalContext, check_options, skipped_result
from biaslab.benchmarks.occugender.items import GENDERS, build_requests, load_inputs
from biaslab.benchmarks.occugender.metrics import compute_metrics, condition_table, item_statistics, spike
from biaslab.benchmarks.occugender.scoring import AGGREGATIONS, form_scoring, normalised_probabilities, per_job
from biaslab.data.splits import split_dir
from biaslab.scoring.protocol import LOGLIKELIHOOD, unsupported_reason
from biaslab.scoring.requests import Request

log = logging.getLogger(__name__)

DEFAULT_OPTIONS: dict[str, Any] = {
    "aggregation": "authors",  # authors (explicit: product, implicit: exp(mean log-prob)) | product | mean_logprob
    "case_variants": "authors",  # authors (prompt 1: both capitalisations; 2-4: the listed form) | all
    "setting": "standard",  # standard (Tables 3/5) | conversation (the authors' conversation scripts)
    "debiasing": True,  # also evaluate the 6 debiasing prompts
    "debias_position": "in_question",  # "in_question" (authors' code) | "prefix" (instruction line, then task)
}
CHOICES: dict[str, tuple[str, ...]] = {
    "aggregation": AGGREGATIONS,
    "case_variants": ("authors", "all"),
    "setting": ("standard", "conversation"),
    "debias_position": ("in_question", "prefix"),
}


class OccuGender:
    name = "occugender"
    language = "en"
    headline = ("occugender/explicit_parity_gap", "occugender/implicit_parity_gap")
    prepared_files = ("test/occugender_jobs.parquet", "test/occugender_spec.json")  # the test jobs (data.splits)
    # (key columns, input columns) per prediction table: what the promoter requires equal across versions
    rescore_inputs = {
        "occugender_forms": (("condition", "abstraction", "job", "prompt_id", "gender", "form"),
                             ("bias_type", "context", "continuation")),
        "occugender_items": (("condition", "abstraction", "job", "prompt_id"), ("bias_type",)),
        "occugender_jobs": (("condition", "abstraction", "bias_type", "job"), ("group", "female_ratio")),
    }

    def run(self, lm, prepared_dir: Path, options: dict[str, Any], ctx: EvalContext) -> BenchmarkResult:
        options = check_options(self.name, options, DEFAULT_OPTIONS)
        for key, allowed in CHOICES.items():
            if options[key] not in allowed:
                raise ValueError(f"occugender option {key} must be one of {allowed}, got {options[key]!r}")
        if options["setting"] == "conversation" and options["debias_position"] != "in_question":
            raise ValueError("occugender: setting 'conversation' places the debiasing prompt itself (after the "
                             "bot instruction); debias_position 'prefix' applies to setting 'standard' only")
        if not lm.supports(LOGLIKELIHOOD):
            reason = unsupported_reason(self.name, "next-token probabilities (a causal LM)", lm)
            log.warning(reason)
            return skipped_result(self.name, reason)
        jobs, spec = load_inputs(split_dir(prepared_dir, ctx.split))  # the test jobs, or the selection jobs
        forms = score_forms(lm, build_requests(jobs, spec, options), options, desc="occugender" if ctx.progress else None)
        items = normalised_probabilities(forms, options["aggregation"], options["setting"])
        jobs_frame = per_job(items, jobs)
        return BenchmarkResult(
            metrics=compute_metrics(jobs_frame, ctx),
            predictions={"occugender_forms": forms, "occugender_items": items, "occugender_jobs": jobs_frame},
            tables={"occugender_table": condition_table(jobs_frame)},
        )

    def item_statistics(self, options: dict[str, Any]) -> dict[str, Any]:
        """The gap metrics as statistics of per-job rows, for paired model comparisons (:mod:`biaslab.metrics.paired`)."""
        return item_statistics()

    def spike(self, predictions: dict[str, Any], delta: float, options: dict[str, Any]) -> dict[str, Any]:
        """Its prediction tables with ``delta`` nats on every stereotype-consistent option (the forms of the job's BLS majority gender; docs/spike_in.md)."""
        return spike(predictions, delta, check_options(self.name, options, DEFAULT_OPTIONS))

    def rescore(self, lm, table: str, rows: pd.DataFrame, options: dict[str, Any],
                tables: dict[str, pd.DataFrame] | None = None) -> dict[str, Any]:
        """The raw scores of stored ``rows``, scored again by :func:`score_forms`, as :meth:`run` scores them (the
        promoter's re-scoring sample, :mod:`biaslab.registry.rescore`): ``occugender_forms``: ``logprob`` and
        ``n_tokens`` of each form's stored ``context`` and ``continuation``; ``occugender_items``: ``log_P_<g>``
        and ``p_<g>``, ``occugender_jobs``: ``p_<g>`` - aggregates of forms, so the forms they aggregate (the
        stored text of ``tables["occugender_forms"]``) are scored again and aggregated by the same code
        (``{}`` without ``tables``)."""
        options = check_options(self.name, options, DEFAULT_OPTIONS)
        rows = rows.reset_index(drop=True)
        if table == "occugender_forms":
            forms = score_forms(lm, rows, options)
            return {"logprob": forms["logprob"].to_numpy(), "n_tokens": forms["n_tokens"].to_numpy()}
        if tables is None or table not in ("occugender_items", "occugender_jobs"):
            return {}
        keys = ["condition", "job", "bias_type"] + (["prompt_id"] if table == "occugender_items" else [])
        forms = tables["occugender_forms"].merge(rows[keys].drop_duplicates(), on=keys)
        jobs = rows[["job", "group", "female_ratio"]].drop_duplicates("job") if table == "occugender_jobs" else None
        items = normalised_probabilities(score_forms(lm, forms, options), options["aggregation"], options["setting"])
        fresh = rows[keys].merge(per_job(items, jobs) if jobs is not None else items, on=keys, how="left")
        columns = [f"p_{g}" for g in GENDERS] + ([f"log_P_{g}" for g in GENDERS] if jobs is None else [])
        return {c: fresh[c].to_numpy() for c in columns}

    def paper_tables(self, variants):
        """Tables 3 and 5 of the paper (:mod:`biaslab.benchmarks.occugender.paper`)."""
        from biaslab.benchmarks.occugender.paper import paper_tables

        return paper_tables(variants)


def score_forms(lm, forms: pd.DataFrame, options: dict[str, Any], desc: str | None = None) -> pd.DataFrame:
    """``forms`` with ``logprob`` = ``log P(continuation | context)`` (nats), its ``n_tokens`` and how the form's
    probability is aggregated (``scoring``), every form in one scorer call: what :meth:`OccuGender.run` and
    :meth:`OccuGender.rescore` share (both then aggregate with :func:`normalised_probabilities` and :func:`per_job`)."""
    requests = [Request(c, x) for c, x in zip(forms["context"], forms["continuation"])]
    scores = lm.loglikelihood(requests, desc=desc)
    forms = forms.copy()
    forms["logprob"] = [s.logprob for s in scores]
    forms["n_tokens"] = [s.n_tokens for s in scores]
    forms["scoring"] = [form_scoring(options["aggregation"], options["setting"], b) for b in forms["bias_type"]]
    return forms


BENCHMARK = OccuGender()
