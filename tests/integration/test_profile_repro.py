"""A profile runs less without editing ``dvc.yaml``: a real ``dvc exp run -S profile=<p>`` (docs/profiles.md).

The workspace is a copy of the project's pipeline in a fresh git + DVC repository (``tests/integration/workspace.py``)
with the session's tiny causal model as ``model.source`` (no planted bias: ``control_model``/``calibrate`` say why),
the smoke-run sample, GBEM-UA only, and a profile of its own, ``tiny``: ``base`` and ``soft``. ``dvc.yaml``'s ``foreach`` lists are
untouched except for dropping variants whose stages repeat another's code path (``hard_k16``; ``lora_cda`` and
``lora_clp_cda``, disabled like ``lora`` and ``lora_clp``), as the masked-LM repro test does: every stage is a
subprocess of several seconds here.

Under ``tiny``, every stage of a disabled variant must run, print one line saying it is disabled by the profile,
write the outputs DVC declares marked ``disabled`` and make no MLflow run; ``register`` registers ``base`` and
``soft`` only and lists the rest as not registered with the reason (``prompt`` too, which has no directory of
its own); the report says which variants have no numbers and why. The preflight runs first and passes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from workspace import copy_pipeline, drop_variants, init_repo, pipeline_env, run_in

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SAME_PATH = ("hard_k16", "lora_cda", "lora_clp_cda")
ENABLED = ("base", "soft")
DISABLED = ("prompt", "hard", "lora", "lora_clp", "positive_control", "negative_control")  # the gate's controls too


def test_a_profile_runs_only_its_variants(tmp_path, mirror, tiny_causal_model, tiny_tokenizer):
    tiny_causal_model.save_pretrained(tmp_path / "model")
    tiny_tokenizer.save_pretrained(tmp_path / "model")
    work = tmp_path / "work"
    work.mkdir()
    copy_pipeline(work, ROOT)
    params = yaml.safe_load((work / "params.yaml").read_text(encoding="utf-8"))
    params["data"]["mirror_dir"] = str(mirror)
    params["data"]["sample"] = {"per_group": 2, "seed": 0}
    params["data"]["lm_heldout"]["languages"] = []
    params["model"]["source"] = str(tmp_path / "model")
    params["evaluation"]["bootstrap_samples"] = 20
    for name in ("occugender", "rubia", "crows_pairs", "cloze_gender"):  # GBEM-UA stands for them: this test is
        params["evaluation"]["benchmarks"][name]["enabled"] = False  # about stages, not benchmarks (saves minutes)
    params["profiles"]["tiny"] = {"description": "base and one edit", "variants": list(ENABLED)}
    (work / "params.yaml").write_text(yaml.safe_dump(params, allow_unicode=True, sort_keys=False), encoding="utf-8")
    drop_variants(work, SAME_PATH)
    env = pipeline_env(work)
    init_repo(work, env)

    log = run_in(work, env, "dvc", "exp", "run", "-S", "profile=tiny")

    assert "preflight: ok: profile tiny (2 variants), device cpu" in log
    assert log.index("Running stage 'preflight'") < log.index("Running stage 'raw_data'")
    for name in ("edit_embeddings@hard", "finetune@lora", "finetune@lora_clp", "tune_variant@lora_clp", "tune",
                 *(f"evaluate@{n}" for n in DISABLED)):
        assert f"{name}: disabled by profile 'tiny'" in log, name
    for name in ("hard", "lora", "lora_clp"):
        manifest = json.loads((work / "models" / name / "variant.json").read_text(encoding="utf-8"))
        assert manifest["disabled"] == "tiny" and sorted(p.name for p in (work / "models" / name).iterdir()) == [
            "variant.json"]
    for name in DISABLED:
        record = json.loads((work / "metrics" / f"{name}.json").read_text(encoding="utf-8"))
        assert record["metrics"] == {} and "disabled by profile 'tiny'" in record["skipped"]
    for name in ENABLED:
        values = json.loads((work / "metrics" / "values" / f"{name}.json").read_text(encoding="utf-8"))
        assert any(k.startswith("gbem_ua/") for k in values), name  # really evaluated

    register = json.loads((work / "runs" / "register.json").read_text(encoding="utf-8"))
    assert set(register["versions"]) == set(ENABLED)
    assert set(register["skipped"]) == set(DISABLED)
    assert all("disabled by profile 'tiny'" in why for why in register["skipped"].values())
    report = (work / "reports" / "report.md").read_text(encoding="utf-8")
    assert all(f"**{name}** has no numbers: disabled by profile 'tiny'" in report for name in DISABLED)
    assert "calibrate: " in log  # no planted bias in a snapshotted model: it says so and succeeds

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{work / 'mlruns' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("biaslab")
    runs = client.search_runs([experiment.experiment_id])
    evaluated = {r.data.tags.get("variant") for r in runs if r.data.tags.get("stage") == "evaluate"}
    assert evaluated == set(ENABLED)  # a disabled stage makes no MLflow run
    assert not any(r.data.tags.get("stage") in ("tune", "finetune") for r in runs)

    # back to full: the stages that depend on the profile are out of date, the model and the data are not
    text = (work / "params.yaml").read_text(encoding="utf-8")
    assert "profile: tiny" in text  # dvc exp run -S left the workspace's params on the experiment's value
    (work / "params.yaml").write_text(text.replace("profile: tiny", "profile: full"), encoding="utf-8")
    stale = set(_json_tail(run_in(work, env, "dvc", "status", "--json")))
    assert {"prepare", "base_model", "control_model"}.isdisjoint(stale)
    assert {"edit_embeddings@hard", "evaluate@base", "tune", "finetune@lora", "register", "report"} <= stale


def _json_tail(output: str) -> dict:
    """The JSON object ``dvc status --json`` prints, whatever warning lines come before or after it."""
    return json.JSONDecoder().raw_decode(output[output.index("{"):])[0]
