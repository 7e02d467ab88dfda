"""The promotion gate's paired rules on stored per-item predictions (synthetic, no model, no MLflow).

Each rule is checked against a direct computation: a naive loop that draws the resampling units with the
same generator, evaluates the statistic on both models' rows of them and takes the percentiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest
import yaml

from biaslab.config import GateCondition, load_params
from biaslab.metrics.paired import ItemStatistic
from biaslab.metrics.values import MetricValue
from biaslab.outputs import metrics_file, paths
from biaslab.outputs.metrics_file import VariantMetrics
from biaslab.registry import evaluate_gate, evaluate_gate_for, evaluate_gate_on_metrics, gate_conditions
from biaslab.registry.evidence import LocalEvidence

SAMPLES = 400
TABLE = "toy__items"


def _mean(column):
    return lambda cols: float(np.asarray(cols[column], dtype=float).mean())


def _rows(table):
    return table


# metric -> (column, direction, ideal, resampling unit)
METRICS = {"toy/gap": ("gap", "target", 0.0, ("unit",)), "toy/acc": ("acc", "higher", 1.0, None),
           "toy/bpc": ("bpc", "lower", None, None), "toy/other": ("other", "target", 0.5, ("unit",))}
STATISTICS = {m: ("toy", ItemStatistic("items", _rows, ("item",), _mean(col), unit))
              for m, (col, _, _, unit) in METRICS.items()}


def items(seed=0, n=300, gap=0.8, acc=0.7, bpc=2.78, other=0.55, yes=0.5, noise=0.3):
    """One model's per-item rows: an item id, a unit of 3 items, and a column per metric."""
    rng = np.random.default_rng(seed)
    common = np.random.default_rng(99).normal(0, 1, n)  # what the items share across models (pairing)
    return pd.DataFrame({
        "item": np.arange(n), "item_id": np.arange(n), "unit": np.arange(n) // 3,
        "gap": gap + common * noise + rng.normal(0, 0.1, n),
        "acc": (np.random.default_rng(7).random(n) < acc) if acc in (0.0, 1.0) else
               (np.random.default_rng(7).random(n) + rng.normal(0, 0.02, n) < acc),
        "bpc": bpc + common * 0.3 + rng.normal(0, 0.01, n),
        "other": other + common * noise + rng.normal(0, 0.1, n),
        "answer_yes": np.arange(n) < round(yes * n),
    }).sample(frac=1.0, random_state=seed)  # row order differs between models: pairing is by item


def metrics_of(frame):
    return {m: MetricValue(_mean(col)(frame), direction, ideal, 0.0, 1.0, len(frame))
            for m, (col, direction, ideal, _) in METRICS.items()}


@dataclass
class FrameEvidence:
    """GateEvidence over frames in memory (the protocol LocalEvidence and a server reader implement)."""

    frames: dict = field(default_factory=dict)
    metric_values: dict = field(default_factory=dict)

    def add(self, name, frame, metrics=None):
        self.frames[name] = {TABLE: frame, "gbem_ua__qa": frame}
        self.metric_values[name] = metrics if metrics is not None else metrics_of(frame)
        return self

    def metrics(self, variant):
        if variant not in self.metric_values:
            raise FileNotFoundError(f"metrics/{variant}.json: not found")
        return VariantMetrics(variant, self.metric_values[variant])

    def predictions(self, variant):
        return self.frames.get(variant, {})

    def source(self, variant):
        return {f"memory:{variant}": "0" * 64}


def gate(conditions, evidence, variant="v", seed=0, samples=SAMPLES):
    return evaluate_gate(conditions, evidence, variant, "base", statistics=STATISTICS, seed=seed, samples=samples)


def naive_paired(v, b, metric, transform=lambda x: x, seed=0, samples=SAMPLES):
    """The paired percentile bootstrap by hand: units drawn with replacement, both models' rows of them."""
    column, _, _, unit = METRICS[metric]
    v, b = v.sort_values("item").reset_index(drop=True), b.sort_values("item").reset_index(drop=True)
    groups = list(v.groupby(list(unit), sort=True).indices.values()) if unit else [np.array([i]) for i in range(len(v))]
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(samples):
        rows = np.concatenate([groups[k] for k in rng.integers(0, len(groups), size=len(groups))])
        v_rows, b_rows = v[column].to_numpy(float)[rows], b[column].to_numpy(float)[rows]
        stats.append(transform(v_rows.mean()) - transform(b_rows.mean()))
    estimate = transform(v[column].astype(float).mean()) - transform(b[column].astype(float).mean())
    low, high = np.quantile(stats, [0.025, 0.975])
    return estimate, (float(low), float(high))


