"""Side-by-side report of every variant: a metric summary, the benchmarks' tables and a bias/accuracy plot.

Reads ``metrics/<variant>.json`` (evaluate stage), ``reports/tables/<variant>/*.csv`` (the benchmarks'
own paper-shaped tables) and ``runs/register.json`` (registry versions, optional), and writes:

* ``reports/report.md`` - which model produced the numbers, then every table below in markdown;
* ``reports/summary.csv`` - every metric of every variant (value, CI, direction, ideal, n), long format;
* ``reports/side_by_side/<benchmark>__<table>.csv`` - each benchmark table stacked over variants;
* ``reports/bias_vs_accuracy.csv`` / ``.json`` / ``.png`` - one point per variant (DVC plots); the axes are
  ``tune.accuracy_metric`` (x) and ``tune.gap_metric`` (y) - the pair the LoRA search trades off - unless
  given explicitly;
* ``reports/comparison.md`` / ``.html`` - each benchmark's headline metrics, value [CI] and Δ vs base with
  better/worse marks (``biaslab compare``'s table; also a section of ``report.md``);
* ``reports/paper/<paper>.md`` and ``reports/paper/<paper>/<key>.csv`` - each seed paper's tables in the
  paper's layout with its published numbers beside them (:mod:`biaslab.reporting.paper_tables`).

The seed papers' own tables come from the benchmarks (``paper_tables()``, see
:mod:`biaslab.benchmarks.base`), so this module knows no benchmark by name.

The ``report`` stage (:mod:`pipelines.report`) logs all of it to MLflow in a ``report`` run. Missing metrics become empty cells, never errors:
a benchmark disabled in params simply has no columns.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from biaslab.reporting import paper_tables as paper_report
from biaslab.atomic import atomic_dir, atomic_write_text
from biaslab.config import Params
from biaslab.reporting.headlines import ARROWS, headline_metrics
from biaslab.outputs import metrics_file, paths, run_file
from biaslab.outputs.metrics_file import VariantMetrics
from biaslab.registry import RegistryError


@dataclass
class ReportInputs:
    """Everything the report is made from."""

    metrics: dict[str, VariantMetrics]  # variant -> metrics, in params order
    methods: dict[str, str]
    versions: dict[str, str]  # variant -> registry version (empty if not registered)
    model_source: str


# --------------------------------------------------------------------------- inputs
def load_inputs(params: Params, root: Path, metrics_dir: str = "metrics",
                register_json: str | Path = paths.run_file("register")) -> ReportInputs:
    """Read every variant's metrics; a missing metrics file is an error naming it and the stage to run."""
    metrics, missing = {}, []
    for name in params.variants:
        path = root / metrics_dir / f"{name}.json"
        if path.is_file():
            metrics[name] = metrics_file.read(path, name)
        else:
            missing.append(str(path))
    if missing:
        raise RegistryError(
            f"metrics missing for {len(missing)} variant(s): {', '.join(missing)}; run `dvc repro` (evaluate)"
        )
    versions = run_file.registered_versions(root / register_json)
    methods = {n: v.method for n, v in params.variants.items()}
    return ReportInputs(metrics, methods, versions, describe_model_source(params))


def describe_model_source(params: Params) -> str:
    """One line saying which model the numbers come from (docs/design.md 6: reports must say so)."""
    m = params.model
    if m.source:
        revision = f" at revision `{m.revision}`" if m.revision else ""
        return f"`{m.source}`{revision}, snapshotted to `{m.output_dir}`"
    p = m.pretrain
    line = (
        "the offline default model trained by the `base_model` stage "
        f"(Llama architecture, {p.num_hidden_layers} layers, "
        f"hidden {p.hidden_size}, vocab {p.vocab_size}, ≤{p.max_steps} steps on {'/'.join(p.languages)} corpora) - "
        "a small model: its numbers are real measurements, not those of the papers' models"
    )
    pb = p.planted_bias
    if pb.enabled and pb.dose > 0:
        line += (
            f". **Its gender bias is planted on purpose** (`model.pretrain.planted_bias`, direction `{pb.direction}`: "
            f"from step {pb.from_step}, {pb.dose:.0%} of every training batch are synthetic sentences tying "
            f"occupations, posts and roles to one gender, strength {pb.strength:g}) - a known answer for checking "
            "the benchmarks and mitigations (`reports/calibration.md`, docs/planted_bias.md), a synthetic "
            "property of this toy model and never a finding about language"
        )
    return line


