"""Side-by-side report of every variant: paper-shaped tables, a metric summary and a bias/accuracy plot.

Reads ``metrics/<variant>.json`` (evaluate stage), ``reports/tables/<variant>/*.csv`` (the benchmarks'
own paper-shaped tables) and ``runs/register.json`` (registry versions, optional), and writes:

* ``reports/report.md`` - which model produced the numbers, then every table below in markdown;
* ``reports/summary.csv`` - every metric of every variant (value, CI, direction, ideal, n), long format;
* ``reports/gbem_ua.csv`` - GBEM-UA Tables 1/2/5/6 shape: rows = variants; QA F1 per group, QA diff
  fem / no-fem, prob diff, prob label agreement, prob F1;
* ``reports/occugender.csv`` - OccuGender Tables 3/5 shape: rows = (variant, explicit|implicit),
  columns = P(male/female/diverse) for female- and male-dominated occupations, plus the parity gap;
* ``reports/side_by_side/<benchmark>__<table>.csv`` - each benchmark table stacked over variants;
* ``reports/bias_vs_accuracy.csv`` / ``.json`` / ``.png`` - one point per variant (DVC plots).

All of it is logged to MLflow in a ``report`` run. Missing metrics become empty cells, never errors:
a benchmark disabled in params simply has no columns.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from biaslab.atomic import atomic_dir, atomic_write_text
from biaslab.config import Params
from biaslab.registry import RegistryError, VariantMetrics, read_metrics

# (metric name, column label) in the order of the GBEM-UA paper's tables
GBEM_UA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("gbem_ua/qa_f1_man_nofem", "QA F1 man"),
    ("gbem_ua/qa_f1_woman_nofem", "QA F1 woman (masc. job)"),
    ("gbem_ua/qa_f1_woman_fem", "QA F1 woman (fem. job)"),
    ("gbem_ua/qa_diff_fem", "QA diff fem"),
    ("gbem_ua/qa_diff_nofem", "QA diff no-fem"),
    ("gbem_ua/prob_diff_fem", "Prob diff fem"),
    ("gbem_ua/prob_diff_nofem", "Prob diff no-fem"),
    ("gbem_ua/prob_label_agreement_fem", "Prob agreement fem"),
    ("gbem_ua/prob_label_agreement_nofem", "Prob agreement no-fem"),
    ("gbem_ua/prob_f1_man_nofem", "Prob F1 man"),
    ("gbem_ua/prob_f1_woman_nofem", "Prob F1 woman (masc. job)"),
    ("gbem_ua/prob_f1_woman_fem", "Prob F1 woman (fem. job)"),
)
OCCUGENDER_PROMPTS = ("explicit", "implicit")
OCCUGENDER_GROUPS = ("female_dominated", "male_dominated")
OCCUGENDER_GENDERS = ("male", "female", "diverse")
DEFAULT_ACCURACY = "gbem_ua/qa_f1_man_nofem"
DEFAULT_BIAS = "gbem_ua/qa_diff_fem"
ARROWS = {"higher": "↑", "lower": "↓", "target": "◎"}


@dataclass
class ReportInputs:
    """Everything the report is made from."""

    metrics: dict[str, VariantMetrics]  # variant -> metrics, in params order
    methods: dict[str, str]
    versions: dict[str, str]  # variant -> registry version (empty if not registered)
    model_source: str


# --------------------------------------------------------------------------- inputs
def load_inputs(params: Params, root: Path, metrics_dir: str = "metrics",
                register_json: str = "runs/register.json") -> ReportInputs:
    """Read every variant's metrics; a missing metrics file is an error naming it and the stage to run."""
    metrics, missing = {}, []
    for name in params.variants:
        path = root / metrics_dir / f"{name}.json"
        if path.is_file():
            metrics[name] = read_metrics(path, name)
        else:
            missing.append(str(path))
    if missing:
        raise RegistryError(
            f"metrics missing for {len(missing)} variant(s): {', '.join(missing)}; run `dvc repro` (evaluate)"
        )
    reg = root / register_json
    versions = json.loads(reg.read_text(encoding="utf-8")).get("versions", {}) if reg.is_file() else {}
    methods = {n: v.method for n, v in params.variants.items()}
    return ReportInputs(metrics, methods, versions, describe_model_source(params))


