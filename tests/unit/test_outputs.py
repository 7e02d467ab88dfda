"""The on-disk formats of biaslab.outputs: metrics files, variant directories, run files."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from biaslab.errors import MissingInputError
from biaslab.metrics.values import MetricValue
from biaslab.outputs import metrics_file, paths, run_file, variant_dir
from biaslab.outputs.metrics_file import MetricsFileError
from biaslab.outputs.variant_dir import VariantDirError

METRICS = {
    "b/qa_diff": MetricValue(0.25, "lower", ideal=0.0, ci_low=0.2, ci_high=0.3, n=40, description="gap"),
    "a/f1": MetricValue(0.5, "higher", ideal=1.0),
    "c/share": MetricValue(math.nan, "target", ideal=0.5),
}


# --------------------------------------------------------------------------- metrics files
def test_metrics_file_round_trip_and_dvc_values(tmp_path):
    path = metrics_file.write(tmp_path, "v", METRICS, method="none", model_dir="models/v", model_source="models/v",
                              model_fingerprint="fp", run_id="r1")
    assert path == tmp_path / "metrics" / "v.json"
    back = metrics_file.read_variant(tmp_path, "v")
    assert back.variant == "v" and back.model_fingerprint == "fp" and back.run_id == "r1"
    assert back.metrics["b/qa_diff"] == METRICS["b/qa_diff"] and back.metrics["a/f1"] == METRICS["a/f1"]
    assert math.isnan(back.metrics["c/share"].value)
    values = metrics_file.read_values(tmp_path, "v")
    assert list(values) == ["a/f1", "b/qa_diff", "c/share"] and values["b/qa_diff"] == 0.25


def test_metrics_file_layout_is_stable(tmp_path):
    """The exact JSON that register/report/dvc read: sorted metrics, None fields left out, meta after."""
    metrics_file.write(tmp_path, "v", {"a/f1": MetricValue(0.5, "higher", ideal=1.0)}, method="none", run_id="r")
    raw = json.loads((tmp_path / paths.metrics_file("v")).read_text())
    assert list(raw) == ["metrics", "variant", "method", "run_id"]
    assert raw["metrics"] == {"a/f1": {"value": 0.5, "direction": "higher", "ideal": 1.0}}
    assert (tmp_path / paths.metric_values_file("v")).read_text() == '{\n  "a/f1": 0.5\n}\n'


def test_metrics_file_of_a_skipped_variant_says_why(tmp_path):
    """A variant whose mitigation does not apply: no metrics, the reason as ``skipped`` (absent otherwise)."""
    metrics_file.write(tmp_path, "lora", {}, method="lora", model_dir="models/lora", run_id="r", skipped="why")
    raw = json.loads((tmp_path / paths.metrics_file("lora")).read_text())
    assert raw == {"metrics": {}, "variant": "lora", "method": "lora", "model_dir": "models/lora", "run_id": "r",
                   "skipped": "why"}
    assert metrics_file.read_values(tmp_path, "lora") == {}
    back = metrics_file.read_variant(tmp_path, "lora")
    assert back.skipped == "why" and back.metrics == {}
    metrics_file.write(tmp_path, "v", METRICS, method="none")
    assert "skipped" not in json.loads((tmp_path / paths.metrics_file("v")).read_text())
    assert metrics_file.read_variant(tmp_path, "v").skipped is None


def test_metrics_file_errors_name_the_file(tmp_path):
    with pytest.raises(MissingInputError, match=r"metrics/w\.json.*dvc repro"):
        metrics_file.read_variant(tmp_path, "w")
    assert metrics_file.read_if_present(tmp_path, "w") is None
    (tmp_path / "metrics").mkdir()
    (tmp_path / paths.metrics_file("w")).write_text('{"values": {}}')
    with pytest.raises(MetricsFileError, match=r"w\.json: not a metrics file"):
        metrics_file.read_variant(tmp_path, "w")
    with pytest.raises(ValueError, match="unknown field"):
        metrics_file.write(tmp_path, "w", METRICS, color="blue")


# --------------------------------------------------------------------------- variant directories
@pytest.fixture
def model_dir(tmp_path):
    d = tmp_path / "m"
    for rel, content in {
        "model.safetensors": "weights", "config.json": '{"a": 1}', "sub/tokenizer.json": "tok",
        "training_summary.json": "summary", "README.md": "card", "run.json": "r",
        "checkpoint-3/optimizer.pt": "x", ".hidden/x": "h", ".DS_Store": "h",
    }.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(content)
    return d


def test_model_files_and_fingerprint(model_dir):
    files = [p.relative_to(model_dir).as_posix() for p in variant_dir.model_files(model_dir)]
    assert files == ["config.json", "model.safetensors", "sub/tokenizer.json", "training_summary.json"]
    fingerprinted = [p.relative_to(model_dir).as_posix() for p in variant_dir.model_files(model_dir, metadata=False)]
    assert fingerprinted == ["config.json", "model.safetensors", "sub/tokenizer.json"]
    digest = hashlib.sha256()  # the definition, computed directly
    for rel in fingerprinted:
        digest.update(rel.encode())
        digest.update((model_dir / rel).read_bytes())
    assert variant_dir.fingerprint_dir(model_dir) == digest.hexdigest()[:16]
    # pinned: models, tune studies and registry versions are found by this value; it must not move
    assert variant_dir.fingerprint_dir(model_dir) == "f09e0aa7ac428513"


def test_fingerprint_ignores_metadata_but_not_weights(model_dir):
    before = variant_dir.fingerprint_dir(model_dir)
    (model_dir / "training_summary.json").write_text("another run, same weights")
    assert variant_dir.fingerprint_dir(model_dir) == before
    (model_dir / "model.safetensors").write_text("other weights")
    assert variant_dir.fingerprint_dir(model_dir) != before


def test_manifest_kind_and_base(tmp_path, model_dir):
    assert variant_dir.kind(model_dir) == "full" and variant_dir.read_manifest(model_dir) is None
    overlay = tmp_path / "models" / "lora"
    overlay.mkdir(parents=True)
    variant_dir.write_manifest(overlay, base="models/base", method="lora", global_step=3)
    assert variant_dir.kind(overlay) == "overlay" and variant_dir.kind(tmp_path / "nothing") is None
    assert variant_dir.read_manifest(overlay) == {"base": "models/base", "method": "lora", "global_step": 3}
    assert variant_dir.base_dir(overlay, tmp_path) == (tmp_path / "models" / "base").resolve()
    (overlay / variant_dir.MANIFEST).write_text('{"method": "lora"}')
    with pytest.raises(VariantDirError, match="no 'base' key"):
        variant_dir.read_manifest(overlay)


def test_skip_reason_of_a_variant_dir(tmp_path, model_dir):
    assert variant_dir.skip_reason(model_dir) is None and variant_dir.skip_reason(tmp_path / "nothing") is None
    built = tmp_path / "models" / "soft"
    built.mkdir(parents=True)
    variant_dir.write_manifest(built, base="models/base", method="embedding")
    assert variant_dir.skip_reason(built) is None
    skipped = tmp_path / "models" / "lora"
    skipped.mkdir(parents=True)
    variant_dir.write_manifest(skipped, base="models/base", method="lora", skipped="LoRA skipped: why")
    assert variant_dir.skip_reason(skipped) == "LoRA skipped: why" and variant_dir.model_files(skipped) == [
        skipped / variant_dir.MANIFEST]


# --------------------------------------------------------------------------- run files
def test_run_file_round_trip_and_missing(tmp_path):
    path = tmp_path / paths.run_file("evaluate", "base")
    run_file.write(path, run_id="r", variant="base", model_dir="models/base")
    assert path.name == "evaluate_base.json" and list(json.loads(path.read_text())) == ["model_dir", "run_id",
                                                                                        "variant"]
    assert run_file.read(path)["run_id"] == "r"
    with pytest.raises(MissingInputError, match="tune.json"):
        run_file.read(tmp_path / paths.run_file("tune"))
    assert run_file.registered_versions(tmp_path / paths.run_file("register")) == {}
    run_file.write(tmp_path / paths.run_file("register"), model_name="m", versions={"base": "1"}, candidate="1")
    assert run_file.registered_versions(tmp_path / paths.run_file("register")) == {"base": "1"}
