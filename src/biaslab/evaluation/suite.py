"""Evaluate one variant on every enabled benchmark, identically for every variant.

The variant decides only *which model directory* is loaded and *which prompt prefix* (if any) is
prepended; the benchmarks, scoring engine and metrics are the same code path for all variants, so
numbers are comparable. Which benchmarks run is data: ``evaluation.benchmarks`` in params.yaml maps a
name to the module that implements it (see :mod:`biaslab.benchmarks.base`).

Outputs (all written atomically, so a killed evaluation leaves no metrics file):
* ``metrics/<variant>.json`` - every metric with direction, ideal value and bootstrap CI (what
  register, report and ``biaslab show-metrics`` read);
* ``metrics/values/<variant>.json`` - ``{metric: value}`` only: the file DVC knows as metrics, so
  ``dvc metrics show`` / ``dvc metrics diff`` print one number per metric;
* ``data/predictions/<variant>/<benchmark>__<table>.parquet`` - per-item rows to recompute any metric;
* ``reports/tables/<variant>/<benchmark>__<table>.csv`` - paper-shaped summary tables;
* one MLflow run with the metrics, direction/ideal tags, per-item tables and a readable summary, opened and
  logged by the stage (:mod:`pipelines.evaluate`): this module computes and writes, it does not log.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.atomic import atomic_dir
from biaslab.benchmarks.base import BenchmarkResult, EvalContext
from biaslab.benchmarks.registry import load_benchmark
from biaslab.config import Params, VariantConfig
from biaslab.errors import EvaluationError
from biaslab.metrics.values import MetricValue
from biaslab.mitigation.prompt import resolve_prompt_prefix
from biaslab.mitigation.lora.sft_data import TRAINED_ON_BENCHMARKS
from biaslab.outputs import metrics_file, paths, run_file
from biaslab.scoring.device import resolve_placement
from biaslab.scoring.requests import NonFiniteScoreError


@dataclass(frozen=True)
class EvaluationOutputs:
    """Where one variant's evaluation writes; paths are stated once, here."""

    metrics: Path
    values: Path
    predictions: Path
    tables: Path
    run_file: Path

    @classmethod
    def for_variant(cls, variant: str, root: Path = Path(".")) -> "EvaluationOutputs":
        return cls(
            metrics=root / paths.metrics_file(variant),
            values=root / paths.metric_values_file(variant),
            predictions=root / paths.predictions_dir(variant),
            tables=root / paths.tables_dir(variant),
            run_file=root / paths.run_file("evaluate", variant),
        )


def evaluation_datasets(benchmarks: dict[str, Any], prepared_dir: Path) -> list[Any]:
    """The prepared files the enabled benchmarks read (each ``BENCHMARK.prepared_files``), as lineage refs
    with DVC's digests: the evaluate run logs them as its MLflow dataset inputs (context ``eval``)."""
    from biaslab.tracking import datasets as lineage

    refs: dict[str, Any] = {}
    for name, entry in benchmarks.items():
        if not entry.enabled:
            continue
        for filename in getattr(load_benchmark(name, entry.module), "prepared_files", ()):
            if filename not in refs and (Path(prepared_dir) / filename).is_file():  # optional tables may be absent
                refs[filename] = lineage.prepared_file(prepared_dir, filename, "eval")
    return list(refs.values())


def set_threads(num_threads: int | None) -> int:
    """Use one intra-op thread per physical core by default (hyper-threads slow GEMMs down)."""
    import torch

    if num_threads is None:
        num_threads = max(1, (os.cpu_count() or 2))
    torch.set_num_threads(num_threads)
    return num_threads


