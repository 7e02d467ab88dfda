"""The MLflow UI as a user sees it: headless Chromium renders the runs table, a registry version page and
the run comparison page of a small run store built here, served by ``mlflow server`` on loopback.

MLflow's UI is a React single-page app: ``chromium --headless --dump-dom --virtual-time-budget`` lets it
fetch its data and render before the DOM is printed; each page is retried a few times because the
first requests of a cold server can be slow. Skipped (with the reason) when no Chromium is installed
(Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml
from tracking_server import stop

pytestmark = pytest.mark.slow

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
if CHROMIUM is None:
    pytest.skip("no Chromium found (apt-get install chromium)", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metric(value, lo, hi, direction="lower", ideal=0.0):
    return {"value": value, "direction": direction, "ideal": ideal, "ci_low": lo, "ci_high": hi, "n": 40}


METRICS = {
    "base": {"gbem_ua/qa_diff_fem": metric(0.2113, 0.18, 0.24),
             "gbem_ua/qa_f1_man_nofem": metric(0.7021, 0.65, 0.75, "higher", 1.0)},
    "lora": {"gbem_ua/qa_diff_fem": metric(0.0517, 0.03, 0.07),
             "gbem_ua/qa_f1_man_nofem": metric(0.6944, 0.64, 0.74, "higher", 1.0)},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Two evaluate runs, both variants registered (the project's own code), in a SQLite store."""
    import mlflow

    from biaslab import registry
    from biaslab.tracking import runs as tracking
    from biaslab.config import load_params

    root = tmp_path_factory.mktemp("ui")
    for name in METRICS:
        model = root / "models" / name
        model.mkdir(parents=True)
        (model / "config.json").write_text(json.dumps({"model_type": "llama", "name": name}))
        (model / "model.safetensors").write_bytes(name.encode() * 100)
    (root / "params.yaml").write_text(yaml.safe_dump({
        "variants": {"base": {"method": "none", "model_dir": "models/base"},
                     "lora": {"method": "embedding", "model_dir": "models/lora",
                              "embedding_apply": "checkpoint"}},
        "registry": {"model_name": "ui-model", "gate": [
            {"metric": "gbem_ua/qa_diff_fem", "rule": "better_than_base_beyond_ci"},
            {"metric": "gbem_ua/qa_f1_man_nofem", "rule": "not_worse_than_base_minus", "tolerance": 0.05}]},
        "tracking": {"tracking_uri": "sqlite:///mlruns/mlflow.db", "artifact_location": "mlruns/artifacts",
                     "experiment": "biaslab"},
    }))
    params = load_params(root / "params.yaml")
    run_ids = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        experiment_id = tracking.configure(params.tracking, root=root)
        from biaslab.metrics.values import MetricValue

        for name, records in METRICS.items():
            with tracking.stage_run("evaluate", variant=name) as run:
                tracking.log_metric_values({k: MetricValue(**v) for k, v in records.items()})
                run_ids[name] = run.info.run_id
            (root / "metrics").mkdir(exist_ok=True)
            (root / "metrics" / f"{name}.json").write_text(json.dumps(
                {"variant": name, "model_dir": f"models/{name}", "run_id": run.info.run_id, "metrics": records}))
        result = registry.register_variants(params, root, log=tracking, flavor="artifacts")
    mlflow.set_tracking_uri(None)
    return {"root": root, "experiment_id": experiment_id, "run_ids": run_ids,
            "version": result["lora"].version, "model_name": "ui-model"}


@pytest.fixture(scope="module")
def server(store):
    port = _free_port()
    db = store["root"] / "mlruns" / "mlflow.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{db}", "--host", "127.0.0.1",
         "--port", str(port), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, "MLFLOW_TRACKING_URI": ""},
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    try:
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None:
                pytest.fail(f"mlflow server exited: {proc.stderr.read()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail("mlflow server did not answer /health within 240 s")
            time.sleep(1)
        yield url
    finally:
        stop(proc)


def dom(url: str, expected: list[str], tmp_path: Path, attempts: int = 3) -> str:
    """The rendered DOM of ``url``; re-rendered (longer budget) until every ``expected`` text is in it."""
    text = ""
    for attempt in range(attempts):
        profile = tmp_path / f"profile-{attempt}"
        result = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--user-data-dir={profile}", "--window-size=1400,900",
             f"--virtual-time-budget={20000 * (attempt + 1)}", "--dump-dom", url],
            capture_output=True, text=True, timeout=300,
        )
        text = result.stdout
        if all(e in text for e in expected):
            return text
    missing = [e for e in expected if e not in text]
    raise AssertionError(f"{url}: {missing} not rendered after {attempts} attempts; DOM tail: {text[-1500:]}")


def test_runs_table_opens_in_the_model_training_view(store, server, tmp_path):
    from biaslab.tracking import runs as tracking

    url = tracking.ui_url(server, store["experiment_id"])
    page = dom(url, ["evaluate@base", "evaluate@lora"], tmp_path)
    assert "Run Name" in page and "Detect Issues" not in page  # the runs table, not the GenAI overview


def test_model_version_page_shows_what_a_reviewer_reads(store, server, tmp_path):
    name, version = store["model_name"], store["version"]
    url = f"{server}/#/models/{name}/versions/{version}"
    page = dom(url, [f"Version {version}", "variant", "lora"], tmp_path)
    assert "gbem_ua/qa_diff_fem" in page


def test_comparison_page_shows_both_runs_and_their_metrics(store, server, tmp_path):
    runs = json.dumps([store["run_ids"]["base"], store["run_ids"]["lora"]])
    url = (f"{server}/#/compare-runs?runs={urllib.parse.quote(runs)}"
           f"&experiments={urllib.parse.quote(json.dumps([store['experiment_id']]))}")
    dom(url, ["evaluate@base", "evaluate@lora", "gbem_ua/qa_diff_fem", "0.2113", "0.0517"], tmp_path)
