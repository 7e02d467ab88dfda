"""Corpus reading and the by-document train/validation split (synthetic corpora in tmp_path)."""

from __future__ import annotations

import pytest

from biaslab.data.corpus import (
    CorpusError,
    load_corpus,
    read_documents,
    split_documents,
    take_balanced,
    write_corpus,
)


def synthetic_docs(language: str, n: int) -> list[str]:
    """``n`` documents of 3-6 distinct lines each."""
    return [
        "\n".join(f"{language} document {i} line {j} " + "word " * (i + 1) for j in range(3 + i % 4))
        for i in range(n)
    ]


def test_documents_are_cut_by_manifest_offsets(tmp_path):
    docs = synthetic_docs("en", 5)
    write_corpus(tmp_path, "en", docs)
    read = read_documents(tmp_path, "en")
    assert [d.text for d in read] == docs
    assert [d.source_path for d in read] == [f"doc{i:05d}.txt" for i in range(5)]


def test_split_is_by_document_disjoint_and_seeded(tmp_path):
    write_corpus(tmp_path, "uk", synthetic_docs("uk", 20))
    docs = read_documents(tmp_path, "uk")
    train, val = split_documents(docs, 4, seed=0)
    assert len(val) == 4 and len(train) == 16
    assert {d.source_path for d in train}.isdisjoint(d.source_path for d in val)
    assert {d.source_path for d in train} | {d.source_path for d in val} == {d.source_path for d in docs}
    assert split_documents(docs, 4, seed=0) == (train, val)
    assert split_documents(docs, 4, seed=1)[1] != val


def test_no_validation_text_appears_in_training_text(tmp_path):
    for lang in ("en", "ru"):
        write_corpus(tmp_path, lang, synthetic_docs(lang, 12))
    splits = load_corpus(tmp_path, ["en", "ru"], 10_000, {"en": 3, "ru": 2}, 10_000, seed=0)
    for lang, s in splits.items():
        assert len(s.validation_sources) == {"en": 3, "ru": 2}[lang]
        assert set(s.train_sources).isdisjoint(s.validation_sources)
        train_lines = {line for t in s.train_texts for line in t.split("\n")}
        val_lines = {line for t in s.validation_texts for line in t.split("\n")}
        assert train_lines and val_lines and train_lines.isdisjoint(val_lines)


def test_take_balanced_shares_budget_across_documents(tmp_path):
    write_corpus(tmp_path, "en", ["a" * 50, "b" * 10_000, "c" * 10_000])
    docs = read_documents(tmp_path, "en")
    texts = take_balanced(docs, 1050)  # 50 from the short one, 500 from each long one
    assert [len(t) for t in texts] == [50, 500, 500]
    assert sum(map(len, take_balanced(docs, 10**9))) == sum(len(d.text) for d in docs)


def test_manifest_mismatch_names_file_and_row(tmp_path):
    folder = write_corpus(tmp_path, "ru", synthetic_docs("ru", 3))
    manifest = (folder / "MANIFEST.tsv").read_text().split("\n")
    manifest[2] = manifest[2].rsplit("\t", 1)[0] + "\t7"  # document 1 (row 3) claims 7 characters
    (folder / "MANIFEST.tsv").write_text("\n".join(manifest))
    with pytest.raises(CorpusError, match=r"MANIFEST.tsv, row 3, column n_chars"):
        read_documents(tmp_path, "ru")


def test_missing_corpus_and_too_few_documents_are_clear_errors(tmp_path):
    with pytest.raises(CorpusError, match="uk_corpus.txt: corpus file not found"):
        read_documents(tmp_path, "uk")
    write_corpus(tmp_path, "uk", synthetic_docs("uk", 2))
    with pytest.raises(CorpusError, match="only 2"):
        split_documents(read_documents(tmp_path, "uk"), 2, seed=0)


def test_real_mirror_manifests_are_consistent(mirror):
    """The shared corpora parse with their manifests (offsets and character counts agree)."""
    corpora = mirror / "corpora"
    if not corpora.is_dir():
        pytest.skip("no corpora in the mirror")
    assert len(read_documents(corpora, "uk")) > 1000
