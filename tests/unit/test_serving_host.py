"""What a package may decide and what it may not: the serving host's options, the manifest check, the
checkpoint's place, strict booleans in params.yaml, corrupted weights and pickled adapters.

Tiny models built here; no registry (a package directory is what MLflow hands the pyfunc loader).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from biaslab.config import ConfigError, ModelConfig


def _package(tmp_path: Path, tokenizer, model) -> Path:
    from biaslab.registry import VariantSource
    from biaslab.serving.manifest import write_manifest
    from biaslab.serving.package import package_servable
    from biaslab.serving.settings import ServingSettings

    checkpoint = tmp_path / "checkpoint"
    model.save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)
    package = tmp_path / "package"
    shutil.copytree(checkpoint, package)
    package_servable(package, VariantSource("base", "none", "full", checkpoint), flavor="artifacts",
                     base_reference=None, model_name="m", settings=ServingSettings(), prompt_prefix={})
    write_manifest(package)
    return package


def _rewrite_flavor(package: Path, **changes) -> None:
    """What a registrant could write into its own package: a flavour of its choosing, manifest re-hashed."""
    from biaslab.serving.manifest import write_manifest

    mlmodel = yaml.safe_load((package / "MLmodel").read_text())
    flavor = mlmodel["flavors"]["biaslab"]
    for key, value in changes.items():
        if key in ("trust_remote_code", "allow_pickle"):
            flavor["settings"][key] = value
        else:
            flavor[key] = value
    (package / "MLmodel").write_text(yaml.safe_dump(mlmodel))
    write_manifest(package)


def test_a_changed_or_added_file_refuses_to_load_naming_it(tmp_path, tiny_tokenizer, tiny_causal_model):
    from biaslab.serving.loader import load_served_variant
    from biaslab.serving.manifest import PackageIntegrityError, verify_package

    package = _package(tmp_path, tiny_tokenizer, tiny_causal_model)
    verify_package(package)
    weights = package / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    with pytest.raises(PackageIntegrityError, match=r"files differ from biaslab_manifest.json: model.safetensors "
                                                    r"changed .*refusing to load"):
        load_served_variant(package)
    weights.write_bytes(original)
    (package / "extra.py").write_text("print('hello')")
    with pytest.raises(PackageIntegrityError, match="extra.py not in the manifest"):
        load_served_variant(package)
    (package / "extra.py").unlink()
    (package / "biaslab_manifest.json").unlink()
    with pytest.raises(PackageIntegrityError, match="no biaslab_manifest.json"):
        load_served_variant(package)


def test_the_manifest_hash_recorded_elsewhere_catches_a_rewritten_manifest(tmp_path, tiny_tokenizer, tiny_causal_model):
    from biaslab.serving.manifest import PackageIntegrityError, sha256_file, verify_package, write_manifest

    package = _package(tmp_path, tiny_tokenizer, tiny_causal_model)
    recorded = sha256_file(package / "biaslab_manifest.json")
    (package / "config.json").write_text("{}")
    write_manifest(package)  # consistent again, but not the manifest that was recorded
    verify_package(package)
    with pytest.raises(PackageIntegrityError, match="the manifest was rewritten after it was recorded"):
        verify_package(package, recorded)


def test_the_host_not_the_package_decides_what_code_runs(tmp_path, tiny_tokenizer, tiny_causal_model, monkeypatch):
    from biaslab.models import load as models
    from biaslab.models.load import load_model
    from biaslab.serving.loader import load_served_variant
    from biaslab.serving.settings import ALLOW_PICKLE_ENV, TRUST_REMOTE_CODE_ENV, HostOptions

    package = _package(tmp_path, tiny_tokenizer, tiny_causal_model)
    _rewrite_flavor(package, trust_remote_code=True, allow_pickle=True, checkpoint="../../elsewhere")
    calls = []
    monkeypatch.setattr(models, "load_model", lambda *a, **kw: calls.append((a, kw)) or load_model(*a, **kw))
    monkeypatch.delenv(TRUST_REMOTE_CODE_ENV, raising=False)
    monkeypatch.delenv(ALLOW_PICKLE_ENV, raising=False)
    load_served_variant(package)
    (checkpoint,), options = calls[-1]
    assert options["trust_remote_code"] is False and options["allow_pickle"] is False
    assert Path(checkpoint) == package.resolve()  # the layout's place, not the flavour's "../../elsewhere"
    monkeypatch.setenv(TRUST_REMOTE_CODE_ENV, "true")
    load_served_variant(package)
    assert calls[-1][1]["trust_remote_code"] is True
    for lax in ("yes", "1", "True"):
        with pytest.raises(ConfigError, match=f"{TRUST_REMOTE_CODE_ENV}={lax!r}: write true or false"):
            HostOptions.from_env({TRUST_REMOTE_CODE_ENV: lax})
    assert HostOptions(allow_pickle=True).env() == {TRUST_REMOTE_CODE_ENV: "false", ALLOW_PICKLE_ENV: "true"}


def test_a_checkpoint_folder_leading_outside_the_package_is_refused(tmp_path, tiny_tokenizer, tiny_causal_model):
    from biaslab.serving.base import BaseResolutionError, checkpoint_dir
    from biaslab.serving.loader import load_served_variant
    from biaslab.serving.manifest import PackageIntegrityError

    outside = tmp_path / "outside"
    tiny_causal_model.save_pretrained(outside)
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "model").symlink_to(outside, target_is_directory=True)
    with pytest.raises(BaseResolutionError, match="leads outside the package"):
        checkpoint_dir(package)
    with pytest.raises(PackageIntegrityError, match=r"symbolic links \['model'\]"):
        load_served_variant(package)


@pytest.mark.parametrize("field,value", [("trust_remote_code", "yes"), ("trust_remote_code", 1),
                                         ("allow_pickle", 1), ("allow_pickle", "true")])
def test_loading_flags_in_params_are_strict_booleans(field, value):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="Input should be a valid boolean"):
        ModelConfig(**{field: value, "revision": "a" * 40})


def test_remote_code_needs_a_pinned_commit():
    from pydantic import ValidationError

    for revision in (None, "main", "v1.0", "A" * 40, "a" * 39):
        with pytest.raises(ValidationError, match="needs model.revision pinned to a 40-hex commit sha"):
            ModelConfig(trust_remote_code=True, revision=revision)
    assert ModelConfig(trust_remote_code=True, revision="0123456789abcdef0123456789abcdef01234567").trust_remote_code


def test_a_corrupted_safetensors_file_is_one_line(tmp_path, tiny_tokenizer, tiny_causal_model):
    from biaslab.models.load import ModelLoadError, load_model

    tiny_causal_model.save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\xff" * 8 + weights.read_bytes()[8:64])  # a header length past the end
    with pytest.raises(ModelLoadError) as caught:
        load_model(tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "a safetensors file is corrupted or truncated" in message
    assert caught.value.__cause__ is None  # `raise ... from None`: the stage prints this one line


def test_an_adapter_loads_from_safetensors_only_never_a_pickled_bin(tmp_path, tiny_tokenizer, tiny_causal_model):
    import torch

    from biaslab.models.load import LoadedModel, ModelLoadError, apply_overlay

    overlay = tmp_path / "lora"
    overlay.mkdir()
    (overlay / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2,
                                                             "target_modules": ["q_proj"]}))
    torch.save({}, overlay / "adapter_model.bin")
    loaded = LoadedModel(tiny_causal_model, tiny_tokenizer, "causal", "fp", str(tmp_path))
    with pytest.raises(ModelLoadError, match=r"no adapter_model.safetensors \(found \['adapter_model.bin'\]\); "
                                             "adapters load from safetensors only"):
        apply_overlay(loaded, overlay)
