"""Which code implements a benchmark: ``evaluation.benchmarks.<name>.module`` in params.yaml names a module
whose ``BENCHMARK`` object (:class:`biaslab.benchmarks.base.Benchmark`) runs it. Which benchmarks run is
data, so adding one is a module and a params entry, no code of the callers (evaluate, calibrate, the
paper tables)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any

from biaslab.benchmarks.base import Benchmark
from biaslab.errors import EvaluationError


def load_benchmark(name: str, module: str) -> Benchmark:
    """Import ``module`` and return its ``BENCHMARK`` object, with a clear error when it is missing."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise EvaluationError(
            f"params.yaml evaluation.benchmarks.{name}.module: cannot import {module!r} ({exc})"
        ) from exc
    benchmark = getattr(mod, "BENCHMARK", None)
    if benchmark is None:
        raise EvaluationError(f"{module}: defines no BENCHMARK object (see biaslab.benchmarks.base)")
    return benchmark


def benchmark_of(benchmarks: Mapping[str, Any], name: str) -> tuple[Benchmark, dict[str, Any]] | None:
    """The benchmark object and options behind a prediction table's prefix ``name``: its entry of
    ``evaluation.benchmarks`` (``benchmarks``), else its default module ``biaslab.benchmarks.<name>`` with default
    options; ``None`` when no module of that name can be loaded (what the promoter's checks name as not checked)."""
    entry = benchmarks.get(name)
    module = entry.module if entry is not None else f"biaslab.benchmarks.{name}"
    try:
        return load_benchmark(name, module), dict(entry.options) if entry is not None else {}
    except EvaluationError:
        return None


def item_statistics_of(benchmarks: Mapping[str, Any] | None, metrics: Iterable[str]) -> dict[str, tuple[str, Any]]:
    """``{metric: (benchmark, ItemStatistic)}`` for the ``metrics`` whose benchmark recomputes them per item.

    ``benchmarks``: ``evaluation.benchmarks`` of params.yaml (module and options per name; a disabled one offers
    nothing), or ``None`` for each benchmark's default module ``biaslab.benchmarks.<name>`` with its default
    options. A metric is ``<benchmark>/...``; a benchmark without ``item_statistics`` offers none.
    """
    out: dict[str, tuple[str, Any]] = {}
    offered: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        name = metric.split("/", 1)[0]
        if name not in offered:
            entry = None if benchmarks is None else benchmarks.get(name)
            if benchmarks is not None and (entry is None or not entry.enabled):
                offered[name] = {}
                continue
            module = entry.module if entry is not None else f"biaslab.benchmarks.{name}"
            options = dict(entry.options) if entry is not None else {}
            try:
                method = getattr(load_benchmark(name, module), "item_statistics", None)
            except EvaluationError:
                if benchmarks is not None:
                    raise
                method = None  # no default module of that name: nothing to pair it with
            offered[name] = method(options) if method else {}
        if metric in offered[name]:
            out[metric] = (name, offered[name][metric])
    return out
