"""``prepare`` on the real mirror: every table of docs/prepared_schema.md, deterministic output,
and the stage script's error exit."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

from biaslab.config import DataConfig, Params
from biaslab.data.prepare import REPORT_FILE, prepare

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = {  # docs/prepared_schema.md
    "gbem_ua.parquet": ["item_id", "source_file", "row", "profession", "experience", "is_male", "is_correct",
                        "is_feminitive", "qa_sentence", "prob_sentence", "split"],
    "gender_pairs.parquet": ["language", "male", "female", "source"],
    "occugender_jobs.parquet": ["job", "group", "male_ratio", "female_ratio"],
    "rubia.parquet": ["pair_id", "pro", "anti", "domain", "subdomain", "is_duplicate"],
    "crows_pairs.parquet": ["pair_id", "sent_more", "sent_less", "stereo_antistereo", "bias_type", "is_duplicate"],
    "winobias.parquet": ["pair_id", "type", "split", "pro_sentence", "anti_sentence", "pro_pronoun",
                         "anti_pronoun", "pronoun_index", "occupation", "minimal_pair"],
    "winogender.parquet": ["item_id", "occupation", "participant", "answer", "sentence_male", "sentence_female",
                           "sentence_neutral", "bls_pct_female", "bergsma_pct_female"],
    "genderlex.parquet": ["subject", "context_type", "row", "sent_m", "sent_w", "context", "hb", "is_duplicate"],
}


@pytest.fixture(scope="module")
def prepared(mirror, tmp_path_factory):
    out = tmp_path_factory.mktemp("prep") / "data" / "prepared"
    params = Params(data=DataConfig(mirror_dir=str(mirror), prepared_dir=str(out), allow_download=False))
    return out, prepare(params), params


def test_every_schema_table_is_written(prepared):
    out, report, _ = prepared
    for name, columns in SCHEMA.items():
        frame = pd.read_parquet(out / name)
        assert list(frame.columns) == columns, name
        assert report["tables"][name] == len(frame) > 0
    for name in ("gbem_ua_split.json", "occugender_spec.json", "winobias_occupations.json"):
        assert json.loads((out / name).read_text(encoding="utf-8"))
    assert json.loads((out / REPORT_FILE).read_text(encoding="utf-8")) == json.loads(json.dumps(report))
    assert sorted(p.name for p in out.parent.iterdir()) == ["prepared"]  # no temp dirs left


def test_split_json_matches_table(prepared):
    out, _, _ = prepared
    split = json.loads((out / "gbem_ua_split.json").read_text(encoding="utf-8"))
    frame = pd.read_parquet(out / "gbem_ua.parquet")
    for name, professions in split.items():
        assert professions == sorted(professions)
        assert set(frame.loc[frame.split == name, "profession"]) == set(professions)


def test_report_counts(prepared):
    _, report, _ = prepared
    files = report["files"]
    assert files["rubia/rubia.tsv"]["rows_dropped"] == 2
    assert files["gbem_ua/acc_dataset/train_dataset_acc.csv"]["rows_dropped"] == 12
    assert all(f["rows_read"] > 0 for f in files.values())


def test_prepare_is_deterministic(prepared):
    out, _, params = prepared
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    prepare(params)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_stage_script_exits_nonzero_with_message(tmp_path, capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("prepare_stage", ROOT / "pipelines" / "prepare.py")
    stage = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stage)
    monkeypatch.setenv("BIASLAB_DATA_DIR", str(tmp_path / "no-mirror"))
    params = tmp_path / "params.yaml"
    params.write_text(f"data:\n  allow_download: false\n  prepared_dir: {tmp_path / 'prepared'}\n")
    assert stage.main(["--params", str(params)]) == 1
    err = capsys.readouterr().err
    assert "prepare failed:" in err and "train_dataset_acc.csv" in err and "allow_download is false" in err
    assert not (tmp_path / "prepared").exists()
