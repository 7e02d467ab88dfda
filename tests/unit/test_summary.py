"""The one-screen summary: headline metrics vs base, the gate per variant, registry versions, next steps."""

from __future__ import annotations

import json

import yaml
from rich.console import Console
from typer.testing import CliRunner

from biaslab.reporting import summary
from biaslab.cli.main import app
from biaslab.config import load_params


def record(value, lo, hi, direction="lower", ideal=0.0):
    return {"value": value, "direction": direction, "ideal": ideal, "ci_low": lo, "ci_high": hi, "n": 40}


def write_project(root):
    (root / "params.yaml").write_text(yaml.safe_dump({
        "variants": {n: {"method": "none" if n == "base" else "embedding", "model_dir": f"models/{n}",
                          **({} if n == "base" else {"embedding_apply": "checkpoint"})}
                     for n in ("base", "good", "worse", "missing")},
        "evaluation": {"benchmarks": {"gbem_ua": {"module": "biaslab.benchmarks.gbem_ua"}}},
        "registry": {"model_name": "m", "gate": [
            {"metric": "gbem_ua/qa_diff_fem", "rule": "better_than_base_beyond_ci"},
            {"metric": "gbem_ua/qa_f1_man_nofem", "rule": "not_worse_than_base_minus", "tolerance": 0.05}]},
    }))
    values = {"base": (0.20, 0.18, 0.22, 0.70), "good": (0.05, 0.03, 0.07, 0.69), "worse": (0.19, 0.17, 0.21, 0.50)}
    (root / "metrics").mkdir()
    for name, (diff, lo, hi, f1) in values.items():
        (root / "metrics" / f"{name}.json").write_text(json.dumps({"variant": name, "metrics": {
            "gbem_ua/qa_diff_fem": record(diff, lo, hi),
            "gbem_ua/qa_f1_man_nofem": record(f1, f1 - 0.03, f1 + 0.03, "higher", 1.0)}}))
    (root / "runs").mkdir()
    (root / "runs" / "register.json").write_text(json.dumps({"versions": {"base": "1", "good": "2", "worse": "3"}}))


def test_summary_fits_one_screen_and_says_what_to_do(tmp_path):
    write_project(tmp_path)
    console = Console(width=summary.WIDTH, record=True)
    built = summary.print_summary(load_params(tmp_path / "params.yaml"), tmp_path, console=console)
    text = console.export_text()
    lines = text.splitlines()
    assert len(lines) <= 40 and max(len(line) for line in lines) <= summary.WIDTH
    assert built.not_evaluated == ["missing"] and "not evaluated: missing" in text
    assert "PASS good (version 2)" in text
    assert "FAIL worse (version 3): gbem_ua/qa_diff_fem: CIs overlap" in text and "(+1 more)" in text
    assert "biaslab promote good" in text and "make ui" in text
    row = next(line for line in lines if "qa_diff_fem" in line)
    assert "0.050 ▲" in row and "0.190 △" in row  # lower is better: good beyond the CIs, worse within


def test_summary_lists_a_skipped_variant_with_its_reason(tmp_path):
    """A variant whose mitigation did not apply (LoRA on a masked LM): its reason, not a gate FAIL or a column."""
    write_project(tmp_path)
    (tmp_path / "metrics" / "missing.json").write_text(json.dumps(
        {"variant": "missing", "metrics": {}, "skipped": "LoRA skipped: the model is a masked LM."}))
    console = Console(width=summary.WIDTH, record=True)
    built = summary.print_summary(load_params(tmp_path / "params.yaml"), tmp_path, console=console)
    text = console.export_text()
    assert built.skipped == {"missing": "LoRA skipped: the model is a masked LM."} and built.not_evaluated == []
    assert "Skipped: missing: LoRA skipped: the model is a masked LM." in text
    assert "missing" not in built.comparison.variants and all(g.variant != "missing" for g in built.gate)


def test_summary_command(tmp_path):
    write_project(tmp_path)
    result = CliRunner().invoke(app, ["summary", "--root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "biaslab summary" in result.output and "PASS good" in result.output
    (tmp_path / "metrics" / "base.json").unlink()
    result = CliRunner().invoke(app, ["summary", "--root", str(tmp_path)])
    assert result.exit_code == 2 and "metrics/base.json not found" in result.output


def test_summary_suggests_the_passing_variant_closest_to_the_ideal_on_the_gates_first_metric(tmp_path):
    """Two variants pass: the one listed later in params but with the smaller gate metric is suggested first."""
    write_project(tmp_path)
    (tmp_path / "metrics" / "missing.json").write_text(json.dumps({"variant": "missing", "metrics": {
        "gbem_ua/qa_diff_fem": record(0.01, 0.0, 0.02),
        "gbem_ua/qa_f1_man_nofem": record(0.70, 0.67, 0.73, "higher", 1.0)}}))
    console = Console(width=summary.WIDTH, record=True)
    built = summary.print_summary(load_params(tmp_path / "params.yaml"), tmp_path, console=console)
    text = console.export_text()
    assert summary.best_first(built.gate) == ["missing", "good"]  # params order is good, worse, missing
    assert "biaslab promote missing" in text and "(passed the gate: missing, good)" in text


def test_a_script_without_a_main_guard_can_build_the_summary(tmp_path):
    """Worker processes are spawned, and a spawned worker imports the caller's main script again: a plain
    script (no ``if __name__ == "__main__":``) would die in it. So :func:`summary.build` is serial unless asked;
    the ``report`` stage and ``biaslab summary`` ask for every CPU."""
    import subprocess
    import sys

    write_project(tmp_path)
    script = tmp_path / "plain.py"
    script.write_text("from biaslab.config import load_params\nfrom biaslab.reporting import summary\n"
                      f"built = summary.build(load_params({str(tmp_path / 'params.yaml')!r}), {str(tmp_path)!r})\n"
                      "print([(g.variant, g.passed) for g in built.gate])\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "('good', True)" in done.stdout and "('worse', False)" in done.stdout
