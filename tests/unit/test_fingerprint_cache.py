"""The fingerprint cache (a changed file is hashed again, an unchanged one is not read) and the resolved variant
(the evaluate load path reads the manifest once and hashes each directory once)."""

from __future__ import annotations

import hashlib
import os
import time
from collections import Counter

import pytest
import torch

from biaslab.outputs import fingerprint_cache, variant_dir


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """A private cache file, and no racy window (the files of a test are seconds old at most)."""
    path = tmp_path / "cache" / "fingerprints.sqlite"
    monkeypatch.setenv(fingerprint_cache.ENV, str(path))
    monkeypatch.setattr(fingerprint_cache, "RACY_SECONDS", 0.0)
    return path


@pytest.fixture()
def reads(monkeypatch):
    """Counts the files whose bytes :func:`variant_dir.fingerprint_dir` reads (by file name)."""
    counter: Counter[str] = Counter()
    original = variant_dir._file_chunks

    def counting(file):
        counter[file.name] += 1
        return original(file)

    monkeypatch.setattr(variant_dir, "_file_chunks", counting)
    return counter


@pytest.fixture()
def model_dir(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"A" * 4096)
    (d / "config.json").write_text('{"a": 1}')
    (d / "training_summary.json").write_text("metadata, not identity")
    return d


def _direct(directory, names):
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode())
        digest.update((directory / name).read_bytes())
    return digest.hexdigest()[:16]


def test_second_fingerprint_reads_no_bytes(cache, reads, model_dir):
    first = variant_dir.fingerprint_dir(model_dir)
    assert first == _direct(model_dir, ["config.json", "model.safetensors"])
    assert reads == Counter({"config.json": 1, "model.safetensors": 1}) and cache.is_file()
    hits = variant_dir.HASHED["cache_hits"]
    assert variant_dir.fingerprint_dir(model_dir) == first
    assert reads == Counter({"config.json": 1, "model.safetensors": 1})  # not read again
    assert variant_dir.HASHED["cache_hits"] == hits + 1
    assert variant_dir.fingerprint_dir(model_dir, verify=True) == first  # verify reads every byte
    assert reads["model.safetensors"] == 2


def test_modified_file_of_the_same_size_is_hashed_again(cache, reads, model_dir):
    first = variant_dir.fingerprint_dir(model_dir)
    time.sleep(0.05)  # past the file system's timestamp tick
    (model_dir / "model.safetensors").write_bytes(b"B" * 4096)  # same size, new content, new mtime
    second = variant_dir.fingerprint_dir(model_dir)
    assert second != first and second == _direct(model_dir, ["config.json", "model.safetensors"])
    assert reads["model.safetensors"] == 2


def test_tampered_file_with_its_mtime_put_back_is_hashed_again(cache, reads, model_dir):
    """``os.utime`` restores mtime but sets ctime to the present, which is part of the key."""
    weights = model_dir / "model.safetensors"
    first = variant_dir.fingerprint_dir(model_dir)
    before = weights.stat()
    time.sleep(0.05)
    weights.write_bytes(b"C" * 4096)
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = weights.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert after.st_ctime_ns != before.st_ctime_ns
    assert variant_dir.fingerprint_dir(model_dir) == _direct(model_dir, ["config.json", "model.safetensors"]) != first


def test_replaced_file_new_inode_and_metadata_change(cache, reads, model_dir):
    first = variant_dir.fingerprint_dir(model_dir)
    (model_dir / "training_summary.json").write_text("another run")  # not fingerprinted: still cached
    assert variant_dir.fingerprint_dir(model_dir) == first and reads["model.safetensors"] == 1
    (model_dir / "new.safetensors").write_bytes(b"D")
    os.replace(model_dir / "new.safetensors", model_dir / "model.safetensors")  # another inode, another size
    assert variant_dir.fingerprint_dir(model_dir) != first and reads["model.safetensors"] == 2


def test_recently_written_files_are_not_remembered(cache, reads, model_dir, monkeypatch):
    monkeypatch.setattr(fingerprint_cache, "RACY_SECONDS", 3600.0)  # everything counts as just written
    variant_dir.fingerprint_dir(model_dir)
    variant_dir.fingerprint_dir(model_dir)
    assert reads["model.safetensors"] == 2


def test_cache_off_or_unusable_still_fingerprints(tmp_path, reads, model_dir, monkeypatch):
    expected = _direct(model_dir, ["config.json", "model.safetensors"])
    monkeypatch.setattr(fingerprint_cache, "RACY_SECONDS", 0.0)
    monkeypatch.setenv(fingerprint_cache.ENV, "off")
    assert variant_dir.fingerprint_dir(model_dir) == variant_dir.fingerprint_dir(model_dir) == expected
    assert reads["model.safetensors"] == 2
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    monkeypatch.setenv(fingerprint_cache.ENV, str(blocker / "sub" / "fp.sqlite"))  # cannot be created
    assert variant_dir.fingerprint_dir(model_dir) == expected


