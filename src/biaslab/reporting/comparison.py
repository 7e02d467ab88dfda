"""Variants against the base on each benchmark's headline metrics: the table a person reads in ten seconds.

Which metrics are "headline" is the benchmarks' call (:func:`biaslab.reporting.headlines.headline_metrics`). For every
headline metric and variant the table shows the value with its 95% CI and the difference to the base,
marked with the metric's own direction (``higher`` / ``lower`` is better, or ``target``: closer to the
ideal is better):

* ``▲`` better, ``▼`` worse - beyond the confidence intervals (the promotion gate's
  ``better_than_base_beyond_ci`` rule, applied both ways);
* ``△`` better, ``▽`` worse - within the CIs: the difference may be noise;
* ``=`` no difference.

Rendered as a rich table (``biaslab compare``), markdown and a self-contained HTML page (artifacts of
the ``report`` run, next to ``reports/report.md``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from biaslab.reporting.headlines import ARROWS, DIRECTIONS, label, number, with_ci
from biaslab.metrics.values import MetricValue

Verdict = Literal["better", "worse", "same"]
MARKS = {("better", True): "▲", ("worse", True): "▼", ("better", False): "△", ("worse", False): "▽",
         ("same", False): "=", ("same", True): "="}
LEGEND = ("▲/▼ better/worse than the base beyond the 95% CIs; △/▽ better/worse within the CIs (may be noise); "
          "= no difference. Direction: " + DIRECTIONS)


@dataclass(frozen=True)
class Cell:
    """One variant's value of one metric, and how it compares with the base's."""

    value: float
    ci_low: float | None
    ci_high: float | None
    delta: float | None = None  # value - base value; None for the base itself or without a base value
    verdict: Verdict | None = None
    beyond_ci: bool = False

    @property
    def mark(self) -> str:
        return "" if self.verdict is None else MARKS[(self.verdict, self.beyond_ci)]


@dataclass(frozen=True)
class Row:
    benchmark: str
    metric: str
    direction: str
    ideal: float | None
    cells: dict[str, Cell | None]  # variant -> cell (None: the variant has no value for this metric)


@dataclass(frozen=True)
class Comparison:
    base: str
    variants: list[str]
    rows: list[Row] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # headline metrics no compared variant has


# --------------------------------------------------------------------------- the comparison
def _ci(mv: MetricValue) -> tuple[float, float] | None:
    if mv.ci_low is None or mv.ci_high is None or not (math.isfinite(mv.ci_low) and math.isfinite(mv.ci_high)):
        return None
    return float(mv.ci_low), float(mv.ci_high)


def verdict(variant: MetricValue, base: MetricValue) -> tuple[Verdict, bool]:
    """Better/worse/same by the metric's direction, and whether that holds beyond both CIs.

    "Beyond the CIs" is the promotion gate's ``better_than_base_beyond_ci`` test (no margin), run
    variant-vs-base for "better" and base-vs-variant for "worse", so the two never disagree.
    """
    from biaslab.config import GateCondition
    from biaslab.registry import check_condition

    v, b = variant.value, base.value
    ideal = variant.ideal if variant.ideal is not None else (base.ideal if base.ideal is not None else 0.0)
    if variant.direction == "higher":
        gain = v - b
    elif variant.direction == "lower":
        gain = b - v
    else:
        gain = abs(b - ideal) - abs(v - ideal)
    if abs(gain) <= 1e-12:  # equal, or (target) as far from the ideal on the other side
        return "same", False
    condition = GateCondition(metric="_", rule="better_than_base_beyond_ci")
    if gain > 0:
        return "better", check_condition(condition, variant, base).passed
    return "worse", check_condition(condition, base, variant).passed


def compare(metrics: Mapping[str, Mapping[str, MetricValue]], headlines: Mapping[str, Sequence[str]],
            base: str = "base") -> Comparison:
    """The comparison of every variant in ``metrics`` (variant -> metric name -> value) with ``base``."""
    variants = list(metrics)
    if base not in metrics:
        raise ValueError(f"no metrics for the base variant {base!r}; compared: {', '.join(variants) or 'none'}")
    rows, missing = [], []
    for benchmark, names in headlines.items():
        for name in names:
            present = {v: m[name] for v, m in metrics.items() if name in m and math.isfinite(m[name].value)}
            if not present:
                missing.append(name)
                continue
            first = present.get(base) or next(iter(present.values()))
            base_mv = present.get(base)
            cells: dict[str, Cell | None] = {}
            for v in variants:
                mv = present.get(v)
                if mv is None:
                    cells[v] = None
                    continue
                ci = _ci(mv)
                if v == base or base_mv is None:
                    cells[v] = Cell(mv.value, *(ci or (None, None)))
                    continue
                which, beyond = verdict(mv, base_mv)
                cells[v] = Cell(mv.value, *(ci or (None, None)), delta=mv.value - base_mv.value,
                                verdict=which, beyond_ci=beyond)
            rows.append(Row(benchmark, name, first.direction, first.ideal, cells))
    return Comparison(base, variants, rows, missing)


# --------------------------------------------------------------------------- rendering
def _delta(x: float) -> str:
    return ("+" if x > 0 else "−" if x < 0 else "±") + number(abs(x))


def value_text(cell: Cell) -> str:
    return with_ci(cell.value, cell.ci_low, cell.ci_high)


def delta_text(cell: Cell) -> str:
    return "" if cell.delta is None else f"{cell.mark} {_delta(cell.delta)}"


def metric_label(row: Row) -> str:
    return label(row.benchmark, row.metric, row.direction, row.ideal)


def to_markdown(comparison: Comparison) -> str:
    """A pipe table: benchmark | metric | base value | per variant ``value [CI]  mark Δ``."""
    heads = ["benchmark", "metric", *[f"{v} (base)" if v == comparison.base else v for v in comparison.variants]]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for row in comparison.rows:
        cells = []
        for v in comparison.variants:
            cell = row.cells.get(v)
            cells.append("–" if cell is None else " ".join(x for x in (value_text(cell), delta_text(cell)) if x))
        lines.append(f"| {row.benchmark} | {metric_label(row)} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n\n" + LEGEND + "\n"
    if comparison.missing:
        text += "\nNot computed for any variant: " + ", ".join(comparison.missing) + "\n"
    return text


_CSS = """body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
table{border-collapse:collapse;font-size:14px}th,td{border:1px solid #ddd;padding:4px 8px;text-align:right}
th{background:#f4f4f4}td.name{text-align:left}.better{color:#11772b}.worse{color:#b3261e}
.weak{opacity:.75}.ci{color:#777;font-size:12px}p{max-width:60rem}"""


def to_html(comparison: Comparison, title: str = "biaslab: variants vs base") -> str:
    """A self-contained HTML page of the same table (green better, red worse, pale within the CIs)."""
    esc = html.escape
    head = "".join(f"<th>{esc(v)}{' (base)' if v == comparison.base else ''}</th>" for v in comparison.variants)
    body = []
    for row in comparison.rows:
        tds = [f'<td class="name">{esc(row.benchmark)}</td>', f'<td class="name">{esc(metric_label(row))}</td>']
        for v in comparison.variants:
            cell = row.cells.get(v)
            if cell is None:
                tds.append("<td>–</td>")
                continue
            ci = (f' <span class="ci">[{number(cell.ci_low)}, {number(cell.ci_high)}]</span>'
                  if cell.ci_low is not None and cell.ci_high is not None else "")
            delta = ""
            if cell.delta is not None:
                cls = cell.verdict if cell.verdict in ("better", "worse") else ""
                weak = "" if cell.beyond_ci else " weak"
                delta = f'<br><span class="{cls}{weak}">{esc(delta_text(cell))}</span>'
            tds.append(f"<td>{number(cell.value)}{ci}{delta}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    missing = (f"<p>Not computed for any variant: {esc(', '.join(comparison.missing))}</p>"
               if comparison.missing else "")
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>{esc(title)}</title><style>{_CSS}</style>"
            f"</head><body><h1>{esc(title)}</h1><table><thead><tr><th>benchmark</th><th>metric</th>{head}</tr>"
            f"</thead><tbody>{''.join(body)}</tbody></table><p>{esc(LEGEND)}</p>{missing}</body></html>\n")


def to_rich(comparison: Comparison, title: str | None = None) -> Any:
    """A ``rich.table.Table`` of the same table (green better, red worse, dim within the CIs)."""
    from rich.table import Table

    table = Table(title=title or f"variants vs {comparison.base} (headline metrics)", caption=LEGEND,
                  caption_justify="left")
    table.add_column("benchmark")
    table.add_column("metric")
    for v in comparison.variants:
        table.add_column(f"{v} (base)" if v == comparison.base else v, justify="right")
    add_rich_rows(table, comparison, value_text, delta_text, "\n")
    return table


def add_rich_rows(table: Any, comparison: Comparison, value_of: Callable[[Any], str],
                  mark_of: Callable[[Any], str], separator: str) -> None:
    """Add one row per metric to a ``rich`` table: per variant its value, then its change against the base.

    The change is green when better, red when worse, dim when within the CIs; a missing metric is "–".
    The benchmark name is written on its first row only. Shared by ``biaslab compare`` (value and delta
    on two lines) and the stage summaries (value and an arrow on one).
    """
    from rich.text import Text

    previous = None
    for row in comparison.rows:
        cells: list[Any] = []
        for v in comparison.variants:
            cell = row.cells.get(v)
            if cell is None:
                cells.append("–")
                continue
            text = Text(value_of(cell))
            if cell.delta is not None:
                style = {"better": "green", "worse": "red"}.get(cell.verdict or "", "")
                text.append(separator + mark_of(cell), style=(style + ("" if cell.beyond_ci else " dim")).strip())
            cells.append(text)
        table.add_row("" if row.benchmark == previous else row.benchmark, metric_label(row), *cells)
        previous = row.benchmark
