"""dvc.yaml <-> params.yaml <-> modules stay consistent (no stage points at a missing script or key)."""

from __future__ import annotations

import importlib
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from biaslab.config import load_params

ROOT = Path(__file__).resolve().parents[2]
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))
PARAMS = load_params(ROOT / "params.yaml")
RAW_PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))


def stage_bodies():
    for name, stage in DVC["stages"].items():
        yield name, stage.get("do", stage)


def test_every_stage_command_runs_an_existing_stage_module():
    """``python -m pipelines.<stage>``: the stage's code is one hop from dvc.yaml."""
    for name, body in stage_bodies():
        python, flag, module = body["cmd"].split()[:3]
        assert (python, flag) == ("python", "-m") and module.startswith("pipelines."), body["cmd"]
        path = ROOT / (module.replace(".", "/") + ".py")
        assert path.is_file(), f"stage {name}: {path} does not exist"


def test_code_dependencies_exist():
    for name, body in stage_bodies():
        for dep in body.get("deps", []):
            if dep.startswith("src/"):
                assert (ROOT / dep).exists(), f"stage {name}: dependency {dep} does not exist"


def test_params_dependencies_name_real_sections():
    for name, body in stage_bodies():
        for key in body.get("params", []):
            top = key.split(".")[0]
            assert top in RAW_PARAMS, f"stage {name}: params key {key} not in params.yaml"


def test_evaluate_runs_for_every_variant_and_register_sees_them_all():
    assert DVC["stages"]["evaluate"]["foreach"] == "${variants}"
    register_deps = DVC["stages"]["register"]["deps"]
    report_deps = DVC["stages"]["report"]["deps"]
    for variant in PARAMS.variants:
        assert f"metrics/{variant}.json" in register_deps, f"register does not depend on {variant}"
        assert f"metrics/{variant}.json" in report_deps, f"report does not depend on {variant}"
    calibrate_deps = DVC["stages"]["calibrate"]["deps"]
    for variant in PARAMS.variants:  # the paired reading reads every variant's per-item predictions
        assert f"data/predictions/{variant}" in calibrate_deps, f"calibrate does not depend on {variant}'s predictions"


def test_variant_model_dirs_are_produced_by_a_stage():
    produced = set()
    for name, body in stage_bodies():
        for out in body.get("outs", []):
            path = out if isinstance(out, str) else next(iter(out))
            produced.add(path.replace("${item}", "{item}").replace("${key}", "{item}"))
    for variant, cfg in PARAMS.variants.items():
        candidates = {cfg.model_dir, cfg.model_dir.replace(variant, "{item}")}
        assert candidates & produced, f"variant {variant}: no stage produces {cfg.model_dir}"


def test_edit_embeddings_stage_covers_embedding_variants():
    edited = set(DVC["stages"]["edit_embeddings"]["foreach"])
    embedding_variants = {v for v, c in PARAMS.variants.items() if c.method == "embedding"}
    assert embedding_variants <= edited


@pytest.mark.parametrize("name", sorted(PARAMS.evaluation.benchmarks))
def test_every_configured_benchmark_module_exports_a_benchmark(name):
    entry = PARAMS.evaluation.benchmarks[name]
    module = importlib.import_module(entry.module)
    benchmark = module.BENCHMARK
    assert benchmark.name == name
    assert benchmark.language in {"en", "uk", "ru", None}  # None: plain text, no prompt prefix (lm_quality)


@pytest.mark.skipif(shutil.which("dvc") is None and not (ROOT / ".venv/bin/dvc").exists(), reason="dvc missing")
def test_dvc_parses_the_pipeline():
    dvc = shutil.which("dvc") or str(ROOT / ".venv/bin/dvc")
    out = subprocess.run([dvc, "stage", "list"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for stage in ("prepare", "base_model", "evaluate@base", "evaluate@lora", "edit_embeddings@soft", "tune",
                  "finetune", "register", "report"):
        assert stage in out.stdout


def test_dvc_reads_yaml_with_the_c_loader():
    """Every dvc command parses dvc.yaml, params.yaml and dvc.lock with ruamel's safe loader (DVC's
    ``parse_yaml``). ruamel.yaml 0.19.1 installs its C parser only with the ``[oldlibyaml]`` extra; without it the
    pure-Python parser reads the 185 kB lock in ~1.3 s instead of ~0.2 s, in every ``dvc status`` and every
    stage start (docs/speed.md "Between stages"). The locked environment must have it."""
    from dvc.utils.serialize._yaml import parse_yaml
    from ruamel.yaml import YAML, main

    assert main.CParser is not None, "ruamel.yaml.clib is not installed (pyproject: ruamel.yaml[oldlibyaml])"
    assert YAML(typ="safe").Parser is main.CParser
    text = (ROOT / "dvc.yaml").read_text(encoding="utf-8")
    assert parse_yaml(text, "dvc.yaml") == yaml.safe_load(text)  # the C loader reads the pipeline as PyYAML does
