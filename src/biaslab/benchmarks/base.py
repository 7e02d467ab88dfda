"""The benchmark contract shared by every benchmark module.

A benchmark module defines ``BENCHMARK = SomeBenchmark()`` with:

* ``name`` and ``language`` (``"en"``, ``"uk"``, ``"ru"``) - the language picks the prompt-debiasing
  prefix of a prompt variant;
* ``headline``: the few metric names (``<name>/<metric>``) a reader looks at first - the benchmark's main
  accuracy and bias numbers; ``biaslab compare`` and the report's comparison table show these;
* ``prepared_files``: the files of ``data/prepared`` the benchmark reads (each evaluate run logs them as
  its MLflow datasets, with their DVC digests); a benchmark a choice reads has its items in the split
  folders (``test/…``; :mod:`biaslab.data.splits`) and reads the set ``ctx.split`` names;
* ``run(lm, prepared_dir, options, ctx) -> BenchmarkResult``: read its prepared tables from
  ``prepared_dir`` (written by the ``prepare`` stage), score its items with ``lm`` - a
  :class:`~biaslab.scoring.protocol.Scorer`, the only way a benchmark reaches the model (never its
  ``.model``, ``.tokenizer`` or kind: a benchmark that needs what only some models can do asks
  ``lm.supports(capability)`` and otherwise returns :func:`skipped_result` with the reason) - and
  compute metrics;
* optionally ``item_statistics(options) -> dict[str, ItemStatistic]``: metrics as statistics of the
  per-item ``predictions`` rows (:class:`~biaslab.metrics.paired.ItemStatistic`: table, rows, item key,
  resampling unit, statistic), so that two models scored on the same items can be compared item by item
  (the calibrate stage's paired reading); each must give its metric's value and CI on the full table;
* optionally ``spike(predictions, delta, options) -> predictions``: its stored prediction tables (keyed by
  table name) as if every stereotype-consistent option had scored ``delta`` nats more, with every derived
  column recomputed - what re-scoring through :class:`~biaslab.scoring.spiked.SpikedScorer` would give
  (the calibrate stage's spike-in self-test, docs/spike_in.md);
* ``rescore(lm, table, rows, options, tables=None) -> dict[column, array]`` (every biaslab benchmark has one):
  the stored raw-score columns of ``rows`` of prediction table ``table`` (the log-probabilities every other
  column derives from) recomputed by the same function ``run`` scores them with; ``tables`` (the evaluation's
  other prediction tables of the benchmark) gives a pair or aggregate row its items' stored text; ``{}`` for a
  table without such columns. The promoter checks a seeded sample of an evaluation's rows with it
  (:mod:`biaslab.registry.rescore`);
* optionally ``rescore_inputs``: ``{table: (key columns, input columns)}`` of its prediction tables - what names
  a row and what the model scored for it (its text, the items a pair row names) or a metric compares it with (a
  label). ``rescore`` scores whatever text is stored, so the promoter also requires every version's table to hold
  the same keys and, per key, the same inputs (a forged easier text with honest scores of it is refused); a
  benchmark that declares none (the default: nothing) has its inputs reported as not compared;
* optionally ``derive(predictions, options) -> predictions``: its stored prediction tables (keyed by table name)
  with every column that follows from other stored columns by arithmetic (votes, margins, gaps, labels, pair
  tables' copies of their items' scores) recomputed by the same code ``run`` computes them with; a benchmark
  with ``spike`` need not define it (a spike of 0 nats is that recomputation, :func:`derive_of`). The promoter
  requires every stored derived column to equal its recomputation (:mod:`biaslab.registry.derived`): the raw
  scores are checked on a sample, the arithmetic over every row;
* optionally ``paper_tables(variants) -> list[PaperTable]``: the seed paper's tables in the paper's own
  layout, built from every evaluated variant's metrics and tables (the ``report`` stage renders them
  into ``reports/paper/<paper>.md`` and ``.csv``; it knows no benchmark by name).

``options`` is the benchmark's ``options`` mapping from params.yaml; unknown options must raise.
Metric names are ``<benchmark>/<metric>`` (e.g. ``gbem_ua/qa_diff_fem``) so all benchmarks share one
MLflow run without collisions. ``predictions`` keeps what is needed to recompute every metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import pandas as pd

from biaslab.errors import MissingInputError
from biaslab.metrics.values import MetricValue
from biaslab.scoring.protocol import Scorer


@dataclass(frozen=True)
class EvalContext:
    """What every benchmark may need besides the model: seeds, bootstrap settings, what the variant saw in training."""

    seed: int = 0
    bootstrap_samples: int = 1000
    confidence: float = 0.95
    progress: bool = True
    # benchmarks whose items the evaluated variant was trained on (a LoRA variant: ("gbem_ua",)), so a
    # benchmark can refuse to score its training items as if they were held out
    trained_on: tuple[str, ...] = ()
    # which item set a benchmark with a selection/test split reads (GBEM-UA, OccuGender, lm_quality:
    # biaslab.data.splits): "test" for every verdict (evaluate, calibrate), "select" for a choice
    split: str = "test"


@dataclass
class BenchmarkResult:
    metrics: dict[str, MetricValue]
    predictions: dict[str, pd.DataFrame] = field(default_factory=dict)  # table name -> per-item rows
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # paper-shaped summary tables


class Benchmark(Protocol):
    name: str
    language: str | None  # None: plain text in several languages, never given a prompt prefix (lm_quality)
    headline: tuple[str, ...]
    prepared_files: tuple[str, ...]

    def run(self, lm: Scorer, prepared_dir: Path, options: dict[str, Any], ctx: EvalContext) -> BenchmarkResult: ...


@dataclass(frozen=True)
class VariantEvaluation:
    """What the ``report`` stage hands a benchmark about one evaluated variant.

    ``metrics``: every metric of the variant (all benchmarks; a benchmark reads its own ``<name>/...``
    keys). ``tables``: this benchmark's tables of the variant as written by the evaluate stage
    (``reports/tables/<variant>/<benchmark>__<table>.csv``), keyed by ``<table>`` (prefix removed).
    """

    metrics: Mapping[str, MetricValue]
    tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)


@dataclass(frozen=True)
class PaperTable:
    """One table of a seed paper, in the paper's own rows and columns, for the evaluated variants.

    ``paper`` groups tables into ``reports/paper/<paper>.md`` (``gbem_ua``, ``occugender``, ``rubia``,
    ``genderlex``); several benchmarks may contribute to one paper. ``key`` names the CSV
    (``reports/paper/<paper>/<key>.csv``). ``published`` holds the paper's own numbers for its models,
    shown beside ours for orientation only (``published_source`` says where they come from, e.g.
    "Table 2 of the paper"); ``reproduce`` is the command that runs the paper's setting with the paper's
    model (a ``dvc exp run -S ...`` line; the first non-empty one per paper is shown).
    """

    paper: str
    key: str
    title: str
    frame: pd.DataFrame
    published: pd.DataFrame | None = None
    published_source: str = ""
    notes: str = ""
    reproduce: str = ""


class ItemStatistics(Protocol):
    """Implemented by benchmarks whose metrics can be recomputed per item (optional part of the contract)."""

    def item_statistics(self, options: dict[str, Any]) -> dict[str, Any]: ...


class Spikes(Protocol):
    """Implemented by benchmarks that can add a known bias to their stored predictions (optional part of the contract)."""

    def spike(self, predictions: dict[str, pd.DataFrame], delta: float, options: dict[str, Any]) -> dict[str, pd.DataFrame]: ...


RescoreInputs = Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]]  # table -> (key columns, input columns)


class DeclaresRescoreInputs(Protocol):
    """Implemented by benchmarks whose prediction tables' inputs the promoter compares across versions (optional
    part of the contract; every biaslab benchmark declares its tables)."""

    rescore_inputs: RescoreInputs


def rescore_inputs_of(benchmark: Any) -> RescoreInputs:
    """``benchmark``'s declared ``rescore_inputs``, or ``{}`` for one that declares none (a custom module)."""
    return getattr(benchmark, "rescore_inputs", None) or {}


