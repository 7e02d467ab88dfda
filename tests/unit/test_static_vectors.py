"""Static vectors: text-file loaders (good and malformed files) and the model's own input embeddings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from biaslab.scoring.static_vectors import (
    VectorFileError,
    WordVectors,
    load_static_vectors,
    load_vector_file,
    model_vectors,
    word_token_ids,
)

GLOVE = "him 1 0 0\nher 0 1 0\ncrafted 1 1 0\n. . . 0 0 1\n\n"
VEC = "3 3\nhim 1 0 0\nher 0 1 0\nCrafted 1 1 0\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_glove_file(tmp_path):
    vecs = load_vector_file(write(tmp_path, "g.txt", GLOVE), "glove")
    assert vecs.similarity("him", "crafted") == pytest.approx(1 / np.sqrt(2))
    assert vecs.similarity("him", "her") == pytest.approx(0.0)
    assert ". . ." in vecs  # GloVe 840B style word containing spaces: last dim fields are the vector
    assert vecs.similarity("him", "nurse") is None


@pytest.mark.parametrize("fmt", ["fasttext", "word2vec"])
def test_header_formats_and_lowercase_fallback(tmp_path, fmt):
    vecs = load_vector_file(write(tmp_path, "v.vec", VEC), fmt)
    assert vecs.get("crafted") is None and vecs.get("Crafted") is not None
    # lookup tries the exact word, then its lowercase form
    assert WordVectors({"crafted": np.ones(2)}).get("Crafted") is not None


def test_only_requested_words_are_kept(tmp_path):
    vecs = load_vector_file(write(tmp_path, "g.txt", GLOVE), "glove", words=["HIM", "her"])
    assert set(vecs.vectors) == {"him", "her"}


@pytest.mark.parametrize(
    ("fmt", "text", "message"),
    [
        ("glove", "him 1 0 0\nher 0 1\n", ":2: expected a word and 3 numbers"),
        ("glove", "him 1 0 0\nher 0 x 0\n", ":2: non-numeric"),
        ("glove", "him 1 0 nan\n", ":1: non-finite"),
        ("fasttext", "him 1 0 0\n", ":1: expected a '<count> <dim>' header"),
        ("fasttext", "3 3\nhim 1 0 0\n", "header announces 3 vectors but the file has 1"),
        ("word2vec", "1 3\nhim 1 0 0 0\n", ":2: expected a word and 3 numbers, got 5"),
        ("word2vec", "", "empty file"),
        ("glove", "\n\n", "no vectors found"),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path, fmt, text, message):
    path = write(tmp_path, "bad.txt", text)
    with pytest.raises(VectorFileError, match=message) as info:
        load_vector_file(path, fmt)
    assert str(path) in str(info.value)


def test_bad_format_or_missing_file(tmp_path):
    with pytest.raises(ValueError, match="vectors_format"):
        load_vector_file(write(tmp_path, "g.txt", GLOVE), "binary")
    with pytest.raises(FileNotFoundError):
        load_vector_file(tmp_path / "nope.vec", "fasttext")
    with pytest.raises(ValueError, match="vectors_format must be"):
        load_static_vectors(str(tmp_path / "g.txt"), None, ["him"])


def test_model_vectors_are_mean_of_subtoken_input_embeddings(tiny_causal_model, tiny_tokenizer):
    vecs = model_vectors(tiny_causal_model, tiny_tokenizer, ["him", "conceptualized"])
    weight = tiny_causal_model.get_input_embeddings().weight.detach().double().numpy()
    for word in ["him", "conceptualized"]:
        ids = word_token_ids(tiny_tokenizer, word)
        assert tiny_tokenizer.decode(ids) == f" {word}"  # tokenised as it appears mid-sentence
        np.testing.assert_allclose(vecs.get(word), weight[ids].mean(axis=0), rtol=1e-9, atol=1e-12)
    assert len(word_token_ids(tiny_tokenizer, "conceptualized")) > 1  # the mean is over several sub-tokens


def test_model_vectors_see_runtime_embedding_hooks(tiny_causal_model, tiny_tokenizer):
    """An embedding edit applied as a forward hook must change sim() too."""
    embedding = tiny_causal_model.get_input_embeddings()
    handle = embedding.register_forward_hook(lambda module, args, out: torch.zeros_like(out))
    try:
        vecs = model_vectors(tiny_causal_model, tiny_tokenizer, ["him"])
    finally:
        handle.remove()
    assert not vecs.get("him").any()
    assert vecs.similarity("him", "him") is None  # zero vector: similarity undefined, treated as OOV


class _RecordingEmbedding(torch.nn.Module):
    """An input embedding whose table claims another device; records where the ids arrive."""

    def __init__(self, device: str):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1, 3, device="meta"))
        self.weight_device = torch.device(device)
        self.seen: list[torch.device] = []

    def forward(self, ids):
        self.seen.append(ids.device)
        return torch.ones(ids.shape[0], ids.shape[1], 3)


def test_model_vectors_send_the_ids_to_the_embedding_tables_device(tiny_tokenizer):
    """On a GPU model the ids must go to the GPU (found by bench/gpu_check.py on an H200: index on cpu)."""
    embedding = _RecordingEmbedding("meta")

    class Model:
        def get_input_embeddings(self):
            return embedding

    vecs = model_vectors(Model(), tiny_tokenizer, ["him", "her"])
    assert embedding.seen == [torch.device("meta")] * 2
    assert np.allclose(vecs.get("him"), np.ones(3))