BIAS = GateCondition(metric="toy/gap", rule="paired_bias_reduction", min_share=0.5)
ACC = GateCondition(metric="toy/acc", rule="paired_non_inferior", tolerance=0.03, reference="planted - control")
BPC = GateCondition(metric="toy/bpc", rule="paired_non_inferior", tolerance=0.021)
SPILL = GateCondition(metric="toy/other", rule="paired_no_spill_over", tolerance=0.06)
COLLAPSE = GateCondition(metric="gbem_ua/qa_answers", rule="answer_floor", table="gbem_ua__qa",
                         column="answer_yes", floor=0.10, answer_names={"True": "так", "False": "ні"})


@pytest.mark.parametrize("gap, passed, why", [(0.3, True, "removed"), (0.6, False, "too small a reduction"),
                                              (0.8, False, "no reduction beyond the paired CI")])
def test_bias_rule_is_the_paired_ci_of_the_distance_and_the_removed_share(gap, passed, why):
    base, variant = items(0), items(1, gap=gap)
    row = gate([BIAS], FrameEvidence().add("base", base).add("v", variant)).rows[0]
    estimate, ci = naive_paired(variant, base, "toy/gap", abs)
    assert row.estimate == pytest.approx(estimate, abs=1e-12) and row.ci == pytest.approx(ci, abs=1e-12)
    share = 1 - abs(variant["gap"].mean()) / abs(base["gap"].mean())
    assert row.passed is passed is bool(ci[1] < 0 and share >= 0.5) and why in row.reason
    assert "50%" in row.asks


def test_non_inferiority_reads_the_ci_bound_on_the_bad_side():
    base = items(0)
    harmed = items(1, acc=0.6, bpc=2.82)  # accuracy -0.1, bits/char +0.04 (the hard_k16 kind of harm)
    rows = gate([ACC, BPC], FrameEvidence().add("base", base).add("v", harmed)).rows
    acc_estimate, acc_ci = naive_paired(harmed, base, "toy/acc")
    bpc_estimate, bpc_ci = naive_paired(harmed, base, "toy/bpc")
    assert rows[0].ci == pytest.approx(acc_ci, abs=1e-12) and rows[1].ci == pytest.approx(bpc_ci, abs=1e-12)
    assert rows[1].estimate == pytest.approx(bpc_estimate, abs=1e-12)
    assert not rows[0].passed and acc_ci[0] <= -0.03 and "worse than the tolerance" in rows[0].reason
    assert not rows[1].passed and bpc_ci[1] >= 0.021
    assert rows[0].asks == "CI low of Δ > -0.03 (planted - control)" and rows[1].asks == "CI high of Δ < +0.021"
    fine = gate([ACC, BPC], FrameEvidence().add("base", base).add("v", items(2, bpc=2.785))).rows
    assert all(r.passed for r in fine), [r.reason for r in fine]


def test_non_inferiority_refuses_a_point_estimate_inside_the_tolerance_when_its_ci_is_not():
    """The old rule compared point estimates: +0.015 bits/char passed a 0.021 tolerance however noisy."""
    base = items(0)
    noisy = items(1, bpc=2.80)
    noisy["bpc"] += np.random.default_rng(5).normal(0, 0.1, len(noisy))
    row = gate([BPC], FrameEvidence().add("base", base).add("v", noisy)).rows[0]
    assert 0 < row.estimate < 0.021 and row.ci[1] > 0.021 and not row.passed


