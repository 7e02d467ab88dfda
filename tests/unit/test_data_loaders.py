"""Loaders on the real mirror: row counts after cleaning, known defects reported, GBEM-UA split."""

from __future__ import annotations

import pytest

from biaslab.config import DataConfig, GbemUaSplit
from biaslab.data import crows_pairs, gbem_ua, gender_pairs, genderlex, occugender, rubia, winobias, winogender
from biaslab.data.report import PrepareReport


@pytest.fixture(scope="module")
def cfg(mirror):
    return DataConfig(mirror_dir=str(mirror), allow_download=False)


def events(report, rel, action):
    return {e["reason"]: e for e in report.file(rel).events if e["action"] == action}


@pytest.fixture(scope="module")
def gbem(cfg):
    report = PrepareReport()
    return gbem_ua.load(cfg, report).to_pandas(), report


def test_gbem_ua_rows_and_variants(gbem):
    frame, _ = gbem
    assert len(frame) == 2 * 349 * 8
    assert frame["profession"].nunique() == 349
    per_group = frame.groupby(["source_file", "profession"]).apply(
        lambda g: len(set(zip(g.is_male, g.is_correct, g.is_feminitive))), include_groups=False)
    assert (per_group == 8).all()
    assert frame["prob_sentence"].str.contains("BLANK ").all()
    assert not frame["experience"].str.startswith(" ").any()
    assert frame["item_id"].is_unique


def test_gbem_ua_known_defects_reported(gbem):
    _, report = gbem
    for rel in gbem_ua.FILES["train"]:
        dropped = events(report, rel, "dropped")
        assert [e["count"] for r, e in dropped.items() if "амбасадор" in r] == [4]
        assert [e["count"] for r, e in dropped.items() if "урядовець" in r] == [8]
        assert report.file(rel).to_dict()["rows_read"] == 2804
    test_acc = report.file(gbem_ua.FILES["test"][0]).to_dict()
    assert test_acc["rows_dropped"] == 8 and test_acc["rows_fixed"] == 1324
    notes = events(report, gbem_ua.FILES["test"][0], "noted")
    assert sum(e["count"] for e in notes.values()) == 8  # рибалка: 4 sentences, each twice


def test_gbem_ua_split_by_profession(gbem):
    frame, _ = gbem
    members = {s: set(frame.loc[frame.split == s, "profession"]) for s in ("finetune", "validation", "eval")}
    assert {k: len(v) for k, v in members.items()} == {"finetune": 140, "validation": 35, "eval": 174}
    assert not members["eval"] & (members["finetune"] | members["validation"])
    assert not members["finetune"] & members["validation"]


def test_split_is_deterministic_and_seeded():
    names = [f"p{i}" for i in range(50)]
    a = gbem_ua.split_professions(names, GbemUaSplit(seed=3))
    assert a == gbem_ua.split_professions(list(reversed(names)), GbemUaSplit(seed=3))
    assert a != gbem_ua.split_professions(names, GbemUaSplit(seed=4))
    assert sorted(sum(a.values(), [])) == sorted(names)


def test_gender_pairs(cfg):
    report = PrepareReport()
    frame = gender_pairs.load(cfg, report).to_pandas()
    counts = frame["language"].value_counts()
    assert counts["uk"] == 38 and counts["en"] >= 30 and counts["ru"] >= 30
    assert not frame.duplicated(["language", "male", "female"]).any()
    assert ("uk", "він", "вона") in set(zip(frame.language, frame.male, frame.female))
    assert report.file(gender_pairs.MALE_FILE).to_dict()["rows_dropped"] == 1


def test_rubia(cfg):
    report = PrepareReport()
    frame = rubia.load(cfg, report).to_pandas()
    assert len(frame) == 2221
    assert set(frame.loc[frame["is_defective"], "pair_id"]) == {1370, 2161}  # kept, flagged (authors score them)
    dup = frame[frame.is_duplicate]
    assert len(dup) == 215 and dup["subdomain"].str.endswith("_stereotype").all()
    assert not frame[~frame.is_duplicate].duplicated(["pro", "anti"]).any()
    assert not (frame["pro"].str.contains("\n") | frame["anti"].str.contains("\n")).any()
    rep = report.file(rubia.FILE).to_dict()
    assert rep["rows_dropped"] == 0 and rep["rows_fixed"] == 2  # the line breaks in 1305 and 1370


def test_crows_pairs(cfg):
    frame = crows_pairs.load(cfg).to_pandas()
    assert len(frame) == 1508 and frame["is_duplicate"].sum() == 1
    assert (frame["bias_type"] == "gender").sum() == 262


def test_winobias(cfg):
    report = PrepareReport()
    frame = winobias.load(cfg, report).to_pandas()
    assert len(frame) == 8 * 396 // 2
    assert set(frame["pro_pronoun"]) | set(frame["anti_pronoun"]) <= winobias.PRONOUNS
    words = [s.split()[i].strip(".,").lower() for s, i in zip(frame.pro_sentence, frame.pronoun_index)]
    assert words == frame["pro_pronoun"].tolist()
    assert 10 < (~frame["minimal_pair"]).sum() < 30
    assert not frame["pro_sentence"].str.contains(r"[\[\]]").any()
    assert "[" not in "".join(frame["occupation"]) and not frame["occupation"].str.match("(?i)the ").any()
    occupations = winobias.load_occupations(cfg, report)
    assert len(occupations["female"]) == len(occupations["male"]) == 20
    assert occupations["female"][-1] == "tailor" and occupations["male"][0] == "driver"


def test_winogender(cfg):
    frame = winogender.load(cfg).to_pandas()
    assert len(frame) == 720 // 3 and frame["occupation"].nunique() == 60
    assert frame["sentence_neutral"].str.contains(r"\bthey\b|\btheir\b|\bthem\b", case=False).all()


def test_genderlex(cfg):
    report = PrepareReport()
    frame = genderlex.load(cfg, report).to_pandas()
    assert len(frame) == 9 * 837
    assert frame.groupby(["subject", "context_type"])["is_duplicate"].sum().isin([17, 18]).all()
    hb_notes = [e["count"] for rel in report.files for r, e in events(report, rel, "noted").items() if "HB" in r]
    assert sorted(hb_notes) == [94, 94]


def test_occugender(cfg):
    jobs = occugender.load(cfg).to_pandas()
    assert len(jobs) == 40 and set(jobs["group"]) == set(occugender.GROUPS)
    spec = occugender.load_spec(cfg)
    assert len(spec["task_prompts"]) == 4 and len(spec["debiasing_prompts"]) == 6