def check_finite(benchmark: str, result: BenchmarkResult) -> None:
    """A number we did not compute must never be reported.

    Infinite values anywhere, and NaN in any log-probability / probability / score column, fail the
    evaluation with the table, row and column named (a NaN elsewhere, e.g. an undefined F1 in a
    summary row, is allowed and logged as "could not be computed").
    """
    import numpy as np

    for table, frame in result.predictions.items():
        numeric = frame.select_dtypes("number")
        if numeric.empty:
            continue
        values = numeric.to_numpy(dtype=float)
        scored = np.array([any(k in c.lower() for k in ("logprob", "prob", "score", "ll")) for c in numeric.columns])
        bad = np.isinf(values) | (np.isnan(values) & scored[None, :])
        if bad.any():
            row, col = (int(i[0]) for i in np.nonzero(bad))
            raise EvaluationError(
                f"benchmark {benchmark}: predictions table {table!r}, row {row}, column {numeric.columns[col]!r} "
                f"is {values[row, col]}: the model returned NaN/inf log-probabilities; nothing was written"
            )
    for name, mv in result.metrics.items():
        if mv.value is not None and math.isinf(mv.value):
            raise EvaluationError(f"benchmark {benchmark}: metric {name} is infinite; nothing was written")


def summary_markdown(variant: str, source: str, metrics: dict[str, MetricValue]) -> str:
    """The readable table shown in the MLflow run: metric, value, 95% CI, direction, ideal."""
    lines = [
        f"# Evaluation of variant `{variant}`",
        "",
        f"Model: `{source}`",
        "",
        "| metric | value | 95% CI | better | ideal |",
        "|---|---:|---|---|---:|",
    ]
    for name, mv in sorted(metrics.items()):
        ci = f"[{mv.ci_low:.4f}, {mv.ci_high:.4f}]" if mv.ci_low is not None and mv.ci_high is not None else ""
        value = f"{mv.value:.4f}" if mv.value is not None and math.isfinite(mv.value) else "n/a"
        better = {"higher": "higher", "lower": "lower", "target": "closer to ideal"}[mv.direction]
        ideal = "" if mv.ideal is None else f"{mv.ideal:g}"
        lines.append(f"| {name} | {value} | {ci} | {better} | {ideal} |")
    return "\n".join(lines) + "\n"


@dataclass
class VariantUnderTest:
    """One variant loaded for evaluation: its config, model, scorer and the shared evaluation context."""

    name: str
    variant: VariantConfig
    loaded: Any  # biaslab.models.load.LoadedModel
    scorer: Any
    ctx: EvalContext
    threads: int

    @property
    def tags(self) -> dict[str, str]:
        """What identifies the model evaluated (the evaluate run's tags)."""
        return {"model_fingerprint": self.loaded.fingerprint, "model_source": self.loaded.source,
                "method": self.variant.method, "model_kind": self.loaded.kind}


@dataclass
class Evaluation:
    """Every enabled benchmark's output on one variant, before anything is written or logged."""

    metrics: dict[str, MetricValue]
    predictions: dict[str, pd.DataFrame]  # "<benchmark>__<table>" -> per-item rows
    tables: dict[str, pd.DataFrame]  # "<benchmark>__<table>" -> paper-shaped summary table
    timings: dict[str, float]  # benchmark -> seconds
    summary: str  # summary_markdown()


def load_variant(params: Params, variant_name: str, root: Path = Path("."), resolved: Any = None) -> VariantUnderTest:
    """Load one variant's model and scorer on the configured device, with the evaluation context.

    ``resolved``: the variant directory as :func:`biaslab.outputs.variant_dir.resolve` read it (manifest,
    base, fingerprints - each once), when the caller has it (the evaluate stage: its skip reason comes from
    the same object); else the loader resolves the directory.
    """
    from biaslab.models.load import load_variant_model, make_scorer

    variant = params.variant(variant_name)
    ctx = EvalContext(
        seed=params.evaluation.seed,
        bootstrap_samples=params.evaluation.bootstrap_samples,
        confidence=params.evaluation.confidence,
        trained_on=TRAINED_ON_BENCHMARKS if variant.method == "lora" else (),
    )
    threads = set_threads(params.scoring.num_threads)
    device, dtype = resolve_placement(params.scoring.device, params.scoring.dtype)
    loaded = load_variant_model(
        resolved if resolved is not None else root / variant.model_dir,
        kind=params.model.kind,
        trust_remote_code=params.model.trust_remote_code,
        allow_pickle=params.model.allow_pickle,
        dtype=dtype,
        device_map=params.model.device_map,
        device=device,  # created on the scoring device in its dtype, not loaded on the CPU and moved
    )
    if params.model.device_map is None:  # with a device map, accelerate has placed the layers already
        loaded.model.to(device)
    scorer = make_scorer(loaded, params.scoring, prompt_format=params.evaluation.prompt_format)
    return VariantUnderTest(variant_name, variant, loaded, scorer, ctx, threads)