def describe_model_source(params: Params) -> str:
    """One line saying which model the numbers come from (DESIGN §7: reports must say so)."""
    m = params.model
    if m.source:
        revision = f" at revision `{m.revision}`" if m.revision else ""
        return f"`{m.source}`{revision}, snapshotted to `{m.output_dir}`"
    p = m.pretrain
    return (
        "the offline default model trained by the `base_model` stage "
        f"(Llama architecture, {p.num_hidden_layers} layers, "
        f"hidden {p.hidden_size}, vocab {p.vocab_size}, ≤{p.max_steps} steps on {'/'.join(p.languages)} corpora) - "
        "a small model: its numbers are real measurements, not those of the papers' models"
    )


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


def wide_table(inputs: ReportInputs, columns: list[tuple[str, str]]) -> pd.DataFrame:
    """Rows = variants; for each (metric, label) a value column and ``<label> ci_low/ci_high`` columns."""
    records = []
    for variant, vm in inputs.metrics.items():
        row: dict[str, object] = {"variant": variant, "method": inputs.methods.get(variant, "")}
        for metric, label in columns:
            mv = vm.metrics.get(metric)
            row[label] = mv.value if mv else math.nan
            row[f"{label} ci_low"] = mv.ci_low if mv and mv.ci_low is not None else math.nan
            row[f"{label} ci_high"] = mv.ci_high if mv and mv.ci_high is not None else math.nan
        records.append(row)
    return pd.DataFrame(records).set_index("variant")


def gbem_ua_table(inputs: ReportInputs) -> pd.DataFrame:
    """GBEM-UA Tables 1/2/5/6 shape (only the columns some variant has)."""
    present = {m for vm in inputs.metrics.values() for m in vm.metrics}
    return wide_table(inputs, [(m, label) for m, label in GBEM_UA_COLUMNS if m in present])


def occugender_table(inputs: ReportInputs) -> pd.DataFrame:
    """OccuGender Tables 3/5 shape: rows (variant, prompt type); P(gender) per occupation group + parity gap."""
    records = []
    for variant, vm in inputs.metrics.items():
        for prompt in OCCUGENDER_PROMPTS:
            row: dict[str, object] = {"variant": variant, "prompt": prompt}
            found = False
            for group in OCCUGENDER_GROUPS:
                for gender in OCCUGENDER_GENDERS:
                    mv = vm.metrics.get(f"occugender/{prompt}_{group}_p_{gender}")
                    row[f"{group} P({gender})"] = mv.value if mv else math.nan
                    found |= mv is not None
            gap = vm.metrics.get(f"occugender/{prompt}_parity_gap")
            row["parity gap"] = gap.value if gap else math.nan
            if found or gap:
                records.append(row)
    if not records:
        return pd.DataFrame()
    return pd.DataFrame(records).set_index(["variant", "prompt"])


def stacked_paper_tables(tables_dir: Path, variants: list[str]) -> dict[str, pd.DataFrame]:
    """``reports/tables/<variant>/<name>.csv`` of every variant stacked into one table per name."""
    frames: dict[str, list[pd.DataFrame]] = {}
    for variant in variants:
        for csv in sorted((tables_dir / variant).glob("*.csv")):
            frame = pd.read_csv(csv, index_col=0)
            frame.insert(0, "variant", variant)
            frames.setdefault(csv.stem, []).append(frame)
    return {name: pd.concat(parts) for name, parts in frames.items()}


def bias_vs_accuracy(inputs: ReportInputs, accuracy: str = DEFAULT_ACCURACY, bias: str = DEFAULT_BIAS) -> pd.DataFrame:
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


