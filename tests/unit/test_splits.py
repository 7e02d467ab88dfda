"""Train / select / test item sets (biaslab.data.splits): disjoint, seeded and stratified, physical in
data/prepared, absent from the deps of tune and finetune, and refused by the loader those stages use."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from biaslab.config import ConfigError, load_params
from biaslab.data import splits
from biaslab.data.splits import SELECT, TEST, SplitError, read_split_table, stratified_selection

ROOT = Path(__file__).resolve().parents[2]
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- the split rule
def test_stratified_selection_takes_one_item_per_run_of_each_stratum():
    strata = ["a"] * 10 + ["b"] * 7
    order = list(range(10)) + [0.5, 0.1, 0.9, 0.3, 0.7, 0.2, 0.8]
    where = stratified_selection(strata, order, 0.5, seed=3, where="t")
    assert where == stratified_selection(strata, order, 0.5, seed=3, where="t")  # seeded
    assert where != stratified_selection(strata, order, 0.5, seed=4, where="t")
    a = where[:10]
    assert a.count(SELECT) == 5 and all(a[i:i + 2].count(SELECT) == 1 for i in range(0, 10, 2))  # one per pair
    b = where[10:]
    assert b.count(SELECT) == 4 and set(where) == {SELECT, TEST}  # round_half_up(3.5) = 4, test keeps 3
    with pytest.raises(splits.DataError, match="stratum 'c' has 1 item"):
        stratified_selection(["c"], [0], 0.5, 0, "jobs.parquet")


# --------------------------------------------------------------------------- prepare writes the three sets
@pytest.fixture(scope="module")
def prepared(mirror, tmp_path_factory):
    """A project folder: params.yaml over the mirror (the full tables), ``prepare`` run."""
    from biaslab.data.prepare import prepare

    root = tmp_path_factory.mktemp("splits")
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw["data"].update(mirror_dir=str(mirror), prepared_dir=str(root / "data" / "prepared"), allow_download=False)
    (root / "params.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    params = load_params(root / "params.yaml")
    prepare(params)
    return root, params


def test_the_three_sets_are_disjoint_and_cover_each_benchmark(prepared):
    root, params = prepared
    out = Path(params.data.prepared_dir)
    record = json.loads((out / splits.RECORD).read_text(encoding="utf-8"))
    gbem = pd.read_parquet(out / "gbem_ua.parquet")
    members = {s: set(pd.read_parquet(out / s / "gbem_ua.parquet")["profession"]) for s in splits.SPLITS}
    assert not (members["train"] & members["select"] or members["train"] & members["test"]
                or members["select"] & members["test"])
    assert set.union(*members.values()) == set(gbem["profession"])
    assert {s: sorted(m) for s, m in members.items()} == record["gbem_ua"]["members"]

    jobs = pd.read_parquet(out / "occugender_jobs.parquet")
    parts = {s: pd.read_parquet(out / s / "occugender_jobs.parquet") for s in (SELECT, TEST)}
    assert not set(parts[SELECT]["job"]) & set(parts[TEST]["job"])
    assert sorted([*parts[SELECT]["job"], *parts[TEST]["job"]]) == sorted(jobs["job"])
    for group in ("female_dominated", "male_dominated"):  # stratified: both groups, half each, both share ranges
        sel = parts[SELECT].loc[parts[SELECT]["group"] == group, "female_ratio"]
        tst = parts[TEST].loc[parts[TEST]["group"] == group, "female_ratio"]
        assert len(sel) == len(tst) == (jobs["group"] == group).sum() // 2
        assert abs(sel.mean() - tst.mean()) < 5  # percentage points of BLS female share
    assert record["occugender"]["sizes"] == {SELECT: 20, TEST: 20}

    chunks = pd.read_parquet(out / "lm_heldout.parquet")
    key = ["language", "document", "chunk"]
    halves = {s: pd.read_parquet(out / s / "lm_heldout.parquet") for s in (SELECT, TEST)}
    both = halves[SELECT].merge(halves[TEST], on=key)
    assert both.empty and len(halves[SELECT]) + len(halves[TEST]) == len(chunks)
    # whole documents: no document has chunks in both sets (issue 43), about half the documents each
    doc = ["language", "document"]
    shared = halves[SELECT][doc].drop_duplicates().merge(halves[TEST][doc].drop_duplicates(), on=doc)
    assert shared.empty
    for lang, n in chunks.drop_duplicates(doc).groupby("language").size().items():
        assert n >= 23  # the English corpus has 23 novels; uk 64, ru 67 held-out documents
        selected = halves[SELECT].loc[halves[SELECT]["language"] == lang, "document"].nunique()
        assert abs(selected - n / 2) <= 2
    for split in splits.SPLITS:  # each folder says which set it is and what it holds
        manifest = json.loads((out / split / splits.MANIFEST).read_text(encoding="utf-8"))
        assert manifest["split"] == split and set(manifest["files"]) <= set(splits.FILES[split])


def test_the_evaluated_benchmarks_read_the_test_folder():
    from biaslab.benchmarks.gbem_ua import BENCHMARK as GBEM
    from biaslab.benchmarks.lm_quality import BENCHMARK as LM
    from biaslab.benchmarks.occugender import BENCHMARK as OCCU

    for benchmark in (GBEM, OCCU, LM):
        assert benchmark.prepared_files and all(f.startswith("test/") for f in benchmark.prepared_files)


# --------------------------------------------------------------------------- the loader refuses test items
def test_the_mitigation_loader_refuses_a_test_item(prepared, tmp_path):
    from pipelines.stage.inputs import mitigation_frame

    _, params = prepared
    out = Path(params.data.prepared_dir)
    frame = mitigation_frame(params)
    assert set(frame["split"]) == {"finetune", "validation"}
    with pytest.raises(SplitError, match=r"test/gbem_ua.parquet: is a test-split file; this stage may read only "
                                         r"train, select"):
        read_split_table(out, TEST, "gbem_ua.parquet")

    smuggled = tmp_path / "prepared"  # a test row copied into the select file is refused by row
    shutil.copytree(out, smuggled)
    select = pd.read_parquet(smuggled / SELECT / "gbem_ua.parquet")
    test_row = pd.read_parquet(smuggled / TEST / "gbem_ua.parquet").head(1)
    pd.concat([select, test_row]).to_parquet(smuggled / SELECT / "gbem_ua.parquet", index=False)
    with pytest.raises(SplitError, match=rf"select/gbem_ua.parquet, row {len(select) + 1}, column 'split': item "
                                         rf"{test_row['item_id'].iloc[0]} belongs to the test split"):
        read_split_table(smuggled, SELECT, "gbem_ua.parquet")

    shutil.rmtree(smuggled / SELECT)  # the test folder renamed as select: its manifest gives it away
    shutil.copytree(smuggled / TEST, smuggled / SELECT)
    with pytest.raises(SplitError, match="names split 'test'"):
        read_split_table(smuggled, SELECT, "occugender_jobs.parquet")


@pytest.mark.slow
def test_tune_stage_fails_on_a_test_row_and_a_pairing_variant_tunes_its_own_study(
        prepared, tmp_path, monkeypatch, capsys, tiny_causal_model, tiny_tokenizer):
    """``tune --variant lora_clp`` on the train/select items writes its own best_params.json, which
    finetune@lora_clp reads; a test row in the select file stops the stage with the file and split named."""
    from pipelines import tune

    root, params = prepared
    project = tmp_path / "project"
    shutil.copytree(Path(params.data.prepared_dir), project / "data" / "prepared")
    tiny_causal_model.save_pretrained(project / "models" / "base")
    tiny_tokenizer.save_pretrained(project / "models" / "base")
    raw = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8"))
    raw["data"]["prepared_dir"] = "data/prepared"
    raw["lora"].update(per_device_batch_size=4, gradient_accumulation_steps=1, pairing_pairs=1,
                       sources=["occupations_en"])  # few examples: the stage, not the model, is under test
    overrides = raw["variants"]["lora_clp"]["tune_overrides"]
    overrides.update(n_trials=1, trial_max_steps=1, objective="logprob", accuracy_tolerance=None)
    overrides["search_space"]["max_steps"] = [1]
    (project / "params.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    monkeypatch.chdir(project)

    assert tune.main(["--params", "params.yaml", "--no-track", "--variant", "lora_clp"]) == 0
    best = json.loads((project / "models" / "tune_lora_clp" / "best_params.json").read_text(encoding="utf-8"))
    assert set(best["params"]) >= {"learning_rate", "max_steps"} and best["params"]["max_steps"] == 1
    assert not (project / "models" / "tune").exists()  # the lora section's study is untouched
    tuned = load_params(project / "params.yaml")
    assert Path(tuned.tune_for("lora_clp").output_dir) == Path("models/tune_lora_clp")  # what finetune reads
    assert tuned.tune_for("lora_cda") == tuned.tune  # no tune_overrides: the tune section's study
    assert tune.main(["--params", "params.yaml", "--no-track", "--variant", "lora_cda"]) == 1
    assert "not a lora variant with tune_overrides" in capsys.readouterr().err

    select = project / "data" / "prepared" / SELECT / "gbem_ua.parquet"
    test_rows = pd.read_parquet(project / "data" / "prepared" / TEST / "gbem_ua.parquet").head(2)
    pd.concat([pd.read_parquet(select), test_rows]).to_parquet(select, index=False)
    assert tune.main(["--params", "params.yaml", "--no-track", "--variant", "lora_clp"]) == 1
    err = capsys.readouterr().err
    assert "select/gbem_ua.parquet" in err and "belongs to the test split" in err


def test_a_variant_study_needs_its_own_output_dir():
    params = load_params(ROOT / "params.yaml")
    for variant in ("lora_clp", "lora_clp_cda"):  # no hand-picked rate or steps: both come from the study
        assert "learning_rate" not in params.variant(variant).lora_overrides
        assert "max_steps" not in params.variant(variant).lora_overrides
        assert params.lora_for(variant).use_tuned
        assert {"learning_rate", "max_steps"} <= set(params.tune_for(variant).search_space)
    assert len({params.tune_for(v).output_dir for v in params.variants if params.variant(v).method == "lora"}) == 3
    broken = params.model_copy(deep=True)
    broken.variants["lora_clp"].tune_overrides.pop("output_dir")
    with pytest.raises(ConfigError, match="variants.lora_clp.tune_overrides: a variant's own study needs its own"):
        broken.tune_for("lora_clp")


# --------------------------------------------------------------------------- DVC deps prove it
def _bodies(stage: str) -> dict:
    body = DVC["stages"][stage]
    return body.get("do", body)


def _data_deps(stage: str) -> list[str]:
    return [d for d in _bodies(stage)["deps"] if d.startswith("data/")]


@pytest.mark.parametrize("stage", ["tune", "tune_variant", "finetune"])
def test_choice_and_training_stages_depend_on_no_test_file(stage):
    """No dep is a test folder, a file in it, or a folder above it (data/prepared itself holds test/)."""
    deps = _data_deps(stage)
    assert sorted(deps) == ["data/prepared/select", "data/prepared/train"]
    test_dir = Path("data/prepared") / TEST
    for dep in deps:
        assert not (test_dir == Path(dep) or Path(dep) in test_dir.parents or test_dir in Path(dep).parents)


def test_the_verdict_stages_read_the_test_items():
    assert "data/prepared" in _data_deps("evaluate") and "data/prepared" in _data_deps("calibrate")
    studies = DVC["stages"]["finetune"]["foreach"]
    params = load_params(ROOT / "params.yaml")
    for variant, item in studies.items():  # finetune@v depends on the study its settings come from
        assert item["study"] == params.tune_for(variant).output_dir
    assert set(DVC["stages"]["tune_variant"]["foreach"]) == {
        v for v, c in params.variants.items() if c.method == "lora" and c.tune_overrides}


def test_held_out_documents_go_whole_to_one_set_even_with_a_lone_origin():
    """A language whose validation documents are one (a stratum of one) is split by language alone."""
    import pandas as pd

    chunks = pd.DataFrame({"language": ["en"] * 6 + ["uk"] * 4, "document": [0, 1, 1, 2, 3, 3, 0, 0, 1, 2],
                           "origin": ["validation"] + ["untrained_tail"] * 5 + ["validation"] * 4})
    where = splits.document_split(chunks, 0.5, 0)
    by_doc = {}
    for (lang, doc), w in zip(zip(chunks["language"], chunks["document"]), where):
        assert by_doc.setdefault((lang, doc), w) == w  # every chunk with its document
    assert {w for (lang, _), w in by_doc.items() if lang == "en"} == {SELECT, TEST}
    assert splits.document_split(chunks, 0.5, 0) == where  # seeded
