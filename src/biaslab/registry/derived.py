"""The promoter recomputes every derived column of the evidence's prediction tables from their stored scores.

The re-scoring sample (:mod:`biaslab.registry.rescore`) proves that a seeded sample of stored *scores* came from
the verified model. Most columns the gate's rules read are not scores but arithmetic over them: CrowS-Pairs'
``is_stereotype`` vote, RuBia's ``prefers_pro``, the agreement pairs' ``correct``, GBEM-UA's answers and pair
log-odds, OccuGender's normalised probabilities and gaps, ClozeGender's CGS. A leaked evaluator credential could
log a run whose scores are honest and whose votes are not; the sample would pass, and the gate would count the
forged votes. This check closes that without the model: each benchmark recomputes its tables' derived columns
from the stored scores with its own code (:func:`biaslab.benchmarks.base.derive_of`: its ``derive``, or its
``spike`` at 0 nats), and every stored column it recomputes must equal the recomputation, on **every row** of
the variant's and the base's tables.

Tolerance: MLflow's ``log_table`` stores numbers with 10 decimals, so a column recomputed from the stored
(rounded) scores differs from the stored (rounded) column: by up to 4.1e-10 for every column but one over the 46
evaluate runs of a full-run workspace (``bench/derived_tolerance.py``), and by 4.1e-8 for Winogender's ``female_logratio`` (a log-ratio of two rounded
mean probabilities near 1e-3 on the 2.9 M default model; a larger model's are larger, so its error is smaller).
:data:`TOLERANCE` allows 1e-6 times the value's size (at least 1): 24 times the worst honest difference, and far
below anything a verdict reads - a forged per-row shift under it moves any mean by less than 1e-6. A boolean or
integer column (a vote, an answer, a count) must be the same value; no honest run had one differ. A table the benchmark's code cannot recompute (a dropped
score column) is refused; a benchmark that offers neither ``derive`` nor ``spike`` (a custom module) is named
as not checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from biaslab.registry.gate import RuleResult

TOLERANCE = 1e-6  # |Δ| <= TOLERANCE * max(1, |stored|): above the 10-decimal rounding of MLflow's stored tables
ASKS = "every stored derived column (votes, answers, margins, gaps) equals the benchmark's recomputation from the stored scores"


def _by_benchmark(tables: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{<benchmark>__<table>: frame}`` as ``{benchmark: {table: frame}}``."""
    out: dict[str, dict[str, Any]] = {}
    for key, frame in tables.items():
        name, _, table = key.partition("__")
        out.setdefault(name, {})[table] = frame.reset_index(drop=True)
    return out


def _first_difference(stored: Any, fresh: Any, tolerance: float) -> tuple[int, Any, Any] | None:
    """The first row where ``fresh`` (recomputed) differs from ``stored``, with both values, or ``None``: a
    number within ``tolerance`` times its size, at least 1 (NaN equals NaN; a stored value that is no number
    differs), a boolean the same boolean, anything else (text, names) equal."""
    import numpy as np
    import pandas as pd

    s, f = pd.Series(np.asarray(stored, dtype=object)), pd.Series(fresh)
    if f.dtype == bool:
        same = s.map(lambda v: isinstance(v, (bool, np.bool_))) & (s.astype(object) == f.astype(object))
    elif pd.api.types.is_numeric_dtype(f):
        numbers = pd.to_numeric(s.where(~s.map(lambda v: isinstance(v, (bool, np.bool_))), None), errors="coerce")
        values = f.astype(float)
        allowed = tolerance * numbers.abs().clip(lower=1.0)
        same = ((numbers - values).abs() <= allowed) | (numbers.isna() & values.isna() & s.isna())
    else:
        same = (s == f.astype(object)) | (s.isna() & f.isna())
    bad = np.flatnonzero(~same.to_numpy(dtype=bool))
    if not bad.size:
        return None
    i = int(bad[0])
    return i, s.iloc[i], f.iloc[i]


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


class NotRecomputable(ValueError):
    """A benchmark's code cannot recompute its derived columns from the stored tables (a score column or a
    table it reads is missing)."""


@dataclass
class Recomputation:
    """One version's prediction tables next to their benchmarks' recomputation from the stored scores.

    ``pairs``: ``(<benchmark>__<table>, stored frame, recomputed frame)`` for every stored table whose benchmark
    recomputes a column of it; ``as_stored``: tables whose benchmark recomputes nothing in them (only raw
    scores); ``unchecked``: tables of a benchmark that offers neither ``derive`` nor ``spike``."""

    pairs: list[tuple[str, Any, Any]] = field(default_factory=list)
    as_stored: set[str] = field(default_factory=set)
    unchecked: set[str] = field(default_factory=set)


