"""``promote`` re-scores a seeded sample of the evidence's prediction rows from the verified files
(:mod:`biaslab.registry.rescore`): an honest evaluation passes, a table edited after the evaluation is refused
naming the table, and the check really scores (a shifted scorer is refused); forged votes beside honest scores
pass the sample and are refused by the derived-column check (:mod:`biaslab.registry.derived`).

A temporary SQLite MLflow store; the tiny Llama of ``tests/conftest.py`` as ``base`` and an edited copy as
``soft``; each evaluated with the real agreement benchmark (English test pairs) through biaslab's own loader and
scorer, its table logged as the evaluate run's ``predictions/agreement__pairs.json`` - what the gate reads.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from biaslab.config import Params
from biaslab.metrics.values import MetricValue
from biaslab.outputs import metrics_file, variant_dir
from biaslab.tracking import runs as tracking

os.environ.setdefault("OMP_NUM_THREADS", "1")
TABLE = "agreement__pairs"


def _params(root: Path) -> Params:
    return Params.model_validate({
        "variants": {"base": {"method": "none", "model_dir": "models/base"},
                     "soft": {"method": "embedding", "model_dir": "models/soft", "embedding_mode": "soft",
                              "embedding_apply": "checkpoint"}},
        "registry": {"model_name": "rescore-model", "champion_model": "rescore-champion",
                     "promotions_experiment": "rescore-promotions",
                     "gate": [{"metric": "gbem_ua/qa_diff_fem", "rule": "better_than_base_beyond_ci"}]},
        "evaluation": {"benchmarks": {"agreement": {"module": "biaslab.benchmarks.agreement",
                                                    "options": {"languages": ["en"]}}}},
        "tracking": {"tracking_uri": f"sqlite:///{root / 'mlflow.db'}", "artifact_location": str(root / "artifacts"),
                     "experiment": "test"},
    })


def _evaluate(root: Path, params: Params, variant: str, qa_diff: tuple[float, float, float]) -> None:
    """The evaluate stage in small: the agreement table scored by the variant's own scorer, logged with metrics."""
    from biaslab.benchmarks.agreement.benchmark import BENCHMARK
    from biaslab.benchmarks.base import EvalContext
    from biaslab.models.load import load_variant_model, make_scorer

    model_dir = root / params.variant(variant).model_dir
    scorer = make_scorer(load_variant_model(model_dir), params.scoring)
    result = BENCHMARK.run(scorer, root, {"languages": ["en"]}, EvalContext(bootstrap_samples=50, progress=False))
    values = {"gbem_ua/qa_diff_fem": MetricValue(qa_diff[0], "lower", ideal=0.0, ci_low=qa_diff[1],
                                                 ci_high=qa_diff[2], n=100)}
    fingerprint = variant_dir.fingerprint_dir(model_dir)
    with tracking.stage_run("evaluate", variant=variant, tags={"model_fingerprint": fingerprint}) as run:
        tracking.log_metric_values(values)
        tracking.log_table(result.predictions["pairs"], f"predictions/{TABLE}.json")
    metrics_file.write(root, variant, values, model_fingerprint=fingerprint, model_dir=str(model_dir.relative_to(root)),
                       run_id=run.info.run_id)


