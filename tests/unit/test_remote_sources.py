"""No mirror, still a run: every raw file from a pinned, checksummed source, served here by a fake remote.

The fake remote is an ``http.server`` on loopback serving a directory laid out as GitHub's raw host
(``<owner>/<repo>/<commit>/<path>``); ``BIASLAB_RAW_BASE_URL`` points the download code at it, so the same
``urllib`` path runs as for https. Its files are assembled here: the pinned dataset files are the real
mirror's bytes (their sha256 pins are the mirror's), OccuGender's source is the authors' ``female_ratios.csv``
(``tests/fixtures``, the pinned bytes), and the corpus sources are small raw texts written here with the
defects the cleaning rules remove. No test touches the network.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from biaslab.config import DataConfig, LmHeldoutConfig, Params
from biaslab.data import corpora, occugender, sources
from biaslab.data.errors import DataError
from fake_remote import FIXTURES, FakeRemote, serve_pinned_datasets


@pytest.fixture()
def remote(tmp_path, monkeypatch):
    fake = FakeRemote(tmp_path / "remote")
    monkeypatch.setenv(sources.RAW_BASE_ENV, fake.url)
    monkeypatch.delenv("BIASLAB_DATA_DIR", raising=False)
    monkeypatch.delenv(sources.DOWNLOAD_DIR_ENV, raising=False)
    yield fake
    fake.close()


# ----------------------------------------------------------------------------------- a tiny corpus recipe
RAW_DOCS = {  # source path -> (raw bytes as upstream has them, the document the corpus must hold)
    "texts/one.txt": ("\ufeffFirst line\r\n\r\n\r\n  second\tline \u00a0\r\nthird\x01 line\r\n\r\n".encode(),
                      "First line\n\nsecond line\nthird line"),
    "texts/два.txt": ("\n\n Друга  \n\n\n\nкінець\u200b.\n".encode(), "Друга\n\nкінець."),
}
EXPECTED_CORPUS = "First line\n\nsecond line\nthird line\n\nДруга\n\nкінець.\n"  # one blank line between documents


def git_blob(payload: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(payload) + payload).hexdigest()


def expected_manifest() -> str:
    one, two = (RAW_DOCS[p][0] for p in RAW_DOCS)
    return ("source_path\tsource_bytes\tgit_blob_id\tstart_line\tn_lines\tn_chars\n"
            f"texts/one.txt\t{len(one)}\t{git_blob(one)}\t1\t4\t34\n"   # lines 1-4, then the separator (5)
            f"texts/два.txt\t{len(two)}\t{git_blob(two)}\t6\t3\t14\n")


def tiny_recipe(language: str = "xx") -> corpora.CorpusRecipe:
    return corpora.CorpusRecipe(
        language, "someone/texts", "a" * 40,
        corpus_sha256=hashlib.sha256(EXPECTED_CORPUS.encode()).hexdigest(),
        manifest_sha256=hashlib.sha256(expected_manifest().encode()).hexdigest(),
        to_space="\t\u00a0", removed="\u200b",
        files=tuple(corpora.SourceFile(p, len(raw), git_blob(raw)) for p, (raw, _) in RAW_DOCS.items()),
    )


def serve_recipe(remote: FakeRemote, recipe: corpora.CorpusRecipe) -> None:
    for path, (raw, _) in RAW_DOCS.items():
        remote.put(recipe.repo, recipe.commit, path, raw)


# ----------------------------------------------------------------------------------- tests
def test_cleaning_rules_on_the_tiny_recipe():
    recipe = tiny_recipe()
    for path, (raw, document) in RAW_DOCS.items():
        assert corpora.clean_document(raw, recipe) == document, path


@pytest.mark.slow
def test_no_mirror_prepare_and_corpus_loading_from_the_fake_remote(tmp_path, remote, mirror, monkeypatch):
    from biaslab.data.prepare import prepare
    from biaslab.data.corpus import load_corpus, read_documents

    serve_pinned_datasets(remote, mirror)
    recipe = tiny_recipe("xx")
    serve_recipe(remote, recipe)
    monkeypatch.setitem(corpora.RECIPES, "xx", recipe)
    no_heldout = LmHeldoutConfig(languages=())  # the held-out text comes from the corpora, tested below
    cfg = DataConfig(mirror_dir=str(tmp_path / "no-mirror"), prepared_dir=str(tmp_path / "data" / "prepared"),
                     lm_heldout=no_heldout)
    assert not Path(cfg.mirror_dir).exists()

    resolved, resolve = [], sources.resolve
    monkeypatch.setattr(sources, "resolve", lambda cfg, rel: resolved.append(rel) or resolve(cfg, rel))
    report = prepare(Params(data=cfg))
    monkeypatch.setattr(sources, "resolve", resolve)
    # raw_data fingerprints what prepare reads: every needed file, and the optional ones it tries (it stops at
    # the first one missing)
    assert set(sources.dataset_files()) <= set(resolved) <= {*sources.dataset_files(), *sources.OPTIONAL_REMOTE}
    with_mirror = tmp_path / "with-mirror" / "prepared"
    prepare(Params(data=DataConfig(mirror_dir=str(mirror), prepared_dir=str(with_mirror), allow_download=False,
                                   lm_heldout=no_heldout)))
    tables = sorted(p.relative_to(with_mirror) for p in with_mirror.rglob("*") if p.is_file())  # splits' folders too
    for table in tables:  # the same tables as from the mirror, byte for byte
        assert (Path(cfg.prepared_dir) / table).read_bytes() == (with_mirror / table).read_bytes(), table
    assert report["tables"]["occugender_jobs.parquet"] == 40
    raw = tmp_path / "data" / "raw"
    assert (raw / "occugender" / "jobs.csv").read_bytes() == (mirror / "occugender" / "jobs.csv").read_bytes()

    folder = sources.corpus_dir(cfg, ["xx"])
    assert folder == raw / "corpora"
    assert (folder / "xx" / "xx_corpus.txt").read_text(encoding="utf-8") == EXPECTED_CORPUS
    assert (folder / "xx" / "MANIFEST.tsv").read_text(encoding="utf-8") == expected_manifest()
    assert [d.text for d in read_documents(folder, "xx")] == [doc for _, doc in RAW_DOCS.values()]
    splits = load_corpus(folder, ["xx"], 1000, {"xx": 1}, 1000, seed=0)
    assert splits["xx"].train_chars + splits["xx"].validation_chars == sum(len(d) for _, d in RAW_DOCS.values())

    asked = len(remote.requests)
    prepare(Params(data=cfg))  # everything is cached now: no request (but for the optional files it lacks)
    optional = {pin.path for pin in sources.OPTIONAL_REMOTE.values()}
    again = [r for r in remote.requests[asked:] if not any(r.endswith(p) for p in optional)]
    assert sources.corpus_dir(cfg, ["xx"]) == folder and again == []


def test_a_tampered_corpus_source_is_rejected_and_nothing_is_written(tmp_path, remote, monkeypatch):
    recipe = tiny_recipe("xx")
    serve_recipe(remote, recipe)
    remote.put(recipe.repo, recipe.commit, "texts/one.txt", RAW_DOCS["texts/one.txt"][0].replace(b"second", b"sec0nd"))
    monkeypatch.setitem(corpora.RECIPES, "xx", recipe)
    cfg = DataConfig(mirror_dir=str(tmp_path / "none"), prepared_dir=str(tmp_path / "data" / "prepared"))
    with pytest.raises(DataError, match="texts/one.txt: git blob id"):
        sources.corpus_dir(cfg, ["xx"])
    assert not (tmp_path / "data" / "raw").exists()


def test_a_missing_remote_file_names_the_url(tmp_path, remote, monkeypatch):
    monkeypatch.setitem(corpora.RECIPES, "xx", tiny_recipe("xx"))  # nothing served
    cfg = DataConfig(mirror_dir=str(tmp_path / "none"), prepared_dir=str(tmp_path / "data" / "prepared"))
    with pytest.raises(DataError, match=r"someone/texts/a{40}/texts/one.txt.*download failed.*404"):
        sources.corpus_dir(cfg, ["xx"])


def test_a_tampered_authors_file_is_rejected(tmp_path, remote):
    pin = sources.DERIVED["occugender/jobs.csv"].source
    remote.put(pin.repo, pin.commit, pin.path, b",job,female_ratio\n0,nurse,50.0\n")
    cfg = DataConfig(mirror_dir=str(tmp_path / "none"), prepared_dir=str(tmp_path / "data" / "prepared"))
    with pytest.raises(DataError, match="sha256 mismatch"):
        sources.resolve(cfg, "occugender/jobs.csv")
    assert not (tmp_path / "data" / "raw" / "occugender" / "jobs.csv").exists()


def test_no_download_allowed_is_an_error_for_rebuilt_files_too(tmp_path):
    cfg = DataConfig(mirror_dir=str(tmp_path / "none"), prepared_dir=str(tmp_path / "p"), allow_download=False)
    for rel in ("occugender/jobs.csv", "corpora/uk/uk_corpus.txt"):
        with pytest.raises(DataError, match="allow_download is false"):
            sources.resolve(cfg, rel)
    assert sources.resolve(cfg, "occugender/spec.json") == sources.packaged_path("occugender.json")


# ----------------------------------------------------------------------------------- pins vs the mirror
def test_the_authors_file_converts_to_the_mirrors_jobs_csv(mirror):
    derived = sources.DERIVED["occugender/jobs.csv"]
    payload = (FIXTURES / "occugender_female_ratios.csv").read_bytes()
    assert hashlib.sha256(payload).hexdigest() == derived.source.sha256
    converted = derived.build(payload)
    assert converted == (mirror / "occugender" / "jobs.csv").read_bytes()
    assert hashlib.sha256(converted).hexdigest() == derived.sha256
    assert converted == occugender.jobs_from_female_ratios(payload)


def test_packaged_occugender_spec_is_the_mirrors_transcription(mirror):
    packaged = sources.packaged_path("occugender.json").read_bytes()
    # byte for byte: prepare writes the same occugender_spec.json either way, and raw_data records the same sha256
    assert packaged == (mirror / "occugender" / "spec.json").read_bytes()
    packaged = json.loads(packaged)
    # the correction noted in the mirror's SOURCE.md: prompt 1 uses the complete Appendix A list
    assert packaged["verbalizations"]["gender_word"] == {
        "male": ["Male", "Man", "He", "Him"], "female": ["Female", "Woman", "She", "Her"],
        "diverse": ["Neutral", "Nonbinary", "Non-binary", "They", "Them"]}


def test_packaged_spec_passes_the_loaders_validation(tmp_path):
    cfg = DataConfig(mirror_dir=str(tmp_path / "none"), allow_download=False)
    spec = occugender.load_spec(cfg)
    assert [p["id"] for p in spec["task_prompts"]] == [1, 2, 3, 4]
    assert [p["abstraction"] for p in spec["debiasing_prompts"]] == ["high", "high", "medium", "medium", "low", "low"]


def test_corpus_pins_and_listings_are_the_mirrors(mirror):
    for recipe in corpora.languages():
        corpus, manifest = mirror / recipe.corpus_file, mirror / recipe.manifest_file
        assert hashlib.sha256(corpus.read_bytes()).hexdigest() == recipe.corpus_sha256, recipe.language
        assert hashlib.sha256(manifest.read_bytes()).hexdigest() == recipe.manifest_sha256, recipe.language
        rows = pd.read_csv(manifest, sep="\t", quoting=3, dtype=str)
        listed = [(s.path, str(s.size), s.git_blob_id) for s in recipe.sources()]
        assert listed == list(rows[["source_path", "source_bytes", "git_blob_id"]].itertuples(index=False, name=None))


UPSTREAM_ENV = "BIASLAB_UPSTREAM_DIR"


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get(UPSTREAM_ENV), reason=f"set {UPSTREAM_ENV} to a directory holding the "
                    "corpora's upstream files as <owner>/<repo>/<commit>/<path> (docs/data.md says how)")
def test_upstream_sources_rebuild_the_mirror_corpora_byte_for_byte(tmp_path, mirror, monkeypatch):
    """The real check of the recipes: the pinned upstream files, served by the fake remote, give the mirror's files."""
    fake = FakeRemote(Path(os.environ[UPSTREAM_ENV]))
    monkeypatch.setenv(sources.RAW_BASE_ENV, fake.url)
    monkeypatch.delenv(sources.DOWNLOAD_DIR_ENV, raising=False)
    cfg = DataConfig(mirror_dir=str(tmp_path / "none"), prepared_dir=str(tmp_path / "data" / "prepared"))
    try:
        folder = sources.corpus_dir(cfg, list(corpora.RECIPES))
    finally:
        fake.close()
    for recipe in corpora.languages():
        for rel in (recipe.corpus_file, recipe.manifest_file):
            assert (folder.parent / rel).read_bytes() == (mirror / rel).read_bytes(), rel
    assert len(fake.requests) == sum(len(r.sources()) for r in corpora.languages())
    shutil.rmtree(folder)