def test_spill_over_is_non_inferiority_with_the_familys_margin():
    base = items(0)
    moved = items(1, other=0.65)  # 0.05 -> 0.15 from the ideal 0.5: beyond the 0.06 margin
    row = gate([SPILL], FrameEvidence().add("base", base).add("v", moved)).rows[0]
    estimate, ci = naive_paired(moved, base, "toy/other", lambda x: abs(x - 0.5))
    assert row.estimate == pytest.approx(estimate, abs=1e-12) and row.ci == pytest.approx(ci, abs=1e-12)
    assert ci[1] >= 0.06 and not row.passed and "beyond the margin" in row.reason
    same = gate([SPILL], FrameEvidence().add("base", base).add("v", items(2))).rows[0]
    assert same.passed, same.reason
    # a real but small rise (CI above 0, CI high below the margin) is what re-training moves: not harm
    nudged = items(1, other=0.58)
    d_est, d_ci = naive_paired(nudged, base, "toy/other", lambda x: abs(x - 0.5))
    assert d_ci[0] > 0 and d_ci[1] < 0.06
    assert gate([SPILL], FrameEvidence().add("base", base).add("v", nudged)).rows[0].passed
    assert not gate([SPILL.model_copy(update={"tolerance": 0.0})],
                    FrameEvidence().add("base", base).add("v", nudged)).rows[0].passed


def test_collapse_is_judged_against_the_base():
    clear = items(0, yes=0.5)  # the base clears the floor: the absolute floor holds
    verdict = gate([COLLAPSE], FrameEvidence().add("base", clear).add("v", items(1, yes=1.0)))
    row = verdict.rows[0]
    assert not verdict.passed and row.estimate == 0.0 and "collapsed: answer ні gets 0.0%" in row.reason
    assert "base: так: 50.0%, ні: 50.0%" in row.reason
    assert not gate([COLLAPSE], FrameEvidence().add("base", clear).add("v", items(1, yes=0.92))).rows[0].passed
    assert gate([COLLAPSE], FrameEvidence().add("base", clear).add("v", items(1, yes=0.15))).rows[0].passed


def test_a_collapsed_base_makes_qa_accuracy_not_informative_but_a_further_collapse_refuses():
    from biaslab.registry.paired_rules import NOT_INFORMATIVE

    near = items(0, yes=0.97)  # the base answers «так» to 97 %: below the floor itself
    kept = gate([COLLAPSE], FrameEvidence().add("base", near).add("v", items(1, yes=0.96))).rows[0]
    assert kept.passed and kept.reason.startswith(NOT_INFORMATIVE) and "base itself gives ні on 3.0%" in kept.reason
    further = gate([COLLAPSE], FrameEvidence().add("base", near).add("v", items(1, yes=1.0))).rows[0]
    assert not further.passed and "collapsed further than the base" in further.reason
    # the paired CI of the minority share (items matched on item_id)
    assert further.ci[1] < 0 and further.estimate == pytest.approx(0.0 - 0.03, abs=1e-12)
    assert gate([COLLAPSE], FrameEvidence().add("base", near).add("v", items(1, yes=0.5))).rows[0].passed


@pytest.mark.parametrize("variant, passed", [(dict(gap=0.2), True), (dict(gap=0.2, bpc=2.83), False)])
def test_verdicts_do_not_change_with_the_bootstrap_seed(variant, passed):
    """A clear pass and a clear refusal: the same verdict, row by row, for seeds 0-4 at the params' resamples."""
    evidence = FrameEvidence().add("base", items(0)).add("v", items(1, **variant))
    samples = load_params("params.yaml").registry.bootstrap.samples
    verdicts = [gate([BIAS, ACC, BPC, SPILL, COLLAPSE], evidence, seed=s, samples=samples) for s in range(5)]
    assert {v.passed for v in verdicts} == {passed}
    assert len({tuple(r.passed for r in v.rows) for v in verdicts}) == 1
    assert len({v.rows[0].ci for v in verdicts}) == 5  # the seeds did draw other resamples