@pytest.fixture(scope="module")
def project(tmp_path_factory, tiny_tokenizer, tiny_causal_model):
    """base and soft evaluated honestly and registered (the artifacts layout) in a fresh SQLite store."""
    import mlflow
    import torch

    from biaslab.registry import register_variants, write_register_json

    root = tmp_path_factory.mktemp("rescore")
    params = _params(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        tracking.configure(params.tracking, root=root)
        model = tiny_causal_model
        model.save_pretrained(root / "models" / "base")
        tiny_tokenizer.save_pretrained(root / "models" / "base")
        state = {k: v.clone() for k, v in model.state_dict().items()}
        with torch.no_grad():
            model.get_input_embeddings().weight[3] += 0.5
            model.save_pretrained(root / "models" / "soft")
            model.load_state_dict(state)
        tiny_tokenizer.save_pretrained(root / "models" / "soft")
        _evaluate(root, params, "base", (0.20, 0.18, 0.22))
        _evaluate(root, params, "soft", (0.10, 0.08, 0.12))  # clearly better: the gate approves
        result = register_variants(params, root, log=tracking, flavor="artifacts", variants=["base", "soft"])
        write_register_json(result, params.registry.model_name, root / "runs" / "register.json")
        yield root, params
    mlflow.set_tracking_uri(None)


def _rescored(decision):
    return next(r for r in decision.results if r.rule.startswith("rescored_sample"))


def test_an_honest_evaluation_passes_the_rescoring(project):
    from biaslab.registry import promote

    root, params = project
    decision = promote(params, "soft", root)
    row = _rescored(decision)
    assert decision.approved, decision.reasons
    assert row.rule == "rescored_sample" and row.passed and row.reason.startswith("64 rows recomputed")
    assert row.estimate is not None and row.estimate <= 1e-4  # batched vs one-by-one float32: tiny noise only
    derived = next(r for r in decision.results if r.rule == "derived_columns")
    assert derived.passed and f"{TABLE})" in derived.reason and "every row" in derived.reason


def test_a_table_edited_after_the_evaluation_is_refused_naming_it(project, monkeypatch):
    """Every stored log-probability of soft's table 0.5 nats higher (as a leaked evaluator credential could log
    it, with matching params): the sample covers an edited row whatever the seed draws."""
    from biaslab.registry import promote
    from biaslab.registry.evidence import RunEvidence

    root, params = project
    honest = RunEvidence.predictions

    def forged(self, variant):
        tables = honest(self, variant)
        if variant == "soft":
            tables[TABLE] = tables[TABLE].assign(logprob_grammatical=tables[TABLE]["logprob_grammatical"] + 0.5)
        return tables

    monkeypatch.setattr(RunEvidence, "predictions", forged)
    decision = promote(params, "soft", root)
    row = _rescored(decision)
    assert not decision.approved and decision.champion_version is None
    assert not row.passed and f"'soft' table {TABLE} row" in row.reason and "logprob_grammatical" in row.reason
    assert "|Δ| 0.5" in row.reason


def test_forged_votes_beside_honest_scores_pass_the_sample_and_are_refused_by_the_derived_check(project, monkeypatch):
    """A leaked evaluator credential logs soft's table with its honest log-probabilities and every pair marked
    ``correct`` (the column the agreement accuracy counts): the re-scored sample agrees - the scores are the
    model's - and the derived-column check, which recomputes ``correct`` from them on every row, refuses."""
    from biaslab.registry import promote
    from biaslab.registry.evidence import RunEvidence

    root, params = project
    honest = RunEvidence.predictions

    def forged(self, variant):
        tables = honest(self, variant)
        if variant == "soft":
            tables[TABLE] = tables[TABLE].assign(correct=1)
        return tables

    monkeypatch.setattr(RunEvidence, "predictions", forged)
    decision = promote(params, "soft", root)
    derived = next(r for r in decision.results if r.rule == "derived_columns")
    assert _rescored(decision).passed  # the sample checks scores, and the scores are honest
    assert not decision.approved and decision.champion_version is None
    assert not derived.passed and f"'soft' table {TABLE} row" in derived.reason and "column correct" in derived.reason


def test_the_check_really_scores(project, monkeypatch):
    """A scorer whose log-probs are shifted by 0.01 nats (beyond the tolerance) is refused: the rows are
    scored again, not compared with themselves."""
    from biaslab.registry import promote
    from biaslab.scoring.causal import CausalScorer

    root, params = project
    honest = CausalScorer.pair_scores

    def shifted(self, *args, **kwargs):
        from dataclasses import replace

        return [replace(s, first=replace(s.first, logprob=s.first.logprob + 0.01)) for s in honest(self, *args, **kwargs)]

    monkeypatch.setattr(CausalScorer, "pair_scores", shifted)
    row = _rescored(promote(params, "soft", root))
    assert not row.passed and "recomputed from the verified files" in row.reason


def test_the_rescoring_can_be_skipped_only_explicitly(project):
    from biaslab.registry import promote

    root, params = project
    row = _rescored(promote(params, "soft", root, rescore=False))
    assert row.rule == "rescored_sample (skipped)" and "--no-rescore" in row.reason
    assert json.dumps(row.reason)
