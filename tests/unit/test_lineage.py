"""Dataset digests are the ones DVC records (checked against `dvc add` itself), subsets get their own,
and raw datasets name the mirror or their pinned origin."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from biaslab.tracking import datasets as lineage
from biaslab.tracking import datasets as provenance


def _tree(root: Path) -> Path:
    data = root / "data"
    (data / "sub").mkdir(parents=True)
    (data / "a.csv").write_text("x,y\n1,2\n")
    (data / "sub" / "b.txt").write_bytes("ünïcode\r\nline\n".encode())
    (data / "sub" / "empty").write_bytes(b"")
    return data


def test_digests_equal_what_dvc_add_records(tmp_path):
    data = _tree(tmp_path)
    dvc = [sys.executable, "-m", "dvc"]
    subprocess.run([*dvc, "init", "--no-scm", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*dvc, "add", "-q", "data"], cwd=tmp_path, check=True)
    recorded = yaml.safe_load((tmp_path / "data.dvc").read_text())["outs"][0]["md5"]
    assert lineage.dvc_digest(data) == recorded
    shutil.copy(data / "a.csv", tmp_path / "single.csv")
    subprocess.run([*dvc, "add", "-q", "single.csv"], cwd=tmp_path, check=True)
    assert lineage.dvc_digest(tmp_path / "single.csv") == yaml.safe_load(
        (tmp_path / "single.csv.dvc").read_text())["outs"][0]["md5"]


def test_subsets_have_their_own_digest(tmp_path):
    data = _tree(tmp_path)
    whole = lineage.directory(data, "corpus", "train")
    assert whole.digest == lineage.dvc_digest(data) and whole.digest.endswith(".dir")
    held_out = lineage.subset(whole, "validation: 2 documents", "validation", key="doc3,doc7")
    assert held_out.tags["dvc_md5"] == whole.digest and held_out.tags["selection"] == "validation: 2 documents"
    assert held_out.digest == lineage.subset_digest(whole.digest, "doc3,doc7") != whole.digest
    assert len(held_out.digest) <= 36  # MLflow's dataset digest column
    train = lineage.subset(whole, "train: the other documents", "train", key="not doc3,doc7")
    assert train.digest != held_out.digest
    with pytest.raises(FileNotFoundError, match="cannot compute its DVC digest"):
        lineage.dvc_digest(tmp_path / "absent")


def test_prepared_table_and_its_subset(tmp_path):
    frame = pd.DataFrame({"profession": ["a", "b", "c"], "split": ["finetune", "validation", "eval"]})
    frame.to_parquet(tmp_path / "gbem_ua.parquet")
    whole = lineage.prepared_file(tmp_path, "gbem_ua.parquet", "eval")
    assert whole.digest == lineage.file_md5(tmp_path / "gbem_ua.parquet") and len(whole.frame) == 3
    train = lineage.subset(whole, "split == 'finetune'", "train", frame=frame[frame.split == "finetune"])
    assert train.tags["dvc_md5"] == whole.digest and train.digest != whole.digest and len(train.frame) == 1
    assert train.tags["dvc_path"] == whole.tags["dvc_path"]


def test_raw_dataset_from_mirror_or_pinned_origin(tmp_path):
    (tmp_path / "mirror" / "crows_pairs").mkdir(parents=True)
    (tmp_path / "mirror" / "crows_pairs" / "x.csv").write_text("1\n")
    ref = provenance.raw_dataset(tmp_path / "mirror", "crows_pairs")
    assert ref.source == (tmp_path / "mirror" / "crows_pairs").as_posix() and ref.context == "raw"
    assert ref.tags["pinned_origin"].startswith("https://github.com/nyu-mll/crows-pairs/tree/")
    (tmp_path / "raw" / "rubia").mkdir(parents=True)
    (tmp_path / "raw" / "rubia" / "rubia.tsv").write_text("a\tb\n")
    ref = provenance.raw_dataset(tmp_path / "mirror", "rubia", download_dir=tmp_path / "raw")
    assert ref.source.startswith("https://github.com/vergrig/RuBia-Dataset/tree/") and ref.tags["downloaded"] == "true"
    assert provenance.raw_dataset(tmp_path / "mirror", "winogender", download_dir=tmp_path / "raw") is None


def test_raw_datasets_are_the_folders_of_the_files_prepare_reads():
    """What ``prepare`` logs as raw inputs are the folders of the files ``raw_data`` records for it."""
    from biaslab.data import sources

    folders = {rel.split("/", 1)[0] for rel in sources.dataset_files()} | {"corpora"}  # corpora: lm_heldout's text
    assert set(provenance.RAW_DATASETS) == folders


def test_raw_refs_carry_the_record_dvc_tracks(tmp_path):
    """The mirror is outside DVC's view: each raw ref names the raw_data record its stage depends on."""
    from biaslab.config import DataConfig

    (tmp_path / "mirror" / "rubia").mkdir(parents=True)
    (tmp_path / "mirror" / "rubia" / "rubia.tsv").write_text("a\tb\n")
    record = tmp_path / "datasets.json"
    cfg = DataConfig(mirror_dir=str(tmp_path / "mirror"), prepared_dir=str(tmp_path / "data" / "prepared"))
    assert [r.tags.get("raw_inputs_md5") for r in provenance.raw_datasets(cfg, record=record)] == [None]  # none yet
    record.write_text('{"rubia/rubia.tsv": "00"}\n')
    (ref,) = provenance.raw_datasets(cfg, record=record)
    assert ref.tags["raw_inputs"] == record.as_posix() and ref.tags["raw_inputs_md5"] == lineage.file_md5(record)
    assert ref.digest == lineage.dvc_digest(tmp_path / "mirror" / "rubia")