class Derives(Protocol):
    """Implemented by benchmarks whose stored derived columns the promoter recomputes (optional part of the
    contract; a benchmark with ``spike`` is read through it at 0 nats, :func:`derive_of`)."""

    def derive(self, predictions: dict[str, pd.DataFrame], options: dict[str, Any]) -> dict[str, pd.DataFrame]: ...


def derive_of(benchmark: Any) -> Any:
    """How ``benchmark`` recomputes its tables' derived columns from their stored raw scores: its ``derive``, else
    its ``spike`` at 0 nats (a spike recomputes every derived column of the tables it touches), else ``None``
    (a custom module that offers neither: its derived columns are not checked, and the promoter says so)."""
    if callable(getattr(benchmark, "derive", None)):
        return benchmark.derive
    if callable(getattr(benchmark, "spike", None)):
        return lambda predictions, options: benchmark.spike(predictions, 0.0, options)
    return None


class PaperTables(Protocol):
    """Implemented by benchmarks that reproduce a seed paper's tables (optional part of the contract)."""

    def paper_tables(self, variants: Mapping[str, VariantEvaluation]) -> list[PaperTable]: ...


def skipped_result(benchmark: str, reason: str) -> BenchmarkResult:
    """The result of a benchmark that cannot run on this model (a causal-LM benchmark on a masked LM).

    No metrics, and one table ``<benchmark>_skipped`` holding the ``reason``, so an all-benchmarks
    evaluation still completes and the reason lands in ``reports/tables/<variant>/`` next to the
    other tables. The caller reports the reason too (warning or log), as it sees fit.
    """
    return BenchmarkResult(metrics={}, tables={f"{benchmark}_skipped": pd.DataFrame({"reason": [reason]})})


def check_options(benchmark: str, options: dict[str, Any], allowed: dict[str, Any]) -> dict[str, Any]:
    """Merge ``options`` over ``allowed`` defaults; an unknown key is an error naming the benchmark."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(
            f"params.yaml evaluation.benchmarks.{benchmark}.options: unknown key(s) {unknown}; "
            f"allowed: {sorted(allowed)}"
        )
    return {**allowed, **options}


def read_prepared_table(prepared_dir: Path, name: str, required: Sequence[str]) -> pd.DataFrame:
    """Read ``<prepared_dir>/<name>.parquet`` and check it has the ``required`` columns (named in the error)."""
    path = Path(prepared_dir) / f"{name}.parquet"
    if not path.is_file():
        raise MissingInputError(f"{path}: not found; run the `prepare` stage first")
    frame = pd.read_parquet(path)
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing} (see docs/prepared_schema.md)")
    return frame
