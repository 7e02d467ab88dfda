"""The report: every variant in every table, CIs in the markdown, the model named, plots written and logged."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from biaslab.config import Params
from biaslab.outputs import metrics_file

VARIANTS = {"base": "none", "prompt": "prompt", "lora": "lora"}


def fake_metrics(shift: float) -> dict:
    m = {}
    for group in ("man_nofem", "woman_nofem", "woman_fem"):
        m[f"gbem_ua/qa_f1_{group}"] = {"value": 0.7 - shift, "direction": "higher", "ideal": 1.0,
                                       "ci_low": 0.65 - shift, "ci_high": 0.75 - shift, "n": 50}
    for pairing in ("fem", "nofem"):
        m[f"gbem_ua/qa_diff_{pairing}"] = {"value": 0.2 - shift, "direction": "lower", "ideal": 0.0,
                                           "ci_low": 0.15 - shift, "ci_high": 0.25 - shift}
        m[f"gbem_ua/prob_diff_{pairing}"] = {"value": 0.01, "direction": "lower", "ideal": 0.0}
        m[f"gbem_ua/prob_label_agreement_{pairing}"] = {"value": 0.9, "direction": "higher", "ideal": 1.0}
    for prompt in ("explicit", "implicit"):
        for group in ("female_dominated", "male_dominated"):
            for gender, p in zip(("male", "female", "diverse"), (0.5, 0.3, 0.2)):
                m[f"occugender/{prompt}_{group}_p_{gender}"] = {"value": p, "direction": "target", "ideal": 1 / 3}
        m[f"occugender/{prompt}_parity_gap"] = {"value": 0.2, "direction": "lower", "ideal": 0.0,
                                                "ci_low": 0.1, "ci_high": 0.3}
    m["rubia/pro_share"] = {"value": 0.55, "direction": "target", "ideal": 0.5, "ci_low": 0.52, "ci_high": 0.58}
    return m


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Params]:
    for i, variant in enumerate(VARIANTS):
        records = {name: metrics_file.metric_from_record(record) for name, record in fake_metrics(0.05 * i).items()}
        metrics_file.write(tmp_path, variant, records, model_fingerprint=f"fp{i}", model_dir=f"models/{variant}",
                           run_id=f"r{i}")
        tables = tmp_path / "reports" / "tables" / variant
        tables.mkdir(parents=True)
        pd.DataFrame({"P(male)": [0.5, 0.6]}, index=["explicit", "implicit"]).to_csv(tables / "occugender__table3.csv")
        pd.DataFrame({"domain": ["gender"], "subdomain": ["all"], "pro_share": [0.6 + 0.01 * i]}).to_csv(
            tables / "rubia__rubia_scores.csv")
    params = Params.model_validate({
        "evaluation": {"benchmarks": {"rubia": {"module": "biaslab.benchmarks.rubia"}}},
        "variants": {v: {"method": m, "model_dir": "models/base"} for v, m in VARIANTS.items()},
        "tracking": {"tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}",
                     "artifact_location": str(tmp_path / "artifacts"), "experiment": "test"},
    })
    return tmp_path, params


def test_report_tables_have_every_variant(project):
    from biaslab.reporting.report import write_report

    root, params = project
    files = write_report(params, root)

    summary = pd.read_csv(files.summary_csv)
    assert set(summary["variant"]) == set(VARIANTS)
    assert {"value", "ci_low", "ci_high", "direction", "ideal"} <= set(summary.columns)

    points = pd.read_csv(files.bias_vs_accuracy_csv)
    assert list(points["variant"]) == list(VARIANTS)
    assert files.bias_vs_accuracy_png.stat().st_size > 1000
    plot = json.loads(files.bias_vs_accuracy_json.read_text())
    assert (plot["accuracy_metric"], plot["bias_metric"]) == (params.tune.accuracy_metric, params.tune.gap_metric)
    assert points.set_index("variant").loc["lora", "bias"] == pytest.approx(0.1)

    stacked = pd.read_csv(files.side_by_side_dir / "occugender__table3.csv", index_col=0)
    assert set(stacked["variant"]) == set(VARIANTS)

    # the paper report of every benchmark with paper tables (here RuBia's Table 1), one column per variant
    table_1 = pd.read_csv(files.paper_dir / "rubia" / "table_1.csv")
    evaluated = table_1[table_1["source"] == "evaluated"].set_index(["section", "row"])
    assert evaluated.loc[("Gender bias + PPLL scoring", "Overall"), "base"] == pytest.approx(60.0)
    assert (files.paper_dir / "rubia.md").read_text().startswith("# Paper report: rubia")

    md = files.report_md.read_text()
    assert "offline default model" in md and "fp2" in md  # which model produced the numbers
    assert "0.200 [0.150, 0.250]" in md  # value [CI]
    assert "rubia/pro_share | ◎ | 0.5" in md
    for variant in VARIANTS:
        assert f"| {variant} |" in md

    # biaslab compare's table: rubia's headline metric (pro_share: the same 0.55 for every variant here)
    assert "## Variants vs base: headline metrics" in md
    table = files.comparison_md.read_text()
    assert table.splitlines()[0] == "| benchmark | metric | base (base) | prompt | lora |"
    assert "| rubia |" in table and "0.550 [0.520, 0.580]" in table
    assert "rubia/pro_share/gender" in table  # a headline metric no variant has is named, not dropped
    assert "<table" in files.comparison_html.read_text()


def test_report_names_a_missing_metrics_file(project):
    from biaslab.registry import RegistryError
    from biaslab.reporting.report import write_report

    root, params = project
    (root / "metrics" / "prompt.json").unlink()
    with pytest.raises(RegistryError, match="prompt.json"):
        write_report(params, root)


def test_report_is_logged_to_mlflow(project, monkeypatch):
    import mlflow

    from pipelines.report import run_report

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    root, params = project
    try:
        run_report(params, root)
        runs = mlflow.search_runs(filter_string="tags.stage = 'report'", output_format="list")
        assert len(runs) == 1
        files = {f.path for f in mlflow.MlflowClient().list_artifacts(runs[0].info.run_id, "report")}
        assert {"report/report.md", "report/bias_vs_accuracy.png", "report/summary.csv", "report/comparison.md",
                "report/comparison.html"} <= files
    finally:
        mlflow.set_tracking_uri(None)
