"""Stage scripts fail cleanly: non-zero exit, a message naming the key/variant, no partial output."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_stage(script: str, args: list[str], monkeypatch) -> int:
    spec = importlib.util.spec_from_file_location(f"stage_{Path(script).stem}", ROOT / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(sys, "argv", [script, *args])
    return module.main()


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_unknown_variant(workdir, monkeypatch, capsys):
    assert run_stage("pipelines/evaluate.py", ["--variant", "nope"], monkeypatch) == 1
    err = capsys.readouterr().err
    assert "unknown variant 'nope'" in err and "base" in err
    assert not (workdir / "metrics").exists()


def test_mistyped_params_key(workdir, monkeypatch, capsys):
    text = (workdir / "params.yaml").read_text().replace("bootstrap_samples:", "bootstrap_sample:")
    (workdir / "params.yaml").write_text(text)
    assert run_stage("pipelines/evaluate.py", ["--variant", "base"], monkeypatch) == 1
    assert "evaluation.bootstrap_sample" in capsys.readouterr().err


def test_variant_model_not_built(workdir, monkeypatch, capsys):
    assert run_stage("pipelines/evaluate.py", ["--variant", "soft"], monkeypatch) == 1
    err = capsys.readouterr().err
    assert "models/soft" in err and "dvc repro" in err
    assert not (workdir / "metrics" / "soft.json").exists()


STAGES = [
    ("pipelines/preflight.py", []),
    ("pipelines/raw_data.py", []),
    ("pipelines/prepare.py", []),
    ("pipelines/base_model.py", []),
    ("pipelines/control_model.py", []),
    ("pipelines/edit_embeddings.py", ["--variant", "soft"]),
    ("pipelines/gate_control.py", ["--variant", "negative_control"]),
    ("pipelines/tune.py", []),
    ("pipelines/finetune.py", []),
    ("pipelines/evaluate.py", ["--variant", "base"]),
    ("pipelines/calibrate.py", []),
    ("pipelines/register.py", []),
    ("pipelines/report.py", []),
]


@pytest.mark.parametrize("script,args", STAGES, ids=[Path(s).stem for s, _ in STAGES])
def test_every_stage_names_a_mistyped_params_key_and_writes_nothing(workdir, monkeypatch, capsys, script, args):
    text = (workdir / "params.yaml").read_text().replace("  learning_rate: 0.00025", "  lerning_rate: 0.00025")
    (workdir / "params.yaml").write_text(text)
    assert run_stage(script, args, monkeypatch) == 1
    assert "lora.lerning_rate" in capsys.readouterr().err
    for output in ("data", "models", "metrics", "runs", "reports"):
        assert not (workdir / output).exists(), f"{script} left {output}/ behind"


@pytest.mark.parametrize("script,args", STAGES, ids=[Path(s).stem for s, _ in STAGES])
def test_every_stage_failure_is_one_line(workdir, monkeypatch, capsys, script, args):
    """A mistyped key reads ``<stage> failed: <cause>``: one line, no traceback."""
    text = (workdir / "params.yaml").read_text().replace("  learning_rate: 0.00025", "  lerning_rate: 0.00025")
    (workdir / "params.yaml").write_text(text)
    assert run_stage(script, args, monkeypatch) == 1
    err = capsys.readouterr().err.strip()
    assert "failed:" in err and "Traceback" not in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("script,args", STAGES, ids=[Path(s).stem for s, _ in STAGES])
def test_every_stage_names_its_missing_input(workdir, monkeypatch, capsys, script, args):
    """Run out of order (nothing built yet): one line that names what is missing and what to run, exit 1."""
    if script.endswith("preflight.py"):
        pytest.skip("preflight reads no stage's output: params.yaml and the machine (tests/unit/test_preflight.py)")
    if script.endswith("raw_data.py"):
        pytest.skip("raw_data's input is the data mirror or the pinned sources (tests/unit/test_raw_data_stage.py)")
    if script.endswith("prepare.py"):
        pytest.skip("prepare's input is the data mirror (tests/unit/test_data_prepare.py)")
    if script.endswith("base_model.py"):
        pytest.skip("base_model trains from the corpora mirror when models/base is absent")
    assert run_stage(script, args, monkeypatch) == 1
    err = capsys.readouterr().err.strip()
    assert "failed:" in err and "Traceback" not in err, err
    assert "dvc repro" in err or "run the" in err, err  # says which stage to run


def test_a_bug_keeps_its_traceback(workdir, monkeypatch):
    """Only the project's own errors become one line: anything else propagates (a bug to fix, not a user error)."""
    spec = importlib.util.spec_from_file_location("stage_report_bug", ROOT / "pipelines/report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(module, "write_report", broken)
    monkeypatch.setattr(sys, "argv", ["pipelines/report.py"])
    with pytest.raises(KeyError, match="a bug"):
        module.main()
