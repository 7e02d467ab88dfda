"""Paper reports: each seed paper's tables in the paper's own layout, for every evaluated variant.

The ``report`` stage calls :func:`write_paper_reports`. It knows no benchmark by name: it imports every
benchmark of ``params.evaluation.benchmarks``, asks the ones that implement
:class:`~biaslab.benchmarks.base.PaperTables` for their :class:`~biaslab.benchmarks.base.PaperTable` s
(built from each variant's metrics and ``reports/tables/<variant>/<benchmark>__<table>.csv``), groups them
by ``paper`` and writes

* ``reports/paper/<paper>.md`` - the reproduce command, then each table: the evaluated variants, the
  paper's published numbers for its own models beside them (for orientation only: other models), notes;
* ``reports/paper/<paper>/<key>.csv`` - the same table, one row per line, first column ``source``
  (``evaluated`` or ``published``).

The whole ``reports/paper/`` directory is written at once (:func:`biaslab.atomic.atomic_dir`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from biaslab.atomic import atomic_dir
from biaslab.benchmarks.base import PaperTable, VariantEvaluation
from biaslab.metrics.values import MetricValue

TABLE_SEPARATOR = "__"  # reports/tables/<variant>/<benchmark>__<table>.csv


def variant_evaluations(benchmark: str, metrics: Mapping[str, Mapping[str, MetricValue]],
                        tables_dir: Path) -> dict[str, VariantEvaluation]:
    """Every variant's metrics and this benchmark's tables (``<tables_dir>/<variant>/<benchmark>__*.csv``)."""
    out = {}
    for variant, values in metrics.items():
        tables = {}
        for csv in sorted((Path(tables_dir) / variant).glob(f"{benchmark}{TABLE_SEPARATOR}*.csv")):
            tables[csv.stem[len(benchmark) + len(TABLE_SEPARATOR):]] = pd.read_csv(csv, index_col=0)
        out[variant] = VariantEvaluation(metrics=values, tables=tables)
    return out


def collect_paper_tables(benchmarks: Mapping[str, object], metrics: Mapping[str, Mapping[str, MetricValue]],
                         tables_dir: Path) -> dict[str, list[PaperTable]]:
    """``paper -> tables`` from every benchmark object that has ``paper_tables`` (others are skipped)."""
    papers: dict[str, list[PaperTable]] = {}
    for name, benchmark in benchmarks.items():
        build = getattr(benchmark, "paper_tables", None)
        if build is None:
            continue
        try:
            tables = build(variant_evaluations(name, metrics, tables_dir))
        except Exception as exc:  # name the benchmark, keep the cause
            raise RuntimeError(f"benchmark {name!r}: paper_tables() failed: {exc}") from exc
        for table in tables:
            if not isinstance(table, PaperTable):
                raise TypeError(f"benchmark {name!r}: paper_tables() returned {type(table).__name__}, not PaperTable")
            papers.setdefault(table.paper, []).append(table)
    for paper, tables in papers.items():
        keys = [t.key for t in tables]
        if len(set(keys)) != len(keys):
            raise ValueError(f"paper {paper!r}: two tables share a key ({sorted(keys)}); keys name the CSV files")
    return papers


# --------------------------------------------------------------------------------------------- rendering
def format_cell(value: object) -> str:
    """Numbers with 4 significant digits (0.0195, 0.5137, 61.3), NaN/None as an en dash, text as it is."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        number = float(value)
        return "–" if math.isnan(number) else f"{number:.4g}"
    return "–" if pd.isna(value) else str(value)


def markdown_frame(frame: pd.DataFrame) -> str:
    """A pipe table of ``frame`` (its index too, when named or not a plain range)."""
    if frame.empty:
        return "_no data_\n"
    if not isinstance(frame.index, pd.RangeIndex) or any(n is not None for n in frame.index.names):
        frame = frame.reset_index()
    columns = [" / ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in frame.columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(format_cell(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines) + "\n"


def render_markdown(paper: str, tables: Sequence[PaperTable]) -> str:
    """``reports/paper/<paper>.md``: the reproduce command, then each table with the published numbers."""
    reproduce = next((t.reproduce for t in tables if t.reproduce), "")
    parts = [f"# Paper report: {paper}\n"]
    if reproduce:
        parts.append("Reproduce the paper's setting with the paper's model:\n\n```bash\n" + reproduce + "\n```\n")
    parts.append("Rows marked *published* are the paper's own numbers for its own models, shown for orientation "
                 "only; the evaluated rows come from this pipeline's variants.\n")
    for table in tables:
        parts.append(f"## {table.title}\n\nEvaluated (`{paper}/{table.key}.csv`):\n\n{markdown_frame(table.frame)}")
        if table.published is not None:
            source = f" ({table.published_source})" if table.published_source else ""
            parts.append(f"Published{source}:\n\n{markdown_frame(table.published)}")
        if table.notes:
            parts.append(table.notes.rstrip() + "\n")
    return "\n".join(parts)


def table_csv(table: PaperTable) -> str:
    """One CSV: the evaluated rows, then the published ones, told apart by the first column ``source``."""
    frames = []
    for source, frame in (("evaluated", table.frame), ("published", table.published)):
        if frame is None or frame.empty:
            continue
        flat = frame.reset_index() if not isinstance(frame.index, pd.RangeIndex) or frame.index.name else frame.copy()
        flat.columns = [" / ".join(map(str, c)) if isinstance(c, tuple) else str(c) for c in flat.columns]
        flat.insert(0, "source", source)
        frames.append(flat)
    return pd.concat(frames, ignore_index=True).to_csv(index=False) if frames else "source\n"


def write_paper_reports(papers: Mapping[str, Sequence[PaperTable]], out_dir: str | Path) -> list[Path]:
    """Write ``<out_dir>/<paper>.md`` and ``<out_dir>/<paper>/<key>.csv`` atomically; returns the markdown files."""
    out_dir = Path(out_dir)
    written = []
    with atomic_dir(out_dir) as tmp:
        for paper, tables in sorted(papers.items()):
            (tmp / f"{paper}.md").write_text(render_markdown(paper, tables), encoding="utf-8")
            (tmp / paper).mkdir()
            for table in tables:
                (tmp / paper / f"{table.key}.csv").write_text(table_csv(table), encoding="utf-8")
            written.append(out_dir / f"{paper}.md")
    return written


def write_from_params(params, root: str | Path, metrics: Mapping[str, Mapping[str, MetricValue]],
                      out_dir: str = "reports/paper", tables_dir: str = "reports/tables") -> list[Path]:
    """The report stage's entry: benchmarks from ``params.evaluation.benchmarks`` (enabled ones), then write."""
    from biaslab.benchmarks.registry import load_benchmark

    root = Path(root)
    benchmarks = {name: load_benchmark(name, entry.module)
                  for name, entry in params.evaluation.benchmarks.items() if entry.enabled}
    return write_paper_reports(collect_paper_tables(benchmarks, metrics, root / tables_dir), root / out_dir)