def test_corpus_parts_differ_and_follow_the_split_settings(tmp_path):
    from biaslab.config import PretrainConfig

    (tmp_path / "corpora" / "en").mkdir(parents=True)
    (tmp_path / "corpora" / "en" / "en_corpus.txt").write_text("doc\n")
    cfg = PretrainConfig(languages=["en"], validation_documents={"en": 2})
    train, validation = provenance.corpus_datasets(tmp_path / "corpora", cfg)
    whole = lineage.dvc_digest(tmp_path / "corpora")
    assert (train.context, validation.context) == ("train", "validation") and train.digest != validation.digest
    assert train.digest == lineage.subset_digest(whole, train.tags["selection"]) and train.tags["dvc_md5"] == whole
    assert "raw_inputs_md5" not in train.tags  # no raw_data record given
    record = tmp_path / "corpora.json"
    record.write_text('{"en/en_corpus.txt": "00"}\n')
    tagged = provenance.corpus_datasets(tmp_path / "corpora", cfg, record=record)
    assert [r.digest for r in tagged] == [train.digest, validation.digest]  # the record links, it does not identify
    assert all(r.tags["raw_inputs_md5"] == lineage.file_md5(record) for r in tagged)
    other = provenance.corpus_datasets(tmp_path / "corpora", cfg.model_copy(update={"validation_chars": 7}))
    assert other[0].digest != train.digest and other[1].digest != validation.digest


def test_planted_text_is_identified_by_its_answer_key(tmp_path):
    import json

    from biaslab.tracking.datasets import planted_text
    from biaslab.pretrain.phases import PLANTED_FILE

    assert planted_text(tmp_path) is None
    (tmp_path / PLANTED_FILE).write_text(json.dumps({"enabled": False}))
    assert planted_text(tmp_path) is None
    (tmp_path / PLANTED_FILE).write_text(json.dumps({"enabled": True, "direction": "balanced",
                                                     "params": {"dose": 0.5, "strength": 3.0}}))
    ref = planted_text(tmp_path)
    assert ref.name == "planted_text" and ref.context == "train" and ref.tags["direction"] == "balanced"
    assert ref.digest == lineage.dvc_digest(tmp_path / PLANTED_FILE)
