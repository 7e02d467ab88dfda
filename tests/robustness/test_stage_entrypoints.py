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
    assert run_stage("pipelines/evaluate_variant.py", ["--variant", "nope"], monkeypatch) == 1
    err = capsys.readouterr().err
    assert "unknown variant 'nope'" in err and "base" in err
    assert not (workdir / "metrics").exists()


def test_mistyped_params_key(workdir, monkeypatch, capsys):
    text = (workdir / "params.yaml").read_text().replace("bootstrap_samples:", "bootstrap_sample:")
    (workdir / "params.yaml").write_text(text)
    assert run_stage("pipelines/evaluate_variant.py", ["--variant", "base"], monkeypatch) == 1
    assert "evaluation.bootstrap_sample" in capsys.readouterr().err


def test_variant_model_not_built(workdir, monkeypatch, capsys):
    assert run_stage("pipelines/evaluate_variant.py", ["--variant", "soft"], monkeypatch) == 1
    err = capsys.readouterr().err
    assert "models/soft" in err and "dvc repro" in err
    assert not (workdir / "metrics" / "soft.json").exists()


STAGES = [
    ("pipelines/prepare.py", []),
    ("pipelines/base_model.py", []),
    ("pipelines/edit_embeddings.py", ["--variant", "soft"]),
    ("pipelines/tune.py", []),
    ("pipelines/finetune.py", []),
    ("pipelines/evaluate_variant.py", ["--variant", "base"]),
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
