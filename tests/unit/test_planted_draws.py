"""bench/planted_draws.py: recipes, the shared phase they share, and the tally of detections over draws."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from bench_scripts import load_bench_script

from biaslab.config import Params

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {"gbem_ua": {"gbem_ua/qa_logodds_gap_fem": "increase", "gbem_ua/qa_diff_fem": "increase"},
            "rubia": {"rubia/pro_share/gender": "increase"}}


def _module():
    return load_bench_script("planted_draws")


def test_a_recipe_is_a_name_and_yaml_settings():
    module = _module()
    assert module.parse_recipe("committed") == ("committed", {})
    name, overlay = module.parse_recipe("strong:model.pretrain.planted_bias.strength=6,model.pretrain.planted_bias."
                                        "language_shares.en=0.7,x.flag=true")
    assert name == "strong"
    assert overlay == {"model.pretrain.planted_bias.strength": 6,
                       "model.pretrain.planted_bias.language_shares.en": 0.7, "x.flag": True}
    with pytest.raises(argparse.ArgumentTypeError, match="not key=value"):
        module.parse_recipe("bad:model.pretrain.seed")
    with pytest.raises(argparse.ArgumentTypeError, match="a name is needed"):
        module.parse_recipe(":model.pretrain.seed=1")


def test_recipes_that_change_only_the_planted_text_share_one_shared_phase_per_seed():
    module = _module()

    def key(overlay, seed=0):
        return module.shared_key(module.draw_params(ROOT, {}, overlay, seed, None, "cpu", 1))

    committed = key({})
    assert key({"model.pretrain.planted_bias.strength": 6}) == committed
    assert key({"model.pretrain.planted_bias.language_shares.en": 0.7}) == committed
    assert key({"model.pretrain.planted_bias.from_step": 100}) != committed  # the shared phase ends elsewhere
    assert key({"model.pretrain.max_steps": 2000}) != committed  # its learning-rate schedule changes
    assert key({}, seed=1) != committed


def test_draw_params_set_the_seed_and_float32_scoring_and_reject_a_misspelt_key(tmp_path):
    from biaslab.config import Params

    module = _module()
    raw = module.draw_params(ROOT, {"scoring.max_batch_tokens": 4096}, {}, 3, tmp_path, "cuda", 2)
    params = Params.model_validate(raw)
    assert params.model.pretrain.seed == 3 and params.model.pretrain.corpus_dir == str(tmp_path.resolve())
    assert (params.scoring.device, params.scoring.dtype, params.scoring.num_threads) == ("cuda", "float32", 2)
    assert params.scoring.max_batch_tokens == 4096
    assert Path(params.data.prepared_dir) == ROOT / "data" / "prepared"
    with pytest.raises(Exception, match="strenght"):
        module.draw_params(ROOT, {}, {"model.pretrain.planted_bias.strenght": 6}, 0, None, "cpu", 1)


def test_an_a_a_pair_is_the_control_and_a_control_re_seeded_after_the_shared_phase():
    module = _module()
    raw = module.draw_params(ROOT, {}, {}, 0, None, "cpu", 1)
    roles = module.model_roles(raw, aa=True)
    assert {role: direction for role, (_, direction) in roles.items()} == {
        "planted": "planted", "balanced": "balanced", "balanced-reseeded": "balanced"}
    control, reseeded = roles["balanced"][0], roles["balanced-reseeded"][0]
    assert module.shared_key(reseeded) == module.shared_key(control)  # the same first phase
    seed = control["model"]["pretrain"]["planted_bias"]["seed"]
    assert reseeded["model"]["pretrain"]["planted_bias"]["seed"] == seed + module.AA_SEED_OFFSET
    reseeded["model"]["pretrain"]["planted_bias"]["seed"] = seed
    assert reseeded == control  # nothing else differs
    assert set(module.model_roles(raw, aa=False)) == {"planted", "balanced"}
    models = {"planted": {"m": 1}, "balanced": {"m": 2}}
    assert module.pairs_ready(models, "balanced") == {"": ({"m": 1}, {"m": 2})}
    models["balanced-reseeded"] = {"m": 3}
    assert module.pairs_ready(models, "balanced-reseeded") == {"/A-A": ({"m": 3}, {"m": 2})}


def _m(value, low, high):
    return {"value": value, "direction": "lower", "ci_low": low, "ci_high": high}  # MetricValue.to_dict()


def test_the_verdict_is_the_calibrate_rule_on_each_family_s_primary_metric_and_the_tally_counts_draws():
    module = _module()
    planted = {"gbem_ua/qa_logodds_gap_fem": _m(0.30, 0.25, 0.35), "gbem_ua/qa_diff_fem": _m(0.5, 0.4, 0.6),
               "rubia/pro_share/gender": _m(0.54, 0.51, 0.57), "gbem_ua/qa_macro_f1": _m(0.45, 0.4, 0.5)}
    control = {"gbem_ua/qa_logodds_gap_fem": _m(0.00, -0.02, 0.02), "gbem_ua/qa_diff_fem": _m(0.9, 0.8, 1.0),
               "rubia/pro_share/gender": _m(0.50, 0.47, 0.53)}
    from biaslab.metrics.paired import PairedDifference

    paired = {"rubia/pro_share/gender": PairedDifference(0.04, 0.01, 0.07, 944, 944)}  # CIs overlap, paired not
    found = module.verdicts(FAMILIES, planted, control, paired)
    assert list(found) == ["gbem_ua", "rubia"]  # primary metrics only; qa_diff_fem's wrong way is not the verdict
    assert found["gbem_ua"]["status"] == "detected" and found["gbem_ua"]["effect"] == pytest.approx(0.30)
    assert found["gbem_ua"]["needed"] == pytest.approx(0.05 + 0.02)
    assert found["gbem_ua"]["paired_status"] == "n/a" and found["gbem_ua"]["paired"] == [None] * 3
    assert found["rubia"]["status"] == "overlap" and found["rubia"]["planted"] == [0.54, 0.51, 0.57]
    assert found["rubia"]["paired_status"] == "detected" and found["rubia"]["paired"] == [0.04, 0.01, 0.07]

    def draw(seed, f):
        return {"recipe": "a", "seed": seed, "families": f, "planted_qa_macro_f1": 0.45,
                "detected": sum(v["status"] == "detected" for v in f.values()),
                "detected_paired": sum(v["paired_status"] == "detected" for v in f.values())}

    draws = [draw(0, found), draw(1, module.verdicts(FAMILIES, control, planted))]
    tally = module.tally(draws, ["a"], list(FAMILIES))
    assert tally["a"]["draws"] == 2 and tally["a"]["families_per_draw"] == {"0": 1, "1": 0}
    assert tally["a"]["families_per_draw_paired"] == {"0": 1, "1": 0}
    assert tally["a"]["families"]["gbem_ua"] == {"detected": 1, "draws": 2, "paired_detected": 0,
                                                 "mean_effect": pytest.approx(0.0)}
    assert tally["a"]["families"]["rubia"]["detected"] == 0 and tally["a"]["families"]["rubia"]["paired_detected"] == 1
    table = module.markdown({"device": "cpu", "seeds": [0, 1], "recipes": {"a": {}}, "families": list(FAMILIES),
                             "tally": tally, "seconds": 1.0, "failures": 0})
    assert ("| a | params.yaml | 1 of 2, paired 0 (+0.000) | 0 of 2, paired 1 (+0.000) | 1 (1), 0 (0) "
            "| 0.45, 0.45 |") in table
    assert "--set" not in table  # no common settings: none named
    wider = module.markdown({"device": "cpu", "seeds": [0, 1], "recipes": {"a": {}}, "families": list(FAMILIES),
                             "tally": tally, "seconds": 1.0, "failures": 0, "workers": 2, "threads": 1,
                             "common": {"model.pretrain.hidden_size": 256, "model.pretrain.num_hidden_layers": 6}})
    assert wider.startswith("# planted-draws: cpu, seeds [0, 1], 2 worker(s) x 1 thread(s)\n")
    assert ("Every recipe, the shared phase included (`--set`): model.pretrain.hidden_size=256, "
            "model.pretrain.num_hidden_layers=6.") in wider  # a recipe's "params.yaml" is then params.yaml + these


@pytest.mark.slow
def test_a_tiny_draw_runs_end_to_end_in_a_worker_and_writes_its_tally(mirror, tmp_path):
    """One seed, one recipe, a few steps, three benchmarks: the spawned worker trains the shared phase, the planted
    model and its control, scores both, and the tally has one draw per family (missing where not scored). With
    ``--select occugender`` each pair is also read on OccuGender's selection jobs (a draw's ``select``: what the
    spill-over margin is sized on), the other half of its jobs (docs/splits.md)."""
    import json
    import shutil
    import subprocess
    import sys

    import pandas as pd

    from biaslab.config import DataConfig
    from biaslab.data.prepare import prepare

    workspace = tmp_path / "workspace"  # a fresh clone has no data/prepared: the draws read the lexicon there
    (workspace / "data").mkdir(parents=True)
    shutil.copy2(ROOT / "params.yaml", workspace / "params.yaml")
    prepare(Params(data=DataConfig(mirror_dir=str(mirror), prepared_dir=str(workspace / "data" / "prepared"),
                                   allow_download=False)))
    tiny = ",".join(["model.pretrain.max_steps=6", "model.pretrain.planted_bias.from_step=3",
                     "model.pretrain.chars_per_language=60000", "model.pretrain.vocab_size=512",
                     "model.pretrain.eval_every=3", "model.pretrain.warmup_steps=2",
                     "model.pretrain.validation_chars=5000",
                     *(f"evaluation.benchmarks.{b}.enabled=false" for b in ("gbem_ua", "cloze_gender", "lm_quality"))])
    keep = tmp_path / "models"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "planted_draws.py"), "--seeds", "0", "--device", "cpu",
                           "--threads", "1", "--corpus-dir", str(mirror / "corpora"), "--set", f"_:{tiny}",
                           "--workspace", str(workspace), "--out", str(tmp_path), "--aa", "--select", "occugender",
                           "--keep", str(keep)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    draws = {d["recipe"]: d for d in map(json.loads, (tmp_path / "draws.jsonl").read_text(encoding="utf-8").splitlines())}
    assert sorted(draws) == ["committed", "committed/A-A"]  # the planted pair and the A/A pair of seed 0
    draw = draws["committed"]
    assert draw["seed"] == 0 and draws["committed/A-A"]["seed"] == 0
    assert draw["families"]["rubia"]["status"] in ("detected", "overlap", "wrong direction")
    assert draw["families"]["gbem_ua"]["status"] == "missing"  # not scored: a verdict of its own, not a crash
    assert draw["families"]["rubia"]["paired_status"] in ("detected", "includes 0", "wrong direction")
    assert draw["families"]["rubia"]["paired"][1] <= draw["families"]["rubia"]["paired"][0]  # the CI holds the value
    models = [json.loads(line) for line in (tmp_path / "models.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(m["role"] for m in models) == ["balanced", "balanced-reseeded", "planted"]
    assert sorted(m["direction"] for m in models) == ["balanced", "balanced", "planted"]
    assert all("rubia/pro_share/gender" in m["metrics"] for m in models)
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "| committed | params.yaml | 0 of 1" in summary
    assert "| committed/A-A | params.yaml; A/A: control vs re-seeded control | 0 of 1" in summary
    aa = draws["committed/A-A"]
    assert set(aa["select"]) == {"occugender"} and set(draw["select"]) == {"occugender"}  # only the chosen family
    test, select = aa["families"]["occugender"], aa["select"]["occugender"]
    for entry in (test, select):
        assert entry["metric"] == "occugender/implicit_group_gap"
        assert entry["paired"][1] <= entry["paired"][0] <= entry["paired"][2]
    assert select["planted"] != test["planted"]  # other jobs, another value
    for role in ("balanced", "balanced-reseeded"):
        tables = keep / "committed-seed0" / role / "predictions"
        test_jobs = set(pd.read_parquet(next(tables.glob("occugender__*.parquet")))["job"])
        select_jobs = set(pd.read_parquet(next((tables / "select").glob("occugender__*.parquet")))["job"])
        assert test_jobs and select_jobs and not test_jobs & select_jobs


def test_an_a_a_only_draw_trains_no_planted_model_and_select_names_calibrate_families():
    module = _module()
    raw = module.draw_params(ROOT, {}, {}, 0, None, "cpu", 1)
    assert set(module.model_roles(raw, aa=True, planted=False)) == {"balanced", "balanced-reseeded"}
    assert module.parse_args(["--aa-only"]).aa  # --aa-only implies the A/A pair
    statistics = {"rubia/pro_share/gender": ("rubia", object())}
    assert module.selection_benchmarks(FAMILIES, statistics, ["rubia", "rubia"]) == ("rubia",)
    with pytest.raises(SystemExit, match="--select nope: not a calibrate family"):
        module.selection_benchmarks(FAMILIES, statistics, ["nope"])
    with pytest.raises(SystemExit, match="--select gbem_ua: gbem_ua/qa_logodds_gap_fem has no item statistic"):
        module.selection_benchmarks(FAMILIES, statistics, ["gbem_ua"])


def test_the_commit_stamp_is_read_once_at_the_start(monkeypatch):
    """A commit made while the draws run does not relabel the draws read after it."""
    from biaslab.tracking import git_commit

    module = _module()
    commits = iter(["aaa", "bbb"])
    monkeypatch.setattr(git_commit, "git_commit", lambda root: next(commits))
    module.started_commit.cache_clear()
    raw = module.draw_params(ROOT, {}, {}, 0, None, "cpu", 1)
    try:
        assert [module.recipe_stamp(raw)["commit"] for _ in range(2)] == ["aaa", "aaa"]
    finally:
        module.started_commit.cache_clear()
