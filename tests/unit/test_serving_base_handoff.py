"""Issue 41 (bytes): the promoter hands its verified base package to the re-scoring load of an overlay or prompt
version (:class:`biaslab.serving.base.VerifiedBase`), so the loader neither downloads nor hashes the base a
second time - and only when the version's pin names exactly that base (model, version, manifest hash).

Uses :mod:`test_serving`'s registered tiny variants (a local store)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_serving import MODEL, SENTENCES, registered  # noqa: F401 (the module-scoped fixture)


def _downloaded(client, version: str, dst: Path) -> Path:
    """A version's package in a folder of the test's own, as the promoter downloads it (``_downloaded``)."""
    from biaslab.registry.promote import download_version

    mv = client.get_model_version(MODEL, version)
    dst.mkdir()
    return download_version(client, mv, client.get_run(mv.run_id), dst)


def _handed(client, versions, tmp_path):
    """The base downloaded and verified as the promoter does, and the VerifiedBase it hands over."""
    from biaslab.serving.base import VerifiedBase
    from biaslab.serving.manifest import verify_package

    base_mv = client.get_model_version(MODEL, versions["base"])
    manifest = client.get_run(base_mv.run_id).data.params["manifest_sha256"]
    base = _downloaded(client, versions["base"], tmp_path / "base")
    verify_package(base, manifest)
    return VerifiedBase(MODEL, str(versions["base"]), manifest, base)


def _counting(monkeypatch):
    """Counts of the base's weight-file hashes (``sha256_file`` of ``model.safetensors``) and of pin resolutions
    (``resolve_base``: a download or private copy of the base, then its hash)."""
    from biaslab.serving import base as base_module
    from biaslab.serving import manifest

    counts = {"base weight hashed": 0, "base resolved": 0}
    real_hash, real_resolve = manifest.sha256_file, base_module.resolve_base

    def hashing(path):
        if Path(path).name == "model.safetensors":
            counts["base weight hashed"] += 1
        return real_hash(path)

    def resolving(*args, **kwargs):
        counts["base resolved"] += 1
        return real_resolve(*args, **kwargs)

    monkeypatch.setattr(manifest, "sha256_file", hashing)
    monkeypatch.setattr(base_module, "resolve_base", resolving)
    return counts


@pytest.mark.parametrize("variant", ["rows", "lora", "prompt"])
def test_an_overlay_or_prompt_loads_on_the_handed_base_without_fetching_or_hashing_it_again(
        registered, tmp_path, monkeypatch, variant):  # noqa: F811
    """Without a handed base the loader resolves the pin (1 download/copy) and hashes the base's weights (1);
    with the promoter's verified base, 0 and 0 - and it scores exactly as the resolved base does."""
    from mlflow import MlflowClient

    from biaslab.serving.loader import load_served_variant

    _, _, versions, _ = registered
    client = MlflowClient()
    handed = _handed(client, versions, tmp_path)
    package = _downloaded(client, versions[variant], tmp_path / variant)
    counts = _counting(monkeypatch)
    resolved = load_served_variant(package)
    assert counts == {"base weight hashed": 1, "base resolved": 1}
    expected = [s.logprob for s in resolved.scorer.sentence_scores(SENTENCES)]
    del resolved
    counts.update({"base weight hashed": 0, "base resolved": 0})
    served = load_served_variant(package, base=handed)
    assert counts == {"base weight hashed": 0, "base resolved": 0}
    assert [s.logprob for s in served.scorer.sentence_scores(SENTENCES)] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("field", ["registered_model", "version", "manifest_sha256"])
def test_a_handed_base_that_is_not_the_pinned_one_is_refused(registered, tmp_path, monkeypatch, field):  # noqa: F811
    """A handed base differing from the overlay's pin in model name, version or manifest hash is not used, and
    the loader does not quietly resolve another one: it refuses, naming both."""
    import dataclasses

    from mlflow import MlflowClient

    from biaslab.serving.base import BaseResolutionError
    from biaslab.serving.loader import load_served_variant

    _, _, versions, _ = registered
    client = MlflowClient()
    handed = _handed(client, versions, tmp_path)
    other = {"registered_model": "someone-elses-model", "version": str(versions["soft"]),
             "manifest_sha256": "0" * 64}[field]
    package = _downloaded(client, versions["lora"], tmp_path / "lora")
    counts = _counting(monkeypatch)
    with pytest.raises(BaseResolutionError, match="the verified base handed to the loader is"):
        load_served_variant(package, base=dataclasses.replace(handed, **{field: other}))
    assert counts == {"base weight hashed": 0, "base resolved": 0}


def test_a_full_version_ignores_a_handed_base(registered, tmp_path):  # noqa: F811
    """The base version itself (full) loads from its own package whatever is handed: its own bytes, verified."""
    from mlflow import MlflowClient

    from biaslab.serving.loader import load_served_variant

    _, _, versions, _ = registered
    client = MlflowClient()
    handed = _handed(client, versions, tmp_path)
    package = _downloaded(client, versions["soft"], tmp_path / "soft")
    served = load_served_variant(package, base=handed)
    assert served.kind == "full" and served.variant == "soft"


def test_the_handed_base_itself_is_not_hashed_again_and_another_full_version_is(registered, tmp_path,
                                                                                  monkeypatch):  # noqa: F811
    """The base's own load in the re-scoring check is the handed package: the promoter hashed it against the
    pinned manifest already, so the loader reads its weights once to load and hashes them 0 times (was 1). A
    full version in another folder, handed the base all the same, is verified as always."""
    from mlflow import MlflowClient

    from biaslab.serving.loader import load_served_variant

    _, _, versions, _ = registered
    client = MlflowClient()
    handed = _handed(client, versions, tmp_path)
    counts = _counting(monkeypatch)
    served = load_served_variant(handed.package, base=handed)
    assert served.kind == "full" and counts == {"base weight hashed": 0, "base resolved": 0}
    again = _downloaded(client, versions["base"], tmp_path / "base-again")  # the same version, another folder
    load_served_variant(again, base=handed)
    assert counts == {"base weight hashed": 1, "base resolved": 0}
    corrupted = _downloaded(client, versions["soft"], tmp_path / "soft")
    weights = next(corrupted.rglob("model.safetensors"))
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")
    from biaslab.serving.manifest import PackageIntegrityError

    with pytest.raises(PackageIntegrityError, match="changed"):
        load_served_variant(corrupted, base=handed)
