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
    "rubia.parquet": ["pair_id", "pro", "anti", "domain", "subdomain", "is_duplicate", "is_defective"],
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
    assert files["rubia/rubia.tsv"]["rows_dropped"] == 0  # the two defective pairs are kept, flagged
    assert files["gbem_ua/acc_dataset/train_dataset_acc.csv"]["rows_dropped"] == 12
    optional = {n: f for n, f in files.items() if n.startswith("genderlex/extracted/")}  # not in the mirror
    assert all(f["rows_read"] > 0 for n, f in files.items() if n not in optional)
    if optional:  # the ClozeGender authors' WinoBias/Winogender files: reported, table not written
        (first,) = optional.values()
        assert "optional file not available" in first["events"][0]["reason"]


def test_prepare_is_deterministic(prepared):
    out, _, params = prepared
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert any(p.parts[0] == "test" for p in before)  # the split folders too
    prepare(params)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


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


def test_sampled_prepare_keeps_few_whole_units_per_reported_group(prepared, tmp_path):
    from biaslab.config import SampleConfig
    from biaslab.data.sample import UNITS

    full_out, _, params = prepared
    data = params.data.model_copy(update={"prepared_dir": str(tmp_path / "sampled"),
                                          "sample": SampleConfig(per_group=2, seed=0)})
    report = prepare(params.model_copy(update={"data": data}))
    out = tmp_path / "sampled"
    assert report["sample"] == {"per_group": 2, "seed": 0}
    for name, (unit, strata) in UNITS.items():
        if not (full_out / name).is_file():  # an optional table (genderlex_wino) the mirror cannot give
            continue
        full, small = pd.read_parquet(full_out / name), pd.read_parquet(out / name)
        assert 0 < len(small) < len(full), name
        groups = small.groupby(list(strata)) if strata else [((), small)]
        for key, members in groups:
            assert len(members[unit].unique() if unit else members) <= 2, (name, key)
        if strata:  # every reported group survives
            assert set(map(tuple, small[list(strata)].drop_duplicates().astype(str).values)) == set(
                map(tuple, full[list(strata)].drop_duplicates().astype(str).values)), name
        if unit:  # units are whole: every row of a kept unit is kept
            kept = full[full[unit].isin(small[unit])]
            assert len(kept) == len(small), name
    assert pd.read_parquet(out / "gender_pairs.parquet").equals(pd.read_parquet(full_out / "gender_pairs.parquet"))
    genderlex = pd.read_parquet(out / "genderlex.parquet")  # a kept sentence keeps its noun, verb and occ rows
    assert (genderlex.groupby(["subject", "row"])["context_type"].nunique() == 3).all()
    split = json.loads((out / "gbem_ua_split.json").read_text(encoding="utf-8"))
    gbem = pd.read_parquet(out / "gbem_ua.parquet")
    assert {k: sorted(v) for k, v in split.items()} == {
        k: sorted(gbem.loc[gbem["split"] == k, "profession"].unique()) for k in split}
    assert all(len(v) == 2 for v in split.values())