# --------------------------------------------------------------------------- tables
def summary_frame(inputs: ReportInputs) -> pd.DataFrame:
    """Long format: one row per (variant, metric) with value, CI, direction, ideal, n."""
    rows = []
    for variant, vm in inputs.metrics.items():
        for name, mv in vm.metrics.items():
            rows.append({
                "variant": variant, "metric": name, "value": mv.value, "ci_low": mv.ci_low, "ci_high": mv.ci_high,
                "direction": mv.direction, "ideal": mv.ideal, "n": mv.n,
            })
    return pd.DataFrame(rows, columns=["variant", "metric", "value", "ci_low", "ci_high", "direction", "ideal", "n"])


def stacked_paper_tables(tables_dir: Path, variants: list[str]) -> dict[str, pd.DataFrame]:
    """``reports/tables/<variant>/<name>.csv`` of every variant stacked into one table per name."""
    frames: dict[str, list[pd.DataFrame]] = {}
    for variant in variants:
        for csv in sorted((tables_dir / variant).glob("*.csv")):
            frame = pd.read_csv(csv, index_col=0)
            frame.insert(0, "variant", variant)
            frames.setdefault(csv.stem, []).append(frame)
    return {name: pd.concat(parts) for name, parts in frames.items()}


def bias_vs_accuracy(inputs: ReportInputs, accuracy: str, bias: str) -> pd.DataFrame:
    """One row per variant that has both metrics: accuracy, bias and their CIs."""
    rows = []
    for variant, vm in inputs.metrics.items():
        acc, b = vm.metrics.get(accuracy), vm.metrics.get(bias)
        if acc is None or b is None:
            continue
        rows.append({
            "variant": variant, "accuracy": acc.value, "bias": b.value,
            "accuracy_ci_low": acc.ci_low, "accuracy_ci_high": acc.ci_high,
            "bias_ci_low": b.ci_low, "bias_ci_high": b.ci_high,
        })
    return pd.DataFrame(rows, columns=["variant", "accuracy", "bias", "accuracy_ci_low", "accuracy_ci_high",
                                       "bias_ci_low", "bias_ci_high"])


# --------------------------------------------------------------------------- markdown
def _cell(value: object, lo: object = None, hi: object = None) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        text = f"{value:.3f}"
        if isinstance(lo, float) and isinstance(hi, float) and not (math.isnan(lo) or math.isnan(hi)):
            text += f" [{lo:.3f}, {hi:.3f}]"
        return text
    return "–" if value is None else str(value)


