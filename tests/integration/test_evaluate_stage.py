"""The evaluate stage end to end on a tiny model and a slice of the real prepared data.

Checks the contract every variant relies on: all configured benchmarks run through one code path,
metrics carry direction/ideal, the MLflow run holds metrics + tags + per-item tables, the same inputs
give bit-identical metrics, and a model that returns NaN leaves no metrics file and a FAILED run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from biaslab.config import Params, load_params

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _slice_prepared(full: Path, out: Path) -> None:
    """A few items of every table, so a tiny model evaluates every benchmark in seconds (the split folders
    train/, select/, test/ sliced alike)."""
    out.mkdir(parents=True)
    for path in full.iterdir():
        if path.is_dir():
            _slice_prepared(path, out / path.name)
            continue
        if path.suffix != ".parquet":
            shutil.copy(path, out / path.name)
            continue
        frame = pd.read_parquet(path)
        if path.stem == "gbem_ua":
            keep = sorted(frame.loc[frame["split"] == "eval", "profession"].unique())[:3]
            keep += sorted(frame.loc[frame["split"] != "eval", "profession"].unique())[:2]
            frame = frame[frame["profession"].isin(keep)]
        elif path.stem == "occugender_jobs":
            frame = frame.groupby("group").head(2)
        elif path.stem == "genderlex":
            frame = frame.groupby(["subject", "context_type"]).head(6)
        elif path.stem == "rubia":
            frame = frame.groupby("subdomain").head(2)
        elif path.stem == "gender_pairs":
            pass
        else:
            frame = frame.head(12)
        frame.to_parquet(out / path.name, index=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory, mirror, tiny_tokenizer, tiny_causal_model):
    from biaslab.data.prepare import prepare

    root = tmp_path_factory.mktemp("project")
    raw = load_params(ROOT / "params.yaml").model_dump()
    raw["data"]["mirror_dir"] = str(mirror)
    raw["data"]["prepared_dir"] = str(root / "full")
    prepare(Params.model_validate(raw))
    _slice_prepared(root / "full", root / "data" / "prepared")
    raw["data"]["prepared_dir"] = "data/prepared"
    raw["evaluation"]["bootstrap_samples"] = 20
    raw["tracking"]["tracking_uri"] = "sqlite:///mlruns/mlflow.db"
    raw["variants"] = {k: v for k, v in raw["variants"].items() if k in {"base", "prompt"}}
    tiny_causal_model.save_pretrained(root / "models" / "base")
    tiny_tokenizer.save_pretrained(root / "models" / "base")
    return root, Params.model_validate(raw)


def _mlflow_runs(root: Path, variant: str):
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("biaslab")
    runs = client.search_runs([experiment.experiment_id], filter_string=f"tags.variant = '{variant}'")
    return client, runs


def test_every_benchmark_runs_and_is_tracked(project, monkeypatch):
    from pipelines.evaluate import evaluate_variant

    root, params = project
    monkeypatch.chdir(root)
    metrics = evaluate_variant(params, "base", root)
    benchmarks = {name.split("/")[0] for name in metrics}
    assert benchmarks == set(params.evaluation.benchmarks)
    payload = json.loads((root / "metrics" / "base.json").read_text())
    assert payload["variant"] == "base" and payload["model_fingerprint"]
    assert all(m["direction"] in {"higher", "lower", "target"} for m in payload["metrics"].values())
    # what `dvc metrics show/diff` reads: one number per metric, equal to the detailed records
    values = json.loads((root / "metrics" / "values" / "base.json").read_text())
    assert values == {name: record["value"] for name, record in payload["metrics"].items()}
    assert (root / "runs" / "evaluate_base.json").is_file()
    assert any((root / "data" / "predictions" / "base").iterdir())

    client, runs = _mlflow_runs(root, "base")
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.tags["model_fingerprint"] == payload["model_fingerprint"]
    logged = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"predictions", "summary.md", "metrics.json"} <= logged
    # every metric's record is one artifact (direction, ideal, CI, description), not a tag per metric
    records = json.loads(Path(client.download_artifacts(run.info.run_id, "metrics.json")).read_text())
    for name, record in payload["metrics"].items():
        logged_record = records[name]
        assert logged_record["direction"] == record["direction"] and logged_record["ideal"] == record.get("ideal")
        if record["value"] is not None and record["value"] == record["value"]:
            assert logged_record["value"] == record["value"], name
    assert not any(k.startswith(("direction.", "ideal.", "description.")) for k in run.data.tags)
    # the run's Description (Overview page): every headline metric with its value, e.g. GBEM-UA's QA gap
    from biaslab.reporting.headlines import headline_metrics

    note = run.data.tags["mlflow.note.content"]
    assert note.startswith("Headline metrics of **base**")
    for benchmark, names in headline_metrics(params.evaluation.benchmarks).items():
        for name in names:
            if name in metrics and metrics[name].value == metrics[name].value:  # computed (not NaN)
                assert f"| {benchmark} | {name.split('/', 1)[1]} " in note, name
    # data lineage: each prepared file the benchmarks read is a dataset input with DVC's digest, context eval
    from biaslab.tracking import datasets as lineage

    inputs = {i.dataset.name: i for i in client.get_run(run.info.run_id).inputs.dataset_inputs}
    prepared = root / params.data.prepared_dir
    assert {"gbem_ua", "occugender_jobs", "crows_pairs", "rubia", "genderlex"} <= set(inputs)
    for name, logged_input in inputs.items():
        file = next(prepared.glob(f"test/{name}.*"), None) or next(prepared.glob(f"{name}.*"))  # split: test items
        assert logged_input.dataset.digest == lineage.dvc_digest(file)
        assert {t.key: t.value for t in logged_input.tags}["mlflow.data.context"] == "eval"
    # the evidence is bound by params (nobody can change them): the model, the items, each artifact's sha256
    import hashlib

    from biaslab.tracking import evidence as bound

    logged_params = client.get_run(run.info.run_id).data.params
    assert logged_params[bound.VARIANT] == "base"
    assert logged_params[bound.FINGERPRINT] == payload["model_fingerprint"]
    pairs = sorted((i.dataset.name, i.dataset.digest) for i in inputs.values())
    assert logged_params[bound.ITEMS] == hashlib.sha256(json.dumps(pairs).encode()).hexdigest()
    hashed = {k[len(bound.SHA):]: v for k, v in logged_params.items() if k.startswith(bound.SHA)}
    tables = {f"predictions/{a.path.split('/')[-1]}" for a in client.list_artifacts(run.info.run_id, "predictions")}
    assert set(hashed) == {"metrics.json", *tables} and logged_params[bound.COUNT] == str(len(hashed))
    for path, sha in hashed.items():
        local = Path(client.download_artifacts(run.info.run_id, path))
        assert hashlib.sha256(local.read_bytes()).hexdigest() == sha, path


def test_same_inputs_give_bit_identical_metrics(project, monkeypatch):
    from pipelines.evaluate import evaluate_variant

    root, params = project
    monkeypatch.chdir(root)
    first = evaluate_variant(params, "base", root)
    second = evaluate_variant(params, "base", root)
    assert {k: v.value for k, v in first.items()} == {k: v.value for k, v in second.items()}


def test_prompt_variant_uses_the_same_code_path_with_its_prefix(project, monkeypatch):
    from pipelines.evaluate import evaluate_variant

    root, params = project
    monkeypatch.chdir(root)
    base = evaluate_variant(params, "base", root)
    prompt = evaluate_variant(params, "prompt", root)
    assert set(base) == set(prompt)
    qa = [p for p in (root / "data" / "predictions").glob("*/gbem_ua__*.parquet")]
    assert len(qa) >= 2


def test_nan_logprobs_fail_and_leave_nothing(project, monkeypatch, tiny_tokenizer):
    import torch

    from biaslab.errors import EvaluationError
    from biaslab.pretrain.architecture import build_llama
    from pipelines.evaluate import evaluate_variant

    root, params = project
    monkeypatch.chdir(root)
    broken = build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64)
    with torch.no_grad():
        broken.lm_head.weight.fill_(float("nan"))
    broken.save_pretrained(root / "models" / "broken")
    tiny_tokenizer.save_pretrained(root / "models" / "broken")
    raw = params.model_dump()
    raw["variants"]["broken"] = {"method": "none", "model_dir": "models/broken"}
    with pytest.raises(EvaluationError, match="NaN/inf"):
        evaluate_variant(Params.model_validate(raw), "broken", root)
    assert not (root / "metrics" / "broken.json").exists()
    assert not (root / "metrics" / "values" / "broken.json").exists()
    _, runs = _mlflow_runs(root, "broken")
    assert runs and all(r.info.status == "FAILED" for r in runs)


def test_killed_evaluation_leaves_no_metrics_file(project):
    """SIGKILL mid-run: no metrics file appears, and the run is never marked FINISHED.

    "Mid-run" is made deterministic, not timed: a last benchmark (tests/integration/helpers/
    blocking_benchmark.py) signals once the real benchmarks have produced their metrics, then blocks.
    """
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    root, params = project
    raw = params.model_dump(mode="json")
    raw["variants"]["slow"] = {"method": "none", "model_dir": "models/base"}
    raw["evaluation"]["benchmarks"]["blocking"] = {"module": "blocking_benchmark", "options": {}}
    (root / "params_kill.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    marker = root / "blocked"
    helpers = str(Path(__file__).parent / "helpers")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "BIASLAB_TEST_BLOCK_MARKER": str(marker), "PYTHONFAULTHANDLER": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (helpers, os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipelines.evaluate", "--variant", "slow",
         "--params", "params_kill.yaml"], cwd=root, env=env,
    )
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not marker.exists():
        time.sleep(0.2)
    assert marker.exists() and proc.poll() is None, f"evaluation never reached the blocking benchmark ({proc.poll()})"
    _, runs = _mlflow_runs(root, "slow")
    assert [r.info.status for r in runs] == ["RUNNING"]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not (root / "metrics" / "slow.json").exists()
    assert not (root / "metrics" / "values" / "slow.json").exists()
    assert not (root / "runs" / "evaluate_slow.json").exists()
    _, runs = _mlflow_runs(root, "slow")
    assert all(r.info.status != "FINISHED" for r in runs)


def test_a_masked_lm_variant_evaluates_end_to_end(project, monkeypatch):
    """BERT-style models work through the same stage: generative benchmarks are skipped with a reason."""
    from tiny_models import build_tiny_bert
    from transformers import BertConfig, BertForMaskedLM

    from pipelines.evaluate import evaluate_variant

    root, params = project
    monkeypatch.chdir(root)
    _, tokenizer = build_tiny_bert()
    model = BertForMaskedLM(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=4, intermediate_size=64, max_position_embeddings=512))
    model.save_pretrained(root / "models" / "bert")
    tokenizer.save_pretrained(root / "models" / "bert")
    raw = params.model_dump()
    raw["variants"]["bert"] = {"method": "none", "model_dir": "models/bert"}
    with pytest.warns(UserWarning):
        metrics = evaluate_variant(Params.model_validate(raw), "bert", root)
    benchmarks = {name.split("/")[0] for name in metrics}
    assert {"rubia", "crows_pairs", "cloze_gender"} <= benchmarks
    assert not benchmarks & {"gbem_ua", "occugender"}  # skipped, with the reason in the tables
    skipped = {p.name for p in (root / "reports" / "tables" / "bert").iterdir()}
    assert {"gbem_ua__gbem_ua_skipped.csv", "occugender__occugender_skipped.csv"} <= skipped


def _default_sigint() -> None:
    """In the child: SIGINT and SIGTERM at their defaults and unblocked, as in a terminal. A process of the
    suite may start children with them ignored (a suite run in the background inherits SIGINT ignored) or
    blocked (a library that masks them in the worker while it spawns): the stage would never see them, and
    this test is about what the stage does when they arrive."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _start_blocked(root: Path, variant: str, params_file: str):
    """``python -m pipelines.evaluate`` started and waited for until it blocks inside its MLflow run."""
    import os
    import subprocess
    import sys
    import time

    marker = root / f"blocked-{time.monotonic_ns()}"
    helpers = str(Path(__file__).parent / "helpers")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "BIASLAB_TEST_BLOCK_MARKER": str(marker), "PYTHONFAULTHANDLER": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (helpers, os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.evaluate", "--variant", variant,
                             "--params", params_file], cwd=root, env=env, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None and not marker.exists():
        time.sleep(0.2)
    assert marker.exists() and proc.poll() is None, f"never reached the blocking benchmark: {proc.poll()}"
    return proc