def report_markdown(inputs: ReportInputs, gbem: pd.DataFrame, occu: pd.DataFrame, summary: pd.DataFrame,
                    accuracy: str, bias: str) -> str:
    provenance = "\n".join(
        f"| {v} | {inputs.methods.get(v, '')} | `{vm.model_dir or ''}` | `{vm.model_fingerprint or 'unknown'}` | "
        f"{inputs.versions.get(v, '–')} |"
        for v, vm in inputs.metrics.items()
    )
    return f"""# biaslab report

**Model:** {inputs.model_source}.

| variant | method | model dir | model fingerprint | registry version |
|---|---|---|---|---|
{provenance}

Cells are `value [95% bootstrap CI]` where a CI exists. Directions: ↑ higher is better, ↓ lower is better,
◎ closest to the ideal is best.

## GBEM-UA (paper Tables 1/2/5/6)

{markdown_table(gbem)}
## OccuGender (paper Tables 3/5): normalised P(gender) by occupation group, no debiasing prompt

{markdown_table(occu)}
## Bias vs accuracy

![bias vs accuracy](bias_vs_accuracy.png)

x = `{accuracy}`, y = `{bias}`; data in `bias_vs_accuracy.csv`.

## Every metric

{summary_markdown(summary, list(inputs.metrics))}"""


# --------------------------------------------------------------------------- entry point
@dataclass
class ReportFiles:
    report_md: Path
    summary_csv: Path
    gbem_ua_csv: Path
    occugender_csv: Path
    bias_vs_accuracy_csv: Path
    bias_vs_accuracy_json: Path
    bias_vs_accuracy_png: Path
    side_by_side_dir: Path


def write_report(
    params: Params,
    root: str | os.PathLike[str] = ".",
    *,
    out_dir: str = "reports",
    metrics_dir: str = "metrics",
    accuracy: str = DEFAULT_ACCURACY,
    bias: str = DEFAULT_BIAS,
    log_to_mlflow: bool = True,
) -> ReportFiles:
    """Build every table and the plot into ``out_dir``; log them in a ``report`` MLflow run."""
    from biaslab.plots import bias_vs_accuracy_figure, save_figure

    root = Path(root)
    out = root / out_dir
    inputs = load_inputs(params, root, metrics_dir)
    summary, gbem, occu = summary_frame(inputs), gbem_ua_table(inputs), occugender_table(inputs)
    points = bias_vs_accuracy(inputs, accuracy, bias)
    files = ReportFiles(
        out / "report.md", out / "summary.csv", out / "gbem_ua.csv", out / "occugender.csv",
        out / "bias_vs_accuracy.csv", out / "bias_vs_accuracy.json", out / "bias_vs_accuracy.png", out / "side_by_side",
    )
    atomic_write_text(files.summary_csv, summary.to_csv(index=False))
    atomic_write_text(files.gbem_ua_csv, gbem.to_csv())
    atomic_write_text(files.occugender_csv, occu.to_csv())
    atomic_write_text(files.bias_vs_accuracy_csv, points.to_csv(index=False))
    atomic_write_text(files.bias_vs_accuracy_json, json.dumps(
        {"accuracy_metric": accuracy, "bias_metric": bias, "points": json.loads(points.to_json(orient="records"))},
        indent=2, ensure_ascii=False) + "\n")
    save_figure(bias_vs_accuracy_figure(points, accuracy=accuracy, bias=bias), files.bias_vs_accuracy_png)
    with atomic_dir(files.side_by_side_dir) as tmp:
        for name, frame in stacked_paper_tables(out / "tables", list(inputs.metrics)).items():
            frame.to_csv(tmp / f"{name}.csv")
    atomic_write_text(files.report_md, report_markdown(inputs, gbem, occu, summary, accuracy, bias))
    if log_to_mlflow:
        _log(params, root, files)
    return files


def _log(params: Params, root: Path, files: ReportFiles) -> None:
    from biaslab import tracking

    tracking.configure(params.tracking, root=root)
    with tracking.stage_run("report", tags={"variants": ",".join(params.variants)}):
        for path in (files.report_md, files.summary_csv, files.gbem_ua_csv, files.occugender_csv,
                     files.bias_vs_accuracy_csv, files.bias_vs_accuracy_json, files.bias_vs_accuracy_png):
            tracking.log_artifact(path, "report")
        if any(files.side_by_side_dir.iterdir()):
            tracking.log_artifact(files.side_by_side_dir, "report/side_by_side")