def test_besides_is_part_of_the_key(cache, model_dir):
    whole = variant_dir.fingerprint_dir(model_dir)
    without = variant_dir.fingerprint_dir(model_dir, besides=frozenset({"config.json"}))
    assert without == _direct(model_dir, ["model.safetensors"]) != whole
    assert variant_dir.fingerprint_dir(model_dir) == whole


# --------------------------------------------------------------------------- the resolved variant
@pytest.fixture()
def hook_overlay(tmp_path, tiny_causal_model, tiny_tokenizer, monkeypatch):
    """``models/base`` (tiny Llama) and ``models/hard`` (variant.json + embedding hook) in a project root."""
    from biaslab.models.embedding_hook import save_hook

    monkeypatch.chdir(tmp_path)
    base = tmp_path / "models" / "base"
    tiny_causal_model.save_pretrained(base)
    tiny_tokenizer.save_pretrained(base)
    overlay = tmp_path / "models" / "hard"
    overlay.mkdir()
    dim = tiny_causal_model.get_input_embeddings().weight.shape[1]
    basis = torch.zeros(1, dim)
    basis[0, 0] = 1.0
    save_hook(overlay, basis, [[5, 6]], [5, 6], len(tiny_tokenizer))
    variant_dir.write_manifest(overlay, base="models/base", method="embedding", mode="hard", apply="hook")
    return base, overlay


def test_evaluate_load_path_reads_manifest_once_and_hashes_each_directory_once(cache, reads, hook_overlay,
                                                                                monkeypatch):
    from biaslab.models.load import load_variant_model

    base, overlay = hook_overlay
    manifests = Counter()
    original = variant_dir.read_manifest

    def counting(directory):
        manifests[str(directory)] += 1
        return original(directory)

    monkeypatch.setattr(variant_dir, "read_manifest", counting)
    monkeypatch.setenv(fingerprint_cache.ENV, "off")  # count real passes, not cache hits
    resolved = variant_dir.resolve("models/hard", ".")
    assert resolved.kind == "overlay" and resolved.skipped is None and resolved.base.directory == base.relative_to(
        base.parents[1])
    loaded = load_variant_model(resolved, dtype="float32")
    assert sum(manifests.values()) == 1
    assert reads == Counter({"embedding_hook.safetensors": 1, "variant.json": 1, "model.safetensors": 1,
                             "config.json": 1, "generation_config.json": 1, "tokenizer.json": 1,
                             "tokenizer_config.json": 1})
    # the same identity as before the refactor: overlay_fingerprint(fingerprint_dir(base), fingerprint_dir(overlay))
    expected = hashlib.sha256((variant_dir.fingerprint_dir(base) + variant_dir.fingerprint_dir(overlay)).encode())
    assert loaded.fingerprint == expected.hexdigest()[:16] == resolved.fingerprint
    assert resolved.own_fingerprint == variant_dir.fingerprint_dir(overlay)
    assert resolved.base.own_fingerprint == variant_dir.fingerprint_dir(base)
    assert [p.name for p in resolved.files] == sorted(p.name for p in overlay.iterdir())


def test_full_model_resolves_to_its_own_fingerprint(cache, hook_overlay):
    from biaslab.models.load import load_model, load_variant_model

    base, _ = hook_overlay
    resolved = variant_dir.resolve(base)
    assert resolved.kind == "full" and resolved.manifest is None and resolved.base is None
    assert load_variant_model(resolved).fingerprint == resolved.fingerprint == load_model(base).fingerprint


def test_a_large_directory_just_written_is_waited_for_and_remembered(cache, reads, model_dir, monkeypatch):
    """base_model fingerprints the checkpoint it has just written: for a large one (SETTLE_BYTES) the fingerprint
    waits out the racy window (at most RACY_SECONDS) and is remembered, so the next stage does not hash it again;
    a small one is hashed again rather than waited for."""
    import time

    slept = []

    def sleep(seconds):  # the racy window passes without the test waiting for it
        slept.append(seconds)
        monkeypatch.setattr(fingerprint_cache, "RACY_SECONDS", 0.0)

    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(fingerprint_cache, "RACY_SECONDS", 3600.0)  # everything counts as just written
    variant_dir.fingerprint_dir(model_dir)
    variant_dir.fingerprint_dir(model_dir)
    assert reads["model.safetensors"] == 2 and slept == []  # small: not worth a wait

    monkeypatch.setattr(fingerprint_cache, "SETTLE_BYTES", 1)
    monkeypatch.setattr(fingerprint_cache, "RACY_SECONDS", 2.0)
    os.utime(model_dir / "model.safetensors")  # written now
    first = variant_dir.fingerprint_dir(model_dir)
    assert len(slept) == 1 and 0 < slept[0] <= 2.0
    assert variant_dir.fingerprint_dir(model_dir) == first and reads["model.safetensors"] == 3  # remembered