def _communicate_or_dump(proc, timeout: float):
    """``proc.communicate``; a stage still alive after ``timeout`` gets SIGABRT, so the fault handler
    (``PYTHONFAULTHANDLER``) prints every thread's stack, and the test fails showing where it hung."""
    import signal
    import subprocess

    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=60)
        raise AssertionError(f"the stage did not end within {timeout} s of the signal; its threads:\n{err[-6000:]}")


def test_signals_end_the_run_killed_and_a_sigkilled_run_is_marked_killed_at_the_next_start(project):
    """SIGTERM and SIGINT: exit 128+signal, one line, run KILLED. SIGKILL: the run stays RUNNING until the
    same stage/variant starts again, which marks it KILLED (issue 37, crash hygiene)."""
    import signal

    import yaml

    from biaslab.tracking.run_status import KILLED_TAG

    root, params = project
    raw = params.model_dump(mode="json")
    raw["variants"]["stopped"] = {"method": "none", "model_dir": "models/base"}
    raw["evaluation"]["benchmarks"] = {"blocking": {"module": "blocking_benchmark", "options": {}}}
    (root / "params_signals.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")

    for signum in (signal.SIGTERM, signal.SIGINT):
        proc = _start_blocked(root, "stopped", "params_signals.yaml")
        proc.send_signal(signum)
        _, err = _communicate_or_dump(proc, timeout=120)
        assert proc.returncode == 128 + signum, err[-2000:]
        assert f"evaluate@stopped killed: {signal.Signals(signum).name}" in err
        _, runs = _mlflow_runs(root, "stopped")
        assert runs[0].info.status == "KILLED"

    proc = _start_blocked(root, "stopped", "params_signals.yaml")
    sigkilled = _mlflow_runs(root, "stopped")[1][0]
    assert sigkilled.info.status == "RUNNING"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert _mlflow_runs(root, "stopped")[0].get_run(sigkilled.info.run_id).info.status == "RUNNING"

    other = _start_blocked(root, "base", "params_signals.yaml")  # another variant's start leaves it alone
    client, _ = _mlflow_runs(root, "stopped")
    assert client.get_run(sigkilled.info.run_id).info.status == "RUNNING"
    again = _start_blocked(root, "stopped", "params_signals.yaml")  # the same stage/variant marks it
    after = client.get_run(sigkilled.info.run_id)
    assert after.info.status == "KILLED" and "SIGKILL" in after.data.tags[KILLED_TAG]
    assert client.get_run(_mlflow_runs(root, "base")[1][0].info.run_id).info.status == "RUNNING"  # alive
    for p in (other, again):
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    statuses = [r.info.status for r in _mlflow_runs(root, "stopped")[1]]
    assert statuses == ["KILLED"] * 4