def run_params(params: Params, under_test: VariantUnderTest) -> dict[str, Any]:
    """The evaluate run's params: the variant, the evaluation settings, scoring and threads."""
    ctx = under_test.ctx
    return {"variant": under_test.variant.model_dump(), "evaluation": {
        "seed": ctx.seed, "bootstrap_samples": ctx.bootstrap_samples, "confidence": ctx.confidence,
        "prompt_format": params.evaluation.prompt_format,
        "benchmarks": {k: v.model_dump() for k, v in params.evaluation.benchmarks.items()}},
        "scoring": params.scoring.model_dump(), "threads": under_test.threads}


def run_benchmarks(params: Params, under_test: VariantUnderTest, root: Path = Path(".")) -> Evaluation:
    """Run every enabled benchmark on the loaded variant; NaN/inf scores fail with the table and row named."""
    prepared = root / params.data.prepared_dir
    all_metrics: dict[str, MetricValue] = {}
    predictions: dict[str, pd.DataFrame] = {}
    tables: dict[str, pd.DataFrame] = {}
    timings: dict[str, float] = {}
    for name, entry in params.evaluation.benchmarks.items():
        if not entry.enabled:
            continue
        benchmark = load_benchmark(name, entry.module)
        # a benchmark without a language (lm_quality: plain held-out text) never gets a prompt prefix
        language = getattr(benchmark, "language", None)
        prefix = resolve_prompt_prefix(under_test.variant, language, under_test.name) if language else ""
        lm = under_test.scorer.with_prefix(prefix) if prefix else under_test.scorer
        start = time.perf_counter()
        try:
            result = benchmark.run(lm, prepared, dict(entry.options), under_test.ctx)
        except NonFiniteScoreError as exc:
            raise EvaluationError(f"benchmark {name}: {exc}; nothing was written (NaN/inf)") from exc
        timings[name] = time.perf_counter() - start
        check_finite(name, result)
        all_metrics.update(result.metrics)
        predictions.update({f"{name}__{t}": f for t, f in result.predictions.items()})
        tables.update({f"{name}__{t}": f for t, f in result.tables.items()})
    summary = summary_markdown(under_test.name, under_test.loaded.source, all_metrics)
    return Evaluation(all_metrics, predictions, tables, timings, summary)


def write_outputs(outputs: EvaluationOutputs, under_test: VariantUnderTest, evaluation: Evaluation, run_id: str,
                  root: Path = Path(".")) -> None:
    """Predictions, tables, the metrics files and the run file of one evaluated variant, each atomically."""
    with atomic_dir(outputs.predictions) as tmp:
        for name, frame in evaluation.predictions.items():
            frame.to_parquet(tmp / f"{name}.parquet", index=False)
    with atomic_dir(outputs.tables) as tmp:
        for name, frame in evaluation.tables.items():
            frame.to_csv(tmp / f"{name}.csv")
        (tmp / "summary.md").write_text(evaluation.summary, encoding="utf-8")
    variant, loaded = under_test.variant, under_test.loaded
    metrics_file.write(
        root, under_test.name, evaluation.metrics, method=variant.method, model_dir=variant.model_dir,
        model_source=loaded.source, model_fingerprint=loaded.fingerprint, run_id=run_id,
    )
    run_file.write(outputs.run_file, run_id=run_id, model_dir=variant.model_dir,
                   fingerprint=loaded.fingerprint, variant=under_test.name)
