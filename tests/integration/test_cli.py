"""The ``biaslab`` command through typer's CliRunner: help, listing, metrics, and promote (refused/approved)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from biaslab.tracking import runs as tracking
from biaslab.cli.main import app
from biaslab.cli.options import EXIT_ERROR, EXIT_REFUSED
from biaslab.metrics.values import MetricValue
from biaslab.outputs import metrics_file

runner = CliRunner()


def metric(value, lo, hi, direction="lower", ideal=0.0):
    return MetricValue(value, direction, ideal=ideal, ci_low=lo, ci_high=hi, n=40)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """Three variants (fake full-model dirs: the artifacts flavour only copies files), registered once."""
    import mlflow

    from biaslab import registry
    from biaslab.tracking import runs as tracking
    from biaslab.config import load_params

    from biaslab.outputs.variant_dir import fingerprint_dir

    root = tmp_path_factory.mktemp("cli")
    (root / "params.yaml").write_text(yaml.safe_dump({
        "variants": {n: {"method": "none" if n == "base" else "embedding", "model_dir": f"models/{n}",
                          **({} if n == "base" else {"embedding_apply": "checkpoint"})}
                     for n in ("base", "worse", "good")},
        "registry": {"model_name": "cli-model", "gate": [
            {"metric": "gbem_ua/qa_diff_fem", "rule": "better_than_base_beyond_ci"},
            {"metric": "gbem_ua/qa_f1_man_nofem", "rule": "not_worse_than_base_minus", "tolerance": 0.05},
        ]},
        "tracking": {"tracking_uri": "sqlite:///mlruns/mlflow.db", "artifact_location": "mlruns/artifacts",
                     "experiment": "cli"},
    }))
    params = load_params(root / "params.yaml")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        tracking.configure(params.tracking, root=root)
        for name, qa_diff in {"base": (0.20, 0.18, 0.22), "worse": (0.19, 0.17, 0.21),
                              "good": (0.05, 0.03, 0.07)}.items():
            model = root / "models" / name
            model.mkdir(parents=True)
            (model / "config.json").write_text(json.dumps({"model_type": "llama", "name": name}))
            (model / "model.safetensors").write_bytes(name.encode() * 100)
            values = {"gbem_ua/qa_diff_fem": metric(*qa_diff),
                      "gbem_ua/qa_f1_man_nofem": metric(0.7, 0.65, 0.75, "higher", 1.0)}
            with tracking.stage_run("evaluate", variant=name, tags={"model_fingerprint": fingerprint_dir(model)}) as run:
                tracking.log_metric_values(values)  # the evaluate run the gate reads
            metrics_file.write(root, name, values, model_dir=f"models/{name}", run_id=run.info.run_id,
                               model_fingerprint=fingerprint_dir(model))
        result = registry.register_variants(params, root, log=tracking, flavor="artifacts")
        registry.write_register_json(result, "cli-model", root / "runs" / "register.json")
        yield root
    mlflow.set_tracking_uri(None)


def test_help_is_fast_and_lists_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("promote", "variants", "show-metrics"):
        assert command in result.output
    # nothing heavy at import: the module loads without mlflow/torch/pandas
    code = "import sys, biaslab.cli.main; print(sorted(m for m in ('mlflow','torch','pandas','transformers') if m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"


def test_variants_and_show_metrics(project: Path):
    result = runner.invoke(app, ["variants", "--root", str(project)])
    assert result.exit_code == 0, result.output
    assert "good" in result.output and "worse" in result.output and "gbem_ua/qa_diff_fem" in result.output

    result = runner.invoke(app, ["show-metrics", "good", "--root", str(project)])
    assert result.exit_code == 0, result.output
    assert "0.05 [0.03, 0.07]" in result.output

    result = runner.invoke(app, ["show-metrics", "--filter", "qa_f1", "--root", str(project)])
    assert result.exit_code == 0 and "qa_diff" not in result.output


def test_promote_refused_then_approved(project: Path):
    from mlflow import MlflowClient

    refused = runner.invoke(app, ["promote", "worse", "--root", str(project)])
    assert refused.exit_code == EXIT_REFUSED, refused.output
    assert "FAIL" in refused.output and "gbem_ua/qa_diff_fem" in refused.output and "refused" in refused.output
    assert "rescored_sample" in refused.output  # on by default, also on a local store
    skipped = runner.invoke(app, ["promote", "worse", "--no-rescore", "--root", str(project)])
    assert "rescored_sample (skipped)" in skipped.output and "--no-rescore" in skipped.output

    approved = runner.invoke(app, ["promote", "good", "--root", str(project)])
    assert approved.exit_code == 0, approved.output
    assert "champion" in approved.output
    versions = json.loads((project / "runs" / "register.json").read_text())["versions"]
    client = MlflowClient()
    champion = client.get_model_version_by_alias("biaslab-champion", "champion")  # registry.champion_model
    assert champion.tags["source_model"] == "cli-model" and champion.tags["source_version"] == versions["good"]
    assert client.get_model_version("cli-model", versions["worse"]).tags["promotion.decision"] == "refused"


def test_variants_shows_whether_the_gate_approved_the_champion(project: Path):
    from mlflow import MlflowClient

    assert runner.invoke(app, ["promote", "good", "--root", str(project)]).exit_code == 0
    listed = runner.invoke(app, ["variants", "--root", str(project)])
    assert listed.exit_code == 0, listed.output
    assert "champion: version" in listed.output and "approved" in listed.output and "FLAGGED" not in listed.output

    versions = json.loads((project / "runs" / "register.json").read_text())["versions"]
    client = MlflowClient()
    gated = client.get_model_version_by_alias("biaslab-champion", "champion").version
    base = client.get_model_version("cli-model", versions["base"])
    by_hand = client.create_model_version("biaslab-champion", base.source, run_id=base.run_id)  # behind the gate
    client.set_registered_model_alias("biaslab-champion", "champion", by_hand.version)
    try:
        flagged = runner.invoke(app, ["variants", "--root", str(project)])
        assert flagged.exit_code == 0, flagged.output  # the listing still works; the champion line flags it
        assert "FLAGGED" in flagged.output and "no gate record" in " ".join(flagged.output.split())
        verify = runner.invoke(app, ["promote", "--verify", "--root", str(project)])
        assert verify.exit_code == EXIT_REFUSED and "no gate record" in " ".join(verify.output.split())
    finally:
        client.set_registered_model_alias("biaslab-champion", "champion", gated)
    verify = runner.invoke(app, ["promote", "--verify", "--root", str(project)])
    assert verify.exit_code == 0 and "every file's sha256 recomputed" in " ".join(verify.output.split())


def test_promote_unknown_variant_lists_known_ones(project: Path):
    result = runner.invoke(app, ["promote", "nope", "--root", str(project)])
    assert result.exit_code == EXIT_ERROR
    assert "unknown variant 'nope'" in result.output and "base, good, worse" in result.output


def test_promote_table_shows_each_paired_rule_with_its_estimate_and_ci(project: Path):
    """A rule read from the stored predictions (the collapse floor): its row shows what it asks, the estimate
    with its CI and the reason; a collapsed variant is refused by it. The promoter reads the predictions the
    evaluate runs logged on the server (``predictions/<table>.json``), as the evaluate stage logs them."""
    import mlflow
    import pandas as pd

    params_file = project / "params.yaml"
    original = params_file.read_text()
    raw = yaml.safe_load(original)
    raw["registry"]["gate"].append({"metric": "gbem_ua/qa_answers", "rule": "answer_floor", "table": "gbem_ua__qa",
                                    "column": "answer_yes", "floor": 0.1})
    raw["registry"]["bootstrap"] = {"samples": 300}
    for name, yes in {"base": [True, False] * 20, "good": [True] * 40}.items():
        run_id = metrics_file.read(project / "metrics" / f"{name}.json", name).run_id
        mlflow.MlflowClient().log_table(run_id, pd.DataFrame({"item_id": range(40), "answer_yes": yes}),
                                        "predictions/gbem_ua__qa.json")
    try:
        params_file.write_text(yaml.safe_dump(raw))
        # --no-rescore: these hand-written tables (and the fake weights) are not a model's output; the re-score
        # check is tested on real tiny models (test_rescore.py, test_benchmark_rescore.py)
        refused = runner.invoke(app, ["promote", "good", "--no-rescore", "--root", str(project)])
        text = " ".join(refused.output.split())
        assert refused.exit_code == EXIT_REFUSED, refused.output
        assert "estimate [95% CI]" in text and "answer_floor" in text and "0 [0, 0]" in text and "collapsed" in text
    finally:
        params_file.write_text(original)
        runner.invoke(app, ["promote", "good", "--no-rescore", "--root", str(project)])  # the champion as before


def test_serve_champion_verifies_the_files_before_it_serves(project: Path):
    """`biaslab serve champion` downloads the champion, hashes every file against the promoter's manifest and
    serves that verified copy; one changed byte in the stored copy refuses, naming the file."""
    from urllib.parse import urlparse

    from mlflow import MlflowClient

    # --no-rescore: an earlier test of this module logged hand-written GBEM-UA tables to good's evaluate run
    assert runner.invoke(app, ["promote", "good", "--no-rescore", "--root", str(project)]).exit_code == 0
    served = runner.invoke(app, ["serve", "champion", "--print-command", "--root", str(project)])
    assert served.exit_code == 0, served.output
    assert "biaslab-champion version" in served.output
    assert "--env-manager local" in served.output and "models:/" not in served.output  # the verified local copy

    champion = MlflowClient().get_model_version_by_alias("biaslab-champion", "champion")
    weights = Path(urlparse(champion.source).path) / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + b"!")
    try:
        refused = runner.invoke(app, ["serve", "champion", "--print-command", "--root", str(project)])
        assert refused.exit_code == EXIT_ERROR
        assert "refusing to serve biaslab-champion version" in " ".join(refused.output.split())
        assert "model.safetensors changed" in " ".join(refused.output.split())
    finally:
        weights.write_bytes(original)
