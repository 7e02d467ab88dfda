"""Profiles (params.yaml ``profile`` / ``profiles``, docs/profiles.md): validation, the default's settings, and the
stages of a disabled variant, which must do nothing, say so in one line and write marked outputs."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from biaslab.config import ConfigError, Params, load_params

ROOT = Path(__file__).resolve().parents[2]


def write_params(path: Path, **changes) -> Path:
    """The project's params.yaml with top-level keys replaced."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw.update(changes)
    path.write_text(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def profiles_with(**extra) -> dict:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    return {**raw["profiles"], **extra}


# --------------------------------------------------------------------------- config
def test_the_default_profile_runs_every_variant_with_the_sections_unchanged():
    params = load_params(ROOT / "params.yaml")
    assert params.profile == "full"
    assert params.enabled_variants() == list(params.variants)
    assert all(params.disabled_reason(n) is None for n in params.variants)
    # the default's studies are the sections themselves: the same settings, the same study hashes as before
    assert params.shared_study() is params.tune
    assert params.tune_for("lora") is params.tune
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    expected = {**params.tune.model_dump(), **raw["variants"]["lora_clp"]["tune_overrides"],
                "storage": "journal:models/tune_lora_clp/study.journal"}
    assert params.tune_for("lora_clp").model_dump(mode="json") == \
        type(params.tune).model_validate(expected).model_dump(mode="json")


def test_a_params_file_without_profiles_is_the_full_profile():
    params = Params()
    assert params.profile == "full" and params.enabled_variants() == []


def test_unknown_profile_is_one_line_naming_the_key(tmp_path):
    path = write_params(tmp_path / "params.yaml", profile="qiuck")
    with pytest.raises(ConfigError) as err:
        load_params(path)
    message = str(err.value)
    assert "\n" not in message
    assert f"{path}: profile: unknown profile 'qiuck'; profiles defines: full, paper, quick" == message


@pytest.mark.parametrize("profile,expected", [
    ({"variants": ["base", "nope"]}, "profiles.mine.variants: unknown variant(s) 'nope'"),
    ({"variants": ["prompt"]}, "profiles.mine.variants: must list base"),
    ({"tune": {"output_dir": "x"}}, "profiles.mine.tune: output_dir cannot be set by a profile"),
    ({"tune": {"n_trials": 0}}, "profiles.mine.tune: n_trials: Input should be greater than or equal to 1"),
    ({"variant": ["base"]}, "profiles.mine.variant: Extra inputs are not permitted"),
])
def test_a_bad_profile_names_its_key(tmp_path, profile, expected):
    path = write_params(tmp_path / "params.yaml", profile="mine", profiles=profiles_with(mine=profile))
    with pytest.raises(ConfigError) as err:
        load_params(path)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_quick_runs_one_of_each_kind_with_smaller_studies(tmp_path):
    params = load_params(write_params(tmp_path / "params.yaml", profile="quick"))
    assert params.enabled_variants() == ["base", "prompt", "hard", "lora"]
    assert {params.variant(n).method for n in params.enabled_variants()} == {"none", "prompt", "embedding", "lora"}
    assert params.shared_study().n_trials == 2 and params.shared_study().trial_max_steps == 20
    assert params.tune_for("lora_clp").n_trials == 2  # a variant's own study is sized by the profile too
    assert params.tune_for("lora_clp").output_dir == "models/tune_lora_clp"  # but stays where its stage writes
    assert "disabled by profile 'quick'" in params.disabled_reason("soft")


# --------------------------------------------------------------------------- disabled stages
def run_stage(module: str, argv: list[str]) -> int:
    import importlib

    return importlib.import_module(module).main(argv)


@pytest.fixture
def quick_dir(tmp_path, monkeypatch):
    """An empty project folder with the quick profile and a profile that uses no shared study (no models/base,
    no prepared data: a disabled stage must not need them)."""
    write_params(tmp_path / "params.yaml", profile="quick",
                 profiles=profiles_with(clp_only={"variants": ["base", "prompt", "lora_clp"]}))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_disabled_embedding_edit_writes_a_marked_directory(quick_dir, capsys):
    assert run_stage("pipelines.edit_embeddings", ["--variant", "soft"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("edit_embeddings@soft: disabled by profile 'quick'")
    manifest = json.loads((quick_dir / "models" / "soft" / "variant.json").read_text())
    assert manifest["disabled"] == "quick" and "disabled by profile" in manifest["skipped"]
    assert sorted(p.name for p in (quick_dir / "models" / "soft").iterdir()) == ["variant.json"]
    assert json.loads((quick_dir / "runs" / "edit_embeddings_soft.json").read_text())["disabled"] == "quick"
    assert not (quick_dir / "mlruns").exists()  # no MLflow run for a stage that did nothing


def test_a_disabled_finetune_and_its_study(quick_dir, capsys):
    assert run_stage("pipelines.tune", ["--variant", "lora_clp"]) == 0
    assert run_stage("pipelines.finetune", ["--variant", "lora_clp"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["tune_variant@lora_clp", "finetune@lora_clp"]
    best = json.loads((quick_dir / "models" / "tune_lora_clp" / "best_params.json").read_text())
    assert best["params"] == {} and best["disabled"] == "quick"
    assert json.loads((quick_dir / "models" / "lora_clp" / "variant.json").read_text())["method"] == "lora"
    assert (quick_dir / "models" / "lora_clp_checkpoints").is_dir()  # a declared (persistent) output
    assert (quick_dir / "reports" / "curves" / "finetune_lora_clp").is_dir()
    assert json.loads((quick_dir / "runs" / "finetune_lora_clp.json").read_text())["disabled"] == "quick"
    assert not (quick_dir / "mlruns").exists()


def test_the_shared_study_is_disabled_only_when_no_enabled_variant_uses_it(quick_dir, capsys):
    from pipelines.stage.profile import shared_study_reason

    assert shared_study_reason(load_params("params.yaml")) is None  # quick runs lora, which trains from it
    text = (quick_dir / "params.yaml").read_text().replace("profile: quick", "profile: clp_only")
    (quick_dir / "params.yaml").write_text(text)
    assert run_stage("pipelines.tune", []) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert line.startswith("tune: disabled by profile 'clp_only': no variant it lists trains from this study")
    assert json.loads((quick_dir / "runs" / "tune.json").read_text())["disabled"] == "clp_only"


def test_a_disabled_evaluate_writes_metrics_that_say_so(quick_dir, capsys):
    from biaslab.outputs import metrics_file

    assert run_stage("pipelines.evaluate", ["--variant", "soft"]) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert line.startswith("evaluate@soft: disabled by profile 'quick'")
    found = metrics_file.read(quick_dir / "metrics" / "soft.json")
    assert found.metrics == {} and "disabled by profile 'quick'" in found.skipped
    assert json.loads((quick_dir / "metrics" / "values" / "soft.json").read_text()) == {}
    assert list((quick_dir / "data" / "predictions" / "soft").iterdir()) == []
    assert "disabled by profile" in (quick_dir / "reports" / "tables" / "soft" / "summary.md").read_text()
    assert not (quick_dir / "mlruns").exists()


def test_an_enabled_variant_is_not_disabled(quick_dir, capsys):
    """evaluate@hard under quick goes to the real evaluation, which fails here for want of models/hard."""
    assert run_stage("pipelines.evaluate", ["--variant", "hard"]) == 1
    assert "models/hard" in capsys.readouterr().err


def test_register_skips_a_disabled_prompt_variant(quick_dir):
    """The prompt variant has no directory of its own to say it was disabled: register is told by the profile."""
    from pipelines.stage.profile import disabled_names

    names = disabled_names(load_params("params.yaml"))
    assert set(names) == {"soft", "hard_k16", "lora_cda", "lora_clp", "lora_clp_cda", "positive_control", "negative_control"}
    text = (quick_dir / "params.yaml").read_text().replace("profile: quick", "profile: clp_only")
    (quick_dir / "params.yaml").write_text(text)
    assert "prompt" not in disabled_names(load_params("params.yaml"))


def test_compose_shards_divide_the_profiles_variants(quick_dir, capsys):
    """The scale-out workers (pipelines/stage/shard.py) share out the variants that run; collect runs the rest."""
    from pipelines.stage import shard

    targets = []
    for i in (1, 2):
        assert shard.main([f"{i}/2", "--dry-run"]) == 0
        targets += capsys.readouterr().out.split()
    assert sorted(targets) == sorted(f"evaluate@{n}" for n in ("base", "prompt", "hard", "lora"))


def test_only_the_active_profile_must_name_defined_variants(tmp_path):
    """Trimmed variants (a smoke run, a user's own set) still load while paper/quick name the full set; selecting
    such a profile fails naming the missing variant."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw["variants"] = {k: v for k, v in raw["variants"].items() if k in ("base", "prompt")}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), encoding="utf-8")
    assert load_params(path).enabled_variants() == ["base", "prompt"]
    raw["profile"] = "quick"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), encoding="utf-8")
    with pytest.raises(ConfigError, match="profiles.quick.variants: unknown variant"):
        load_params(path)