def recompute(params: Any, stored_tables: dict[str, Any]) -> Recomputation:
    """Each benchmark's derived columns of ``stored_tables`` (``{<benchmark>__<table>: frame}``, as evidence
    ``predictions`` gives them) recomputed from their stored scores by the benchmark's own code
    (:func:`biaslab.benchmarks.base.derive_of`, options from ``params``). The one walk both :func:`derived_row`
    and ``bench/derived_tolerance.py`` read. Raises :class:`NotRecomputable` when a benchmark's code cannot."""
    from biaslab.benchmarks.base import derive_of
    from biaslab.benchmarks.registry import benchmark_of

    out = Recomputation()
    for name, tables in sorted(_by_benchmark(stored_tables).items()):
        found = benchmark_of(params.evaluation.benchmarks, name)
        derive = derive_of(found[0]) if found is not None else None
        if derive is None:
            out.unchecked.update(f"{name}__{t}" for t in tables)
            continue
        given = {t: f.copy() for t, f in tables.items()}
        try:
            fresh = derive(given, dict(found[1]))
        except (KeyError, ValueError, TypeError) as exc:
            raise NotRecomputable(f"benchmark {name}: its derived columns cannot be recomputed from the stored "
                                  f"tables ({type(exc).__name__}: {exc}); the evidence lacks what the benchmark "
                                  "wrote") from exc
        for table, frame in sorted(fresh.items()):
            stored = tables.get(table)
            if stored is None:  # a table the benchmark's code adds: nothing stored to compare
                continue
            if frame is given.get(table):  # handed back as it came: the benchmark recomputes nothing in it
                out.as_stored.add(f"{name}__{table}")
                continue
            out.pairs.append((f"{name}__{table}", stored, frame))
    return out


def _table_problem(who: str, key: str, stored: Any, frame: Any, tolerance: float) -> str | None:
    """Why ``who``'s stored table ``key`` is not its recomputation ``frame`` (row count, a missing column, the
    first differing value), or ``None``."""
    if len(frame) != len(stored):
        return f"{who!r} table {key}: {len(stored)} stored rows, {len(frame)} recomputed"
    for column in frame.columns:
        if column not in stored.columns:
            return f"{who!r} table {key}: no column {column} (a column the benchmark writes and the gate may read)"
        difference = _first_difference(stored[column].to_numpy(), frame[column].to_numpy(), tolerance)
        if difference is not None:
            i, s, f = difference
            return (f"{who!r} table {key} row {i} column {column}: stored {_plain(s)!r}, recomputed from the "
                    f"stored scores {_plain(f)!r}; the evidence's derived columns are not the benchmark's "
                    "arithmetic over its scores")
    return None


def derived_row(params: Any, evidence: Any, variants: Iterable[str], *, tolerance: float = TOLERANCE) -> RuleResult:
    """One gate row: every derived column of each of ``variants``' prediction tables in ``evidence`` recomputed
    by its benchmark from the stored scores (:func:`recompute`; see the module docstring); fails naming variant,
    table, row, column and both values on the first difference."""
    checked: dict[str, int] = {}  # <benchmark>__<table> -> rows checked (all versions)
    unchecked: set[str] = set()
    as_stored: set[str] = set()
    for who in variants:
        try:
            found = recompute(params, evidence.predictions(who))
        except NotRecomputable as exc:
            return RuleResult("evidence", "derived_columns", ASKS, False, f"{who!r} {exc}")
        except (OSError, ValueError) as exc:  # BiaslabError subclasses of both: missing or malformed evidence
            return RuleResult("evidence", "derived_columns", ASKS, False, f"predictions of {who!r} unreadable: {exc}")
        unchecked |= found.unchecked
        as_stored |= found.as_stored
        for key, stored, frame in found.pairs:
            problem = _table_problem(who, key, stored, frame, tolerance)
            if problem is not None:
                return RuleResult("evidence", "derived_columns", ASKS, False, problem)
            checked[key] = checked.get(key, 0) + len(stored)
    note = f"; no column recomputed by its benchmark: {', '.join(sorted(as_stored))}" if as_stored else ""
    if unchecked:
        note += f"; not checked (the benchmark offers neither derive nor spike): {', '.join(sorted(unchecked))}"
    if not checked:
        return RuleResult("evidence", "derived_columns", ASKS, True, f"0 rows: no table with derived columns{note}")
    return RuleResult("evidence", "derived_columns", ASKS, True,
                      f"{sum(checked.values())} rows of {len(checked)} tables ({', '.join(sorted(checked))}) recomputed "
                      f"from their stored scores, every column of every row equal (numbers within {tolerance:g} of their size)"
                      f"{note}")


__all__ = ["ASKS", "TOLERANCE", "NotRecomputable", "Recomputation", "derived_row", "recompute"]
