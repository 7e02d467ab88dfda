"""Which code implements a benchmark: ``evaluation.benchmarks.<name>.module`` in params.yaml names a module
whose ``BENCHMARK`` object (:class:`biaslab.benchmarks.base.Benchmark`) runs it. Which benchmarks run is
data, so adding one is a module and a params entry, no code of the callers (evaluate, calibrate, the
paper tables)."""

from __future__ import annotations

import importlib

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
