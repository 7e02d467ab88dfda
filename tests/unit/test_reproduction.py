"""``biaslab check-reproduction``: committed values inside the fresh run's CI pass, outside fail (exit 1);
identical numbers and the model digest are named; ``biaslab compare`` on the same project."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from biaslab.reporting import reproduction
from biaslab.cli.main import app
from biaslab.cli.options import EXIT_ERROR, EXIT_REFUSED
from biaslab.metrics.values import MetricValue

runner = CliRunner()


def test_statuses():
    ci = MetricValue(0.44, "target", 0.5, 0.42, 0.46)
    assert reproduction.check_metric("m", ci, 0.44).status == "identical"
    assert reproduction.check_metric("m", ci, 0.4373).status == "within_ci"
    assert reproduction.check_metric("m", ci, 0.47).status == "outside_ci"
    assert reproduction.check_metric("m", MetricValue(1.0, "lower"), 1.1).status == "no_ci"
    assert reproduction.check_metric("m", ci, None).status == "new"
    assert reproduction.check_metric("m", None, 0.4).status == "gone"
    checks = reproduction.check_variant({"a": ci}, {"a": 0.43, "b": 1.0, "c": None})
    assert [(c.metric, c.status) for c in checks] == [("a", "within_ci"), ("b", "gone")]
    assert checks[0].delta == pytest.approx(0.01)


def record(value, lo, hi, direction="lower", ideal=0.0):
    return {"value": value, "direction": direction, "ideal": ideal, "ci_low": lo, "ci_high": hi, "n": 100}


def lock(digest: str) -> str:
    return yaml.safe_dump({"schema": "2.0", "stages": {"base_model": {"outs": [
        {"path": "models/base", "hash": "md5", "md5": digest}]}}})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git checkout with committed values and a lock, then a fresh run on another machine."""
    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    git("init", "-q")
    git("config", "user.email", "t@example.org")
    git("config", "user.name", "t")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "variants": {"base": {"method": "none", "model_dir": "models/base"},
                     "lora": {"method": "lora", "model_dir": "models/lora"}},
        "evaluation": {"benchmarks": {"crows_pairs": {"module": "biaslab.benchmarks.crows_pairs"}}},
    }))
    values = tmp_path / "metrics" / "values"
    values.mkdir(parents=True)
    committed = {"base": {"crows_pairs/pct_stereotype": 0.4399, "crows_pairs/pct_stereotype_gender": 0.47},
                 "lora": {"crows_pairs/pct_stereotype": 0.41, "crows_pairs/pct_stereotype_gender": 0.45}}
    for variant, vals in committed.items():
        (values / f"{variant}.json").write_text(json.dumps(vals))
    (tmp_path / "dvc.lock").write_text(lock("6cbcc1a2.dir"))
    git("add", ".")
    git("commit", "-qm", "reference run")
    (tmp_path / "dvc.lock").write_text(lock("ecd0f701.dir"))  # another machine trained another model
    fresh = {"base": {"crows_pairs/pct_stereotype": record(0.4373, 0.413, 0.462, "target", 0.5),
                      "crows_pairs/pct_stereotype_gender": record(0.47, 0.43, 0.51, "target", 0.5)},
             "lora": {"crows_pairs/pct_stereotype": record(0.4101, 0.386, 0.434, "target", 0.5),
                      "crows_pairs/pct_stereotype_gender": record(0.46, 0.42, 0.50, "target", 0.5)}}
    for variant, metrics in fresh.items():
        (tmp_path / "metrics" / f"{variant}.json").write_text(json.dumps({"variant": variant, "metrics": metrics}))
    return tmp_path


def test_fresh_run_within_the_cis_is_reproduced(project):
    result = runner.invoke(app, ["check-reproduction", "--root", str(project)])
    assert result.exit_code == 0, result.output
    assert "reproduced:" in result.output and "not reproduced" not in result.output
    assert "a different model" in result.output and "ecd0f701.dir" in result.output


def test_same_scores_under_another_digest_are_the_same_model(project):
    """Two digests of one model (an older lock's training_summary.json held wall-clock minutes): the scores tell."""
    for variant, values in {"base": {"crows_pairs/pct_stereotype": 0.4399, "crows_pairs/pct_stereotype_gender": 0.47},
                            "lora": {"crows_pairs/pct_stereotype": 0.41,
                                     "crows_pairs/pct_stereotype_gender": 0.45}}.items():
        path = project / "metrics" / f"{variant}.json"
        data = json.loads(path.read_text())
        for metric, value in values.items():
            data["metrics"][metric]["value"] = value
        path.write_text(json.dumps(data))
    result = runner.invoke(app, ["check-reproduction", "--root", str(project)])
    assert result.exit_code == 0, result.output
    assert "the same model: every committed value is bit-identical" in result.output
    assert "a different model" not in result.output


def test_equal_digests_are_the_same_model(project):
    (project / "dvc.lock").write_text(lock("6cbcc1a2.dir"))
    result = runner.invoke(app, ["check-reproduction", "--root", str(project)])
    assert "the same model (identical digest)" in result.output, result.output


def test_model_verdict_counts_only_compared_values():
    ci = MetricValue(0.44, "target", 0.5, 0.42, 0.46)
    identical = reproduction.check_variant({"a": ci}, {"a": 0.44})
    assert reproduction.model_verdict("x.dir", "y.dir", identical)[0] is True
    assert reproduction.model_verdict("x.dir", "x.dir", [])[0] is True
    differs = reproduction.check_variant({"a": ci, "b": ci}, {"a": 0.44, "b": 0.45})
    same, sentence = reproduction.model_verdict("x.dir", "y.dir", differs)
    assert same is False and "1 of 2 values are not bit-identical" in sentence
    # a metric only one side has cannot show the same model: identical values plus a new metric stay undecided
    with_new = reproduction.check_variant({"a": ci, "n": ci}, {"a": 0.44})
    same, sentence = reproduction.model_verdict("x.dir", "y.dir", with_new)
    assert same is None and "1 more only on one side" in sentence
    assert reproduction.model_verdict("x.dir", None, reproduction.check_variant({"n": ci}, {}))[0] is None


def test_value_outside_the_ci_fails_and_is_named(project):
    path = project / "metrics" / "lora.json"
    data = json.loads(path.read_text())
    data["metrics"]["crows_pairs/pct_stereotype"] = record(0.30, 0.28, 0.32, "target", 0.5)
    path.write_text(json.dumps(data))
    result = runner.invoke(app, ["check-reproduction", "--root", str(project)])
    assert result.exit_code == EXIT_REFUSED, result.output
    assert "lora crows_pairs/pct_stereotype: committed 0.41 outside this run's CI [0.28, 0.32]" in result.output


def test_unknown_revision_is_a_clear_error(project):
    result = runner.invoke(app, ["check-reproduction", "--root", str(project), "--rev", "nope"])
    assert result.exit_code == EXIT_ERROR
    assert "metrics/values/base.json at nope" in result.output


def test_compare_shows_headline_metrics_with_marks(project):
    result = runner.invoke(app, ["compare", "--root", str(project), "--markdown"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "| benchmark | metric | base (base) | lora |"
    # pct_stereotype: target 0.5, lora further from it; CIs overlap -> worse within the CIs
    assert "| crows_pairs | pct_stereotype ◎ (ideal 0.5) | 0.437 [0.413, 0.462] | 0.410 [0.386, 0.434] ▽ −0.027 |" \
        in result.output
    result = runner.invoke(app, ["compare", "nope", "--root", str(project)])
    assert result.exit_code == EXIT_ERROR and "nope" in result.output