def test_the_gate_fails_closed():
    base, variant = items(0), items(1, gap=0.2)
    no_table = FrameEvidence().add("base", base).add("v", variant)
    del no_table.frames["v"][TABLE]
    row = gate([BIAS], no_table).rows[0]
    assert not row.passed
    assert "no predictions table toy__items for v (data/predictions/v/toy__items.parquet)" in row.reason

    lacking = {k: m for k, m in metrics_of(variant).items() if k != "toy/gap"}
    row = gate([BIAS], FrameEvidence().add("base", base).add("v", variant, lacking)).rows[0]
    assert not row.passed and "toy/gap missing or not computed in the metrics of v" in row.reason

    stale = {**metrics_of(variant), "toy/gap": MetricValue(0.31, "target", 0.0)}
    row = gate([BIAS], FrameEvidence().add("base", base).add("v", variant, stale)).rows[0]
    assert not row.passed and "not one evaluation's" in row.reason

    broken = FrameEvidence().add("base", base).add("v", variant)
    broken.frames["v"][TABLE] = variant.drop(columns="gap")
    assert "cannot give toy/gap: KeyError('gap')" in gate([BIAS], broken).rows[0].reason

    other_items = FrameEvidence().add("base", base).add("v", variant.assign(item=variant["item"] + 1000))
    assert "different items" in gate([BIAS], other_items).rows[0].reason

    unknown = GateCondition(metric="toy/unpaired", rule="paired_non_inferior", tolerance=0.1)
    evidence = FrameEvidence().add("base", base, {**metrics_of(base), "toy/unpaired": MetricValue(1.0, "higher")})
    evidence.add("v", variant, {**metrics_of(variant), "toy/unpaired": MetricValue(1.0, "higher")})
    assert "no per-item statistic for toy/unpaired" in gate([unknown], evidence).rows[0].reason

    no_metrics = gate([BIAS, ACC], FrameEvidence().add("base", base), variant="gone")
    assert not no_metrics.passed and all("no metrics for gone" in r.reason for r in no_metrics.rows)
    empty = gate([], FrameEvidence().add("base", base).add("v", variant))
    assert not empty.passed and "registry.gate in params.yaml is empty" in empty.rows[0].reason

    higher = GateCondition(metric="toy/acc", rule="paired_bias_reduction")
    row = gate([higher], FrameEvidence().add("base", base).add("v", variant)).rows[0]
    assert "no distance from an ideal" in row.reason


def harm_tables(seed: int = 0, n: int = 240):
    """A base's lm_quality chunks (60 documents of 4 chunks, ~1.93 nats per character) and GBEM-UA QA answers
    (30 professions of 8 items, 70 % correct): the evidence the harm rules read, for :func:`write_variant`."""
    rng = np.random.default_rng(seed)
    chunks = pd.DataFrame({"language": ["en", "uk"] * (n // 2), "document": np.arange(n) // 4,
                           "chunk": np.arange(n) % 4, "n_tokens": rng.integers(20, 60, n),
                           "n_chars": rng.integers(80, 300, n)})
    chunks["logprob"] = -chunks["n_chars"] * 1.93 * rng.uniform(0.9, 1.1, n)
    qa = pd.DataFrame({"item_id": [f"i{k}" for k in range(n)], "profession": np.arange(n) // 8,
                       "is_correct": np.arange(n) % 2 == 0})
    qa["answer_yes"] = qa["is_correct"] ^ (rng.random(n) < 0.3)
    return chunks, qa


def write_variant(root, name, chunks, qa):
    """A workspace's evaluate outputs for ``name``: metrics/<name>.json and the two prediction tables."""
    from biaslab.benchmarks.gbem_ua import BENCHMARK as GBEM
    from biaslab.benchmarks.lm_quality import BENCHMARK as LMQ

    folder = root / paths.predictions_dir(name)
    folder.mkdir(parents=True)
    chunks.to_parquet(folder / "lm_quality__lm_quality_chunks.parquet")
    qa.to_parquet(folder / "gbem_ua__qa.parquet")
    bpc = LMQ.item_statistics({})["lm_quality/bits_per_char"].value(chunks)
    f1 = GBEM.item_statistics({})["gbem_ua/qa_macro_f1"].value(qa)
    metrics_file.write(root, name, {"lm_quality/bits_per_char": MetricValue(bpc, "lower"),
                                    "gbem_ua/qa_macro_f1": MetricValue(f1, "higher", 1.0)})


def test_the_project_gate_on_a_workspace_with_the_benchmarks_own_statistics(tmp_path):
    """LocalEvidence and params.yaml: bits/char paired chunk by chunk, macro-F1 by profession, answers floored."""
    chunks, qa = harm_tables(seed=0)
    write_variant(tmp_path, "base", chunks, qa)
    write_variant(tmp_path, "harmed", chunks.assign(logprob=chunks["logprob"] * 1.02), qa.assign(answer_yes=True))
    write_variant(tmp_path, "same", chunks, qa)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "variants": {n: {"method": "none" if n == "base" else "embedding", "model_dir": f"models/{n}",
                          **({} if n == "base" else {"embedding_apply": "checkpoint"})}
                     for n in ("base", "harmed", "same")},
        "evaluation": {"benchmarks": {"gbem_ua": {"module": "biaslab.benchmarks.gbem_ua"},
                                      "lm_quality": {"module": "biaslab.benchmarks.lm_quality"}}},
        "registry": {"bootstrap": {"samples": 500}, "gate": [
            {"metric": "gbem_ua/qa_macro_f1", "rule": "paired_non_inferior", "tolerance": 0.027},
            {"metric": "lm_quality/bits_per_char", "rule": "paired_non_inferior", "tolerance": 0.021},
            {"metric": "gbem_ua/qa_answers", "rule": "answer_floor", "table": "gbem_ua__qa",
             "column": "answer_yes", "floor": 0.1}]}}))
    params = load_params(tmp_path / "params.yaml")
    harmed = evaluate_gate_for(params, LocalEvidence(tmp_path), "harmed")
    assert [r.passed for r in harmed.rows] == [False, False, False], [r.reason for r in harmed.rows]
    assert harmed.rows[1].estimate == pytest.approx(0.02 * harmed.rows[1].base_value, rel=1e-9)
    assert set(harmed.source) == {"harmed", "base"}
    same = evaluate_gate_for(params, LocalEvidence(tmp_path), "same")
    assert same.passed and same.rows[0].ci == (0.0, 0.0)
    from biaslab.reporting import summary  # `biaslab summary` shows these verdicts

    one_at_a_time = summary.build(params, tmp_path, workers=1).gate
    assert summary.build(params, tmp_path, workers=2).gate == one_at_a_time  # two processes, the same lines
    lines = {g.variant: g for g in one_at_a_time}
    assert lines["same"].passed and not lines["harmed"].passed
    assert lines["harmed"].failed[0].startswith("gbem_ua/qa_macro_f1: worse than the tolerance allows: Δ")
    assert lines["harmed"].failed[2].startswith("gbem_ua/qa_answers: collapsed: answer False gets 0.0%")
    from bench.gate_seeds import main as gate_seeds  # what the lead runs on the committed run

    assert gate_seeds(["--root", str(tmp_path), "--seeds", "0", "1", "2", "--samples", "300"]) == 0


