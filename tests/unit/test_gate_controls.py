"""The gate's controls: how they are built (tiny models) and the check that fails the run on a wrong verdict."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from unittest import mock

import pytest
import torch

from biaslab.calibration import controls
from biaslab.config import ConfigError, GateControl, VariantConfig
from tests.unit.test_pretrain_phases import same, tiny_prepared
from tests.unit.test_pretrain_train import splits, tiny_cfg  # noqa: F401 - the module-scoped corpus fixture


@dataclass
class Row:
    metric: str
    rule: str
    passed: bool
    reason: str = "why"


@dataclass
class Verdict:
    rows: list = field(default_factory=list)

    @property
    def passed(self):
        return bool(self.rows) and all(r.passed for r in self.rows)


BIAS_OK, BIAS_NO = Row("g/gap", "paired_bias_reduction", True), Row("g/gap", "paired_bias_reduction", False, "no cut")
BPC_OK, BPC_NO = Row("lm/bpc", "paired_non_inferior", True), Row("lm/bpc", "paired_non_inferior", False, "+0.4 bits")


def test_the_positive_control_must_be_approved():
    ok = controls.check_one("positive_control", "positive", Verdict([BIAS_OK, BPC_OK]))
    assert ok.ok and ok.approved
    wrong = controls.check_one("positive_control", "positive", Verdict([BIAS_NO, BPC_OK]))
    assert not wrong.ok and "paired_bias_reduction on g/gap: no cut" in wrong.message
    with pytest.raises(controls.GateControlError, match="refuses its positive control positive_control: "
                                                        "paired_bias_reduction on g/gap"):
        controls.require([ok, wrong])


def test_the_negative_control_must_be_refused_and_whether_a_harm_rule_caught_it_is_recorded():
    ok = controls.check_one("negative_control", "negative", Verdict([BIAS_NO, BPC_NO]))
    assert ok.ok and not ok.approved and ok.harm_caught and ok.deciding == ("paired_non_inferior on lm/bpc: +0.4 bits",)
    approved = controls.check_one("negative_control", "negative", Verdict([BIAS_OK, BPC_OK]))
    assert not approved.ok and "approves its negative control" in approved.message
    only_bias = controls.check_one("negative_control", "negative", Verdict([BIAS_NO, BPC_OK]))
    assert only_bias.ok and only_bias.harm_caught is False  # refused (the run goes on), the harm rules saw nothing
    assert "only by paired_bias_reduction: no harm rule caught the harm" in only_bias.message
    controls.require([ok, only_bias])  # nothing wrong: no error
    with pytest.raises(controls.GateControlError, match="approves its negative control"):
        controls.require([approved])
    table = controls.render_markdown([ok, only_bias, approved])
    assert "| negative_control | negative | refused | refused | ok | yes |" in table
    assert "| negative_control | negative | refused | refused | ok | **no** |" in table and "**WRONG**" in table
    assert controls.mlflow_metrics([ok]) == {"calibration/gate_control/negative_control/approved": 0.0,
                                             "calibration/gate_control/negative_control/ok": 1.0,
                                             "calibration/gate_control/negative_control/harm_caught": 1.0}


def test_a_control_variant_has_its_recipe():
    with pytest.raises(ValueError, match="control: section exactly when its method is control"):
        VariantConfig(method="control", model_dir="models/x")
    with pytest.raises(ValueError, match="control: section exactly when its method is control"):
        VariantConfig(method="embedding", model_dir="models/x",
                      control=GateControl(role="negative", recipe="noised_embeddings"))


def test_the_committed_controls_are_labelled_controls():
    from biaslab.config import load_params

    params = load_params("params.yaml")
    roles = {n: v.control.role for n, v in params.variants.items() if v.method == "control"}
    assert roles == {"positive_control": "positive", "negative_control": "negative"}
    assert all(params.variants[n].description.startswith("CONTROL (") for n in roles)
    with pytest.raises(ConfigError):
        params.variant("no_such_control")


def test_noise_is_seeded_and_sized(tmp_path):
    from biaslab.pretrain.gate_controls import noise_embeddings

    weight = torch.randn(500, 16, generator=torch.Generator().manual_seed(1))
    a, b = noise_embeddings(weight, 0.5, 0), noise_embeddings(weight, 0.5, 0)
    assert torch.equal(a, b) and not torch.equal(a, noise_embeddings(weight, 0.5, 1))
    assert float((a - weight).std()) == pytest.approx(0.5 * float(weight.std()), rel=0.05)


def test_both_controls_build_from_a_tiny_planted_model(splits, tmp_path):  # noqa: F811
    """The negative control changes only the input embeddings; the positive one trains on the balanced planted
    text (a folder that loads, its record says what it did) and moves the weights."""
    from transformers import AutoModelForCausalLM

    from biaslab.config import DataConfig, ModelConfig, Params, PlantedBiasConfig
    from biaslab.pretrain.gate_controls import CONTROL_FILE, build_control
    from biaslab.pretrain.phases import continue_training, save_continued, train_shared

    prepared = tiny_prepared(tmp_path / "prepared")
    planted = PlantedBiasConfig(enabled=True, dose=0.5, from_step=3, en_sources=("occugender", "fixture"),
                                sentences_per_document=2)
    params = Params(data=DataConfig(prepared_dir=str(prepared)),
                    model=ModelConfig(pretrain=tiny_cfg(max_steps=6, planted_bias=planted)))
    with mock.patch("biaslab.pretrain.phases._splits", return_value=splits):
        train_shared(params, tmp_path / "pretrain", progress=False)
        save_continued(continue_training(params, tmp_path / "pretrain", "planted", progress=False), tmp_path / "base")
        positive = build_control(params, GateControl(role="positive", recipe="balanced_finetune", steps=3,
                                                     learning_rate=1e-3), tmp_path / "base", tmp_path / "pos",
                                 progress=False)
    negative = build_control(params, GateControl(role="negative", recipe="noised_embeddings", scale=0.5),
                             tmp_path / "base", tmp_path / "neg")
    base = AutoModelForCausalLM.from_pretrained(tmp_path / "base")
    pos = AutoModelForCausalLM.from_pretrained(tmp_path / "pos")
    neg = AutoModelForCausalLM.from_pretrained(tmp_path / "neg")
    assert positive["planted_rows_per_batch"] == 4 and json.loads((tmp_path / "pos" / CONTROL_FILE).read_text())[
        "control"]["steps"] == 3
    assert not same(base, pos)
    changed = {k for k, v in neg.state_dict().items() if not torch.equal(v, base.state_dict()[k])}
    assert changed == {"model.embed_tokens.weight"} and not negative["tied_output_embeddings"]
    assert negative["relative_change"] == pytest.approx(0.5, rel=0.1)


def test_without_a_planted_bias_the_positive_control_is_skipped_with_the_reason(tmp_path, monkeypatch):
    """The stage leaves a variant.json saying why (evaluate and register skip such a variant), and a run file."""
    import yaml

    from biaslab.config import load_params
    from biaslab.outputs.variant_dir import variant_skip_reason
    from pipelines.gate_control import run

    raw = yaml.safe_load(open("params.yaml", encoding="utf-8"))
    raw["model"]["pretrain"]["planted_bias"]["enabled"] = False
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    (tmp_path / "models" / "base").mkdir(parents=True)
    (tmp_path / "models" / "base" / "config.json").write_text("{}", encoding="utf-8")
    run("positive_control", "params.yaml")
    params = load_params("params.yaml")
    assert "enabled is false" in variant_skip_reason(params.variant("positive_control"), tmp_path)
    record = json.loads((tmp_path / "runs" / "gate_control_positive_control.json").read_text())
    assert record["model_fingerprint"] is None and record["stage"] == "gate_control"


def test_calibrate_checks_the_project_gate_on_the_workspaces_controls(tmp_path):
    """pipelines.calibrate.gate_control_checks on evaluate outputs in a workspace (LocalEvidence, the project's
    gate from params.yaml): a harmless positive control is approved, a negative one with bits/char blown up is
    refused by the non-inferiority rule; a negative control that does no harm fails the run naming it."""
    import yaml

    from biaslab.config import load_params
    from pipelines.calibrate import gate_control_checks
    from tests.unit.test_gate import harm_tables, write_variant

    chunks, qa = harm_tables(seed=0)
    write_variant(tmp_path, "base", chunks, qa)
    write_variant(tmp_path, "positive_control", chunks, qa)
    write_variant(tmp_path, "negative_control", chunks.assign(logprob=chunks["logprob"] * 1.2), qa)
    write_variant(tmp_path, "harmless_negative", chunks, qa)
    control = {"method": "control", "control": {"role": "negative", "recipe": "noised_embeddings"}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "variants": {"base": {"method": "none", "model_dir": "models/base"},
                     "positive_control": {"method": "control", "model_dir": "models/positive_control",
                                          "control": {"role": "positive", "recipe": "balanced_finetune"}},
                     "negative_control": {**control, "model_dir": "models/negative_control"}},
        "evaluation": {"benchmarks": {"gbem_ua": {"module": "biaslab.benchmarks.gbem_ua"},
                                      "lm_quality": {"module": "biaslab.benchmarks.lm_quality"}}},
        "registry": {"bootstrap": {"samples": 300}, "gate": [
            {"metric": "gbem_ua/qa_macro_f1", "rule": "paired_non_inferior", "tolerance": 0.027},
            {"metric": "lm_quality/bits_per_char", "rule": "paired_non_inferior", "tolerance": 0.021}]}}))
    params = load_params(tmp_path / "params.yaml")
    checks = gate_control_checks(params, tmp_path)
    by_name = {c.variant: c for c in checks}
    assert {n: (c.approved, c.ok) for n, c in by_name.items()} == {"positive_control": (True, True),
                                                                    "negative_control": (False, True)}
    assert by_name["negative_control"].deciding[0].startswith(
        "paired_non_inferior on lm_quality/bits_per_char: worse than the")
    controls.require(checks)
    import shutil

    from biaslab.outputs import paths

    # a negative control that does no harm (the harmless outputs under its name): the run must fail
    shutil.copy(tmp_path / paths.metrics_file("harmless_negative"), tmp_path / paths.metrics_file("negative_control"))
    for table in (tmp_path / paths.predictions_dir("harmless_negative")).iterdir():
        shutil.copy(table, tmp_path / paths.predictions_dir("negative_control") / table.name)
    with pytest.raises(controls.GateControlError, match="approves its negative control negative_control"):
        controls.require(gate_control_checks(params, tmp_path))


def _scores(gap=0.2, bpc=2.70):
    return {"gbem_ua/qa_logodds_gap_fem": gap, "gbem_ua/qa_macro_f1": 0.4, "lm_quality/bits_per_char": bpc}


def test_the_positive_controls_rule_takes_the_fewest_steps_that_cut_the_selection_gap_to_a_quarter_at_little_cost():
    from bench_scripts import load_bench_script

    module = load_bench_script("gate_controls")
    base = _scores(gap=0.2, bpc=2.70)
    weak = {"steps": 30, "learning_rate": 1e-3, "scores": _scores(gap=0.08, bpc=2.70)}  # a cut, not to a quarter
    costly = {"steps": 60, "learning_rate": 1e-3, "scores": _scores(gap=0.01, bpc=2.72)}  # 0.02 >= tolerance / 2
    good = {"steps": 60, "learning_rate": 3e-3, "scores": _scores(gap=-0.04, bpc=2.705)}
    strong = {"steps": 120, "learning_rate": 3e-3, "scores": _scores(gap=0.0, bpc=2.70)}
    chosen = module.choose(base, [weak, costly, good, strong], bpc_tolerance=0.026)
    assert (chosen["steps"], chosen["learning_rate"], chosen["rule_met"]) == (60, 3e-3, True)
    fallback = module.choose(base, [weak, costly], bpc_tolerance=0.026)
    assert (fallback["steps"], fallback["rule_met"]) == (60, False)  # the largest reduction, reported as unmet


def test_the_negative_controls_rule_takes_the_smallest_noise_that_costs_twice_the_tolerance_for_every_seed():
    from bench_scripts import load_bench_script

    module = load_bench_script("gate_controls")
    base = _scores(bpc=2.70)

    def candidate(scale, *rises):
        return {"scale": scale, "seeds": [{"seed": k, "scores": _scores(bpc=2.70 + r)} for k, r in enumerate(rises)]}

    nudge = candidate(0.5, 0.013, 0.012, 0.014)
    one_lucky_draw = candidate(1.0, 0.060, 0.049, 0.055)  # 0.049 < 2 x 0.025 for seed 1
    clear = candidate(1.5, 0.051, 0.0505, 0.090)
    chosen = module.choose_negative(base, [nudge, one_lucky_draw, clear], bpc_tolerance=0.025)
    assert (chosen["scale"], chosen["rule_met"]) == (1.5, True)
    fallback = module.choose_negative(base, [nudge, one_lucky_draw], bpc_tolerance=0.025)
    assert (fallback["scale"], fallback["rule_met"]) == (1.0, False)  # the largest scale, reported as unmet


def test_re_seeded_controls_are_judged_by_the_harm_rules_only_with_the_control_as_the_base(tmp_path):
    """bench/gate_error_rates.py --aa-models: each re-seeded control against the workspace's ``control``; only
    the harm rules count (a re-seeded control removes no bias and is not asked to), a harmful one is refused."""
    import yaml
    from bench_scripts import load_bench_script

    from biaslab.config import load_params
    from tests.unit.test_gate import harm_tables, write_variant

    chunks, qa = harm_tables(seed=1)
    root, scratch, models = tmp_path / "run", tmp_path / "scratch", tmp_path / "kept"
    write_variant(root, "control", chunks, qa)
    (root / "data" / "prepared").mkdir(parents=True)
    write_variant(scratch, "aa_1", chunks.assign(logprob=chunks["logprob"] * 1.001), qa)  # re-training noise
    write_variant(scratch, "aa_2", chunks.assign(logprob=chunks["logprob"] * 1.2), qa)  # harm
    for k in (1, 2):
        (models / f"control-reseeded-{k}").mkdir(parents=True)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "variants": {"base": {"method": "none", "model_dir": "models/base"}},
        "evaluation": {"benchmarks": {"gbem_ua": {"module": "biaslab.benchmarks.gbem_ua"},
                                      "lm_quality": {"module": "biaslab.benchmarks.lm_quality"}}},
        "registry": {"bootstrap": {"samples": 300}, "gate": [
            {"metric": "gbem_ua/qa_logodds_gap_fem", "rule": "paired_bias_reduction", "min_share": 0.5},
            {"metric": "lm_quality/bits_per_char", "rule": "paired_non_inferior", "tolerance": 0.021}]}}))
    params = load_params(tmp_path / "params.yaml")
    module = load_bench_script("gate_error_rates")
    result = module.aa_harm_refusals(params, root, sorted(models.iterdir()), scratch)
    assert {r["rule"] for r in result["rows"]} == {"paired_non_inferior"}  # the bias rule is not a harm rule
    assert [(r["pair"], r["refused"]) for r in result["rows"]] == [("control-reseeded-1 vs control", False),
                                                                   ("control-reseeded-2 vs control", True)]
    assert (result["refused"], result["evaluations"], result["refused_pairs"], result["pairs"]) == (1, 2, 1, 2)
    assert (scratch / "data" / "prepared").is_symlink() and (scratch / "metrics" / "control.json").is_file()
