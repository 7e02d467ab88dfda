"""Weights on disk: the safetensors index, row reads/writes in place, model-file copies, dtype conversion."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from biaslab.pretrain.architecture import build_llama
from biaslab.models.weights.convert import convert_weights, set_config_dtype
from biaslab.models.weights.files import copy_model_files, model_files
from biaslab.models.weights.index import SafetensorsIndex, WeightsError
from biaslab.models.weights.layout import ModelLayout, model_layout


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def tensors():
    torch.manual_seed(0)
    return {"emb": torch.randn(10, 6), "bias": torch.randn(6), "ids": torch.arange(4)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rows_read_and_written_in_place_touch_only_those_rows(tmp_path, tensors, dtype):
    save_file({k: (v.to(dtype) if v.is_floating_point() else v) for k, v in tensors.items()},
              str(tmp_path / "model.safetensors"))
    index = SafetensorsIndex(tmp_path)
    original = load_file(str(tmp_path / "model.safetensors"))
    assert index.floating_dtype() == dtype and index["ids"].dtype == torch.int64
    assert torch.equal(index.read_rows("emb", [7, 2]), original["emb"][[7, 2]])
    size = (tmp_path / "model.safetensors").stat().st_size
    new_rows = torch.full((2, 6), 0.5, dtype=torch.float64)  # any dtype in: stored dtype out
    index.write_rows("emb", [2, 7], new_rows)
    after = load_file(str(tmp_path / "model.safetensors"))
    assert (tmp_path / "model.safetensors").stat().st_size == size
    expected = original["emb"].clone()
    expected[[2, 7]] = new_rows.to(dtype)
    assert torch.equal(after["emb"], expected) and after["emb"].dtype == dtype
    assert torch.equal(after["bias"], original["bias"]) and torch.equal(after["ids"], original["ids"])


def test_row_errors_name_the_tensor_and_the_problem(tmp_path, tensors):
    save_file(tensors, str(tmp_path / "model.safetensors"))
    index = SafetensorsIndex(tmp_path)
    with pytest.raises(WeightsError, match="out of range"):
        index.read_rows("emb", [10])
    with pytest.raises(WeightsError, match="2-D"):
        index.read_rows("bias", [0])
    with pytest.raises(WeightsError, match="no tensor 'nope'"):
        index.read_rows("nope", [0])
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "model.safetensors").write_bytes(b"\xff" * 16)
    with pytest.raises(WeightsError, match="not a safetensors file"):
        SafetensorsIndex(tmp_path / "broken")


def test_copy_takes_model_files_only_and_never_the_source(tmp_path, tiny_tokenizer):
    src = tmp_path / "src"
    build_llama(vocab_size=len(tiny_tokenizer), hidden_size=16, intermediate_size=32).save_pretrained(src)
    tiny_tokenizer.save_pretrained(src)
    for junk in ("training_summary.json", "snapshot.json", "optimizer.pt", ".hidden.json"):
        (src / junk).write_text("{}")
    (src / "original").mkdir()
    (src / "original" / "consolidated.00.pth").write_text("pickle")
    copies = copy_model_files(src, tmp_path / "dst")
    names = {p.name for p in copies}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= names
    assert not names & {"training_summary.json", "snapshot.json", "optimizer.pt", ".hidden.json", "original"}
    assert all(_sha(src / n) == _sha(tmp_path / "dst" / n) for n in names)
    assert {p.name for p in model_files(src)} == names
    with pytest.raises(ValueError, match="same directory"):
        copy_model_files(src, src)


def test_dtype_conversion_streams_into_shards_that_load_as_the_cast_model(tmp_path, tiny_tokenizer):
    model = build_llama(vocab_size=len(tiny_tokenizer), hidden_size=16, intermediate_size=32, seed=3)
    model.save_pretrained(tmp_path / "src")
    (tmp_path / "dst").mkdir()
    shards = convert_weights(tmp_path / "src", tmp_path / "dst", torch.bfloat16, max_shard_bytes=8_000)
    assert len(shards) > 1 and all(p.is_file() for p in shards)
    weight_map = json.loads((tmp_path / "dst" / "model.safetensors.index.json").read_text())["weight_map"]
    merged = {k: v for p in shards for k, v in load_file(str(p)).items()}
    assert set(weight_map) == set(merged) == set(load_file(str(tmp_path / "src" / "model.safetensors")))
    for name, tensor in model.state_dict().items():
        assert merged[name].dtype == torch.bfloat16 and torch.equal(merged[name], tensor.to(torch.bfloat16)), name
    assert SafetensorsIndex(tmp_path / "dst").floating_dtype() == torch.bfloat16


def test_config_dtype_is_recorded_and_left_alone_when_right(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"torch_dtype": "float32", "text_config": {"dtype": "float32"}, "z": 1, "a": 2}))
    set_config_dtype(path, torch.bfloat16)
    config = json.loads(path.read_text())
    assert config["dtype"] == config["torch_dtype"] == config["text_config"]["dtype"] == "bfloat16"
    assert list(config)[:4] == ["torch_dtype", "text_config", "z", "a"]  # key order kept
    before = path.read_bytes()
    set_config_dtype(path, torch.bfloat16)
    assert path.read_bytes() == before


def test_layout_reads_names_and_tying_without_loading_weights(tmp_path, tiny_tokenizer):
    for tied in (False, True):
        d = tmp_path / f"tied{tied}"
        build_llama(vocab_size=len(tiny_tokenizer), hidden_size=16, intermediate_size=32,
                    tie_word_embeddings=tied).save_pretrained(d)
        layout = model_layout(d)
        assert (layout.kind, layout.architecture, layout.tied) == ("causal", "LlamaForCausalLM", tied)
        assert layout.input_embedding == "model.embed_tokens.weight" and layout.output_head == "lm_head.weight"
        assert layout.checkpoint_key(layout.input_embedding, SafetensorsIndex(d)) == "model.embed_tokens.weight"


def test_checkpoint_keys_match_with_or_without_the_base_model_prefix():
    layout = ModelLayout("causal", "GPT2LMHeadModel", 1, "transformer.wte.weight", "lm_head.weight", True,
                         "transformer")
    assert layout.checkpoint_key("transformer.wte.weight", {"wte.weight"}) == "wte.weight"
    assert layout.checkpoint_key("wte.weight", {"transformer.wte.weight"}) == "transformer.wte.weight"
    assert layout.checkpoint_key("transformer.wte.weight", {"other"}) is None


def test_written_weights_get_the_umasks_mode_not_safetensors_0600(tmp_path, tensors):
    """``save_file`` creates its file 0600; a converted shard and an embedding hook get the mode any file written
    by Python gets (0o666 less the umask), like the rest of the model directory - and the bytes are save_file's."""
    import os

    from biaslab.models.embedding_hook import save_hook
    from biaslab.models.weights.files import save_tensors

    old = os.umask(0o027)
    try:
        save_tensors(tensors, tmp_path / "t.safetensors", {"format": "pt"})
        save_file(tensors, str(tmp_path / "plain.safetensors"), metadata={"format": "pt"})
        (tmp_path / "src").mkdir()
        save_file(tensors, str(tmp_path / "src" / "model.safetensors"))
        (tmp_path / "dst").mkdir()
        shards = convert_weights(tmp_path / "src", tmp_path / "dst", torch.bfloat16, max_shard_bytes=200)
        hook = save_hook(tmp_path, torch.zeros(2, 6), [[1, 2]], [1, 2], 10)
    finally:
        os.umask(old)
    assert (tmp_path / "plain.safetensors").stat().st_mode & 0o777 == 0o600  # what this mends
    for path in (tmp_path / "t.safetensors", *shards, hook):
        assert path.stat().st_mode & 0o777 == 0o640, path
    assert _sha(tmp_path / "t.safetensors") == _sha(tmp_path / "plain.safetensors")