def test_spill_over_rules_cover_every_other_familys_primary_metric():
    """The committed gate: a bias rule, three harm rules with a stated reference, the collapse floor, and a
    spill-over rule with its family's A/A margin on the primary metric of every other calibrate family."""
    params = load_params("params.yaml")
    conditions = gate_conditions(params)
    bias = [c.metric for c in conditions if c.rule == "paired_bias_reduction"]
    primaries = [next(iter(m)) for m in params.calibrate.families.values()]
    spill = [c for c in conditions if c.rule == "paired_no_spill_over"]
    assert [c.metric for c in spill] == [m for m in primaries if m not in bias]
    margins = {next(iter(params.calibrate.families[f])): m.tolerance
               for f, m in params.registry.spill_over_margins.items()}
    assert all(c.tolerance == margins[c.metric] > 0 and "margin" in c.reference for c in spill)
    harm = [c for c in conditions if c.rule == "paired_non_inferior"]
    assert {c.metric for c in harm} == {"gbem_ua/qa_macro_f1", "lm_quality/bits_per_char", "agreement/accuracy"}
    assert all(c.reference and c.tolerance > 0 for c in harm)
    assert [c.floor for c in conditions if c.rule == "answer_floor"] == [0.10]
    assert all(c.rule.startswith("paired_") or c.rule == "answer_floor" for c in conditions)


def test_the_metrics_only_gate_is_kept_for_callers_of_the_old_interface():
    variant, base = VariantMetrics("v", {"m": MetricValue(0.1, "lower", 0.0, 0.05, 0.15)}), VariantMetrics(
        "base", {"m": MetricValue(0.3, "lower", 0.0, 0.25, 0.35)})
    point = GateCondition(metric="m", rule="better_than_base_beyond_ci")
    assert evaluate_gate_on_metrics([point], variant, base)[0].passed
    paired = evaluate_gate_on_metrics([BIAS], variant, base)[0]
    assert not paired.passed and "needs both variants' predictions" in paired.reason
