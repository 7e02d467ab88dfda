"""The DVC remote workflow of the scale-out docs: push pipeline outputs, lose them, pull them back.

A local directory stands in for the S3/GCS bucket (same commands: `dvc remote add -d store <url>`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def run(*args: str, cwd: Path) -> str:
    out = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_outputs_round_trip_through_a_remote(tmp_path):
    dvc = str(Path(sys.executable).with_name("dvc"))
    repo, remote = tmp_path / "repo", tmp_path / "remote"
    repo.mkdir()
    run("git", "init", "-q", cwd=repo)
    run(dvc, "init", "-q", cwd=repo)
    model = repo / "models" / "base"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"\x00\x01weights" * 1000)
    (model / "config.json").write_text('{"model_type": "llama"}')
    run(dvc, "add", "models/base", cwd=repo)
    run(dvc, "remote", "add", "-d", "store", str(remote), cwd=repo)
    run(dvc, "push", cwd=repo)
    shutil.rmtree(model)
    shutil.rmtree(repo / ".dvc" / "cache")
    run(dvc, "pull", cwd=repo)
    assert (model / "model.safetensors").read_bytes() == b"\x00\x01weights" * 1000
    assert (model / "config.json").read_text() == '{"model_type": "llama"}'