def markdown_table(frame: pd.DataFrame, with_ci: bool = True) -> str:
    """A pipe table; ``<col> ci_low/ci_high`` columns are folded into ``value [low, high]`` cells."""
    if frame.empty:
        return "_no data_\n"
    frame = frame.reset_index()
    cols = [c for c in frame.columns if not (isinstance(c, str) and c.endswith((" ci_low", " ci_high")))]
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, row in frame.iterrows():
        cells = []
        for c in cols:
            lo, hi = (row.get(f"{c} ci_low"), row.get(f"{c} ci_high")) if with_ci else (None, None)
            cells.append(_cell(row[c], lo, hi))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def summary_markdown(summary: pd.DataFrame, variants: list[str]) -> str:
    """Rows = metrics (with direction arrow), columns = variants, cells ``value [CI]``."""
    if summary.empty:
        return "_no metrics_\n"
    lines = ["| metric | dir | ideal | " + " | ".join(variants) + " |", "|" + "---|" * (3 + len(variants))]
    for metric, part in summary.groupby("metric", sort=True):
        by_variant = {r.variant: r for r in part.itertuples()}
        first = part.iloc[0]
        ideal = "" if pd.isna(first["ideal"]) else f"{first['ideal']:g}"
        cells = [
            _cell(float(r.value), _f(r.ci_low), _f(r.ci_high)) if (r := by_variant.get(v)) is not None else "–"
            for v in variants
        ]
        lines.append(f"| {metric} | {ARROWS.get(first['direction'], '?')} | {ideal} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _f(x: object) -> float | None:
    return None if x is None or pd.isna(x) else float(x)


def report_markdown(inputs: ReportInputs, summary: pd.DataFrame, accuracy: str, bias: str,
                    headline_table=None) -> str:
    provenance = "\n".join(
        f"| {v} | {inputs.methods.get(v, '')} | `{vm.model_dir or ''}` | `{vm.model_fingerprint or 'unknown'}` | "
        f"{inputs.versions.get(v, '–')} |"
        for v, vm in inputs.metrics.items()
    )
    skipped = "".join(f"\n- **{v}** has no numbers: {vm.skipped}" for v, vm in inputs.metrics.items() if vm.skipped)
    headline_section = ""
    if headline_table is not None:
        from biaslab.reporting import comparison

        headline_section = ("\n## Variants vs base: headline metrics\n\n"
                            f"{comparison.to_markdown(headline_table)}\n")
    return f"""# biaslab report

**Model:** {inputs.model_source}.

| variant | method | model dir | model fingerprint | registry version |
|---|---|---|---|---|
{provenance}
{skipped}
Cells are `value [95% bootstrap CI]` where a CI exists. Directions: ↑ higher is better, ↓ lower is better,
◎ closest to the ideal is best. Each benchmark's own tables, stacked over variants, are in `side_by_side/`.
{headline_section}
## Bias vs accuracy

![bias vs accuracy](bias_vs_accuracy.png)

x = `{accuracy}`, y = `{bias}`; data in `bias_vs_accuracy.csv`.

## Every metric

{summary_markdown(summary, list(inputs.metrics))}"""


# --------------------------------------------------------------------------- entry point
def write_report(
    params: Params,
    root: str | os.PathLike[str] = ".",
    *,
    out_dir: str = "reports",
    metrics_dir: str = "metrics",
    accuracy: str | None = None,
    bias: str | None = None,
) -> paths.ReportFiles:
    """Build every table and the plot into ``out_dir``; returns where each file is.

    ``accuracy`` / ``bias``: the plot's metrics; ``None`` = ``tune.accuracy_metric`` / ``tune.gap_metric``.
    """
    from biaslab.reporting.plots import bias_vs_accuracy_figure, save_figure

    root = Path(root)
    out = root / out_dir
    inputs = load_inputs(params, root, metrics_dir)
    accuracy = accuracy or params.tune.accuracy_metric
    bias = bias or params.tune.gap_metric
    summary = summary_frame(inputs)
    points = bias_vs_accuracy(inputs, accuracy, bias)
    files = paths.ReportFiles.under(out)
    atomic_write_text(files.summary_csv, summary.to_csv(index=False))
    atomic_write_text(files.bias_vs_accuracy_csv, points.to_csv(index=False))
    atomic_write_text(files.bias_vs_accuracy_json, json.dumps(
        {"accuracy_metric": accuracy, "bias_metric": bias, "points": json.loads(points.to_json(orient="records"))},
        indent=2, ensure_ascii=False) + "\n")
    save_figure(bias_vs_accuracy_figure(points, accuracy=accuracy, bias=bias), files.bias_vs_accuracy_png)
    with atomic_dir(files.side_by_side_dir) as tmp:
        for name, frame in stacked_paper_tables(out / "tables", list(inputs.metrics)).items():
            frame.to_csv(tmp / f"{name}.csv")
    paper_report.write_from_params(params, root, {v: vm.metrics for v, vm in inputs.metrics.items()},
                                   out_dir=f"{out_dir}/paper", tables_dir=f"{out_dir}/tables")
    from biaslab.reporting import comparison

    headline_table = _comparison(params, inputs)
    if headline_table is not None:
        atomic_write_text(files.comparison_md, comparison.to_markdown(headline_table))
        atomic_write_text(files.comparison_html, comparison.to_html(headline_table))
    else:  # the stage's outputs exist either way
        note = "No variant named 'base': nothing to compare with (`biaslab compare --base <variant>`).\n"
        atomic_write_text(files.comparison_md, note)
        atomic_write_text(files.comparison_html, f"<!doctype html><meta charset=utf-8><p>{note}</p>\n")
    atomic_write_text(files.report_md, report_markdown(inputs, summary, accuracy, bias, headline_table))
    return files


def _comparison(params: Params, inputs: ReportInputs, base: str = "base"):
    """``biaslab compare``'s table (each benchmark's headline metrics vs ``base``), or None without a base."""
    from biaslab.reporting import comparison

    if base not in inputs.metrics:
        return None
    headlines = headline_metrics(params.evaluation.benchmarks)
    return comparison.compare({v: vm.metrics for v, vm in inputs.metrics.items()}, headlines, base)
