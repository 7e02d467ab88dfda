"""Which weight files a snapshot takes: a sharded checkpoint's index and shards, never a stray
``consolidated.safetensors`` beside them (Mistral-7B-v0.3 ships both); without an index, today's rule."""

from __future__ import annotations

import json
import shutil
from fnmatch import fnmatch
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from biaslab.config import ModelConfig
from biaslab.models import hub
from biaslab.models.load import load_model
from biaslab.models.weights.files import copy_model_files, hub_weight_patterns, indexed_shards, model_files
from biaslab.pretrain.architecture import build_llama
from biaslab.pretrain.snapshot import snapshot_model


@pytest.fixture()
def mistral_shaped(tmp_path, tiny_tokenizer):
    """A Mistral-v0.3-shaped local folder: sharded ``model-0000i-of-0000N.safetensors`` + the index, and the
    whole checkpoint again as ``consolidated.safetensors`` (mistral-inference's names), tiny tensors."""
    src = tmp_path / "mistral"
    torch.manual_seed(0)
    model = build_llama(vocab_size=len(tiny_tokenizer), hidden_size=16, intermediate_size=32)
    model.save_pretrained(src, max_shard_size="20KB")
    tiny_tokenizer.save_pretrained(src)
    state = {k.replace("model.", "", 1): v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(src / "consolidated.safetensors"))
    return src, model


def test_fixture_is_mistral_shaped(mistral_shaped):
    src, _ = mistral_shaped
    shards = sorted(p.name for p in src.glob("model-*-of-*.safetensors"))
    assert len(shards) >= 2 and (src / "model.safetensors.index.json").is_file()
    assert (src / "consolidated.safetensors").is_file()
    assert indexed_shards(src) == frozenset(shards)


def test_sharded_copy_takes_index_and_shards_never_consolidated(mistral_shaped, tmp_path):
    src, model = mistral_shaped
    copies = {p.name for p in copy_model_files(src, tmp_path / "dst")}
    weights = {n for n in copies if "safetensors" in n}
    assert weights == {"model.safetensors.index.json", *indexed_shards(src)}
    assert not any(n.startswith("consolidated") for n in copies)
    assert {"config.json", "tokenizer.json"} <= copies
    reloaded = load_model(tmp_path / "dst").model.state_dict()
    assert all(torch.equal(reloaded[k], v) for k, v in model.state_dict().items())


def test_without_an_index_every_safetensors_file_is_a_weight_file(tmp_path):
    """Today's rule where there is no index: a single ``model.safetensors`` or another name, all copied."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text("{}")
    save_file({"a": torch.zeros(2)}, str(src / "model.safetensors"))
    save_file({"b": torch.zeros(2)}, str(src / "weights_other_name.safetensors"))
    assert {p.name for p in model_files(src)} == {"config.json", "model.safetensors", "weights_other_name.safetensors"}
    assert hub_weight_patterns(None) == ["*.safetensors"]
    (src / "model.safetensors.index.json").write_text("not json")  # unreadable index: no guessing, today's rule
    assert indexed_shards(src) is None and len(model_files(src)) == 4


def test_snapshot_of_a_mistral_shaped_folder_copies_no_consolidated(mistral_shaped, tmp_path):
    src, model = mistral_shaped
    out = tmp_path / "models" / "base"
    record = snapshot_model(ModelConfig(source=str(src)), out)
    assert not list(out.glob("consolidated*"))
    assert sorted(p.name for p in out.glob("*.safetensors")) == sorted(indexed_shards(src))
    assert "consolidated.safetensors" not in record["files"]
    reloaded = load_model(out).model.state_dict()
    assert all(torch.equal(reloaded[k], v) for k, v in model.state_dict().items())


def test_hub_download_fetches_the_index_shards_only(mistral_shaped, tmp_path, monkeypatch):
    """The hub path, offline: ``snapshot_download`` replaced by a copy out of a local "repository" that applies
    ``allow_patterns`` with huggingface_hub's own filter; what lands in the "cache" is what the hub would send."""
    import huggingface_hub
    from huggingface_hub.utils import filter_repo_objects

    src, _ = mistral_shaped
    (src / "original").mkdir()
    (src / "original" / "consolidated.00.pth").write_bytes(b"pickle")
    calls = []

    def fake_snapshot_download(*, repo_id, revision, allow_patterns):
        calls.append(list(allow_patterns))
        cache = tmp_path / "hf_cache" / revision
        names = [p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file()]
        for name in filter_repo_objects(names, allow_patterns=allow_patterns):
            (cache / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / name, cache / name)
        return str(cache)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    from biaslab.models.weights.files import MODEL_FILE_PATTERNS

    folder = hub.download_snapshot("mistralai/Mistral-shaped", "c0ffee", list(MODEL_FILE_PATTERNS))
    fetched = {p.name for p in folder.rglob("*") if p.is_file()}
    assert not any(n.startswith("consolidated") for n in fetched)
    assert {n for n in fetched if n.endswith(".safetensors")} == indexed_shards(src)
    assert not any(fnmatch("consolidated.safetensors", p) for p in calls[-1])
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    for shard in set(index["weight_map"].values()):
        assert load_file(str(folder / shard)).keys() == load_file(str(src / shard)).keys()


def test_hub_patterns_follow_the_index(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    assert hub_weight_patterns(tmp_path / "model.safetensors.index.json") == [
        "model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert hub_weight_patterns(Path(tmp_path / "missing.json")) == ["*.safetensors"]
