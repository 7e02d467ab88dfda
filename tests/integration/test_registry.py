"""Registering variants: one version per variant, no duplicates on re-registration, verified artifacts,
alias ``candidate`` on the newest, and promotion (refused / approved) with its evidence as tags.

Uses a temporary SQLite MLflow store and tiny model directories built in the test (nothing downloads).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from biaslab.tracking import runs as tracking
from biaslab.config import Params
from biaslab.metrics.values import MetricValue
from biaslab.outputs import metrics_file, variant_dir

os.environ.setdefault("OMP_NUM_THREADS", "1")

PREFIX = {"uk": "Не будь упередженим до статі.", "en": "Please do not think based on gender stereotypes."}


def metric(value, lo, hi, direction="lower", ideal=0.0):
    return MetricValue(value, direction, ideal=ideal, ci_low=lo, ci_high=hi, n=100)


def write_metrics(root: Path, variant: str, qa_diff, f1, model_dir: str):
    """``metrics/<v>.json`` and the evaluate run it came from (its ``metrics.json`` artifact: what the gate reads)."""
    values = {
        "gbem_ua/qa_diff_fem": metric(*qa_diff),
        "gbem_ua/qa_f1_man_nofem": metric(*f1, direction="higher", ideal=1.0),
        "crows_pairs/pct_stereotype": metric(0.6, 0.55, 0.65, direction="target", ideal=0.5),  # not gated
    }
    fingerprint = variant_dir.fingerprint_dir(root / model_dir)
    with tracking.stage_run("evaluate", variant=variant, tags={"model_fingerprint": fingerprint}) as run:
        tracking.log_metric_values(values)
    metrics_file.write(root, variant, values, model_fingerprint=fingerprint, model_dir=model_dir,
                       run_id=run.info.run_id)
    return run.info.run_id


def build_project(root: Path, tokenizer, model, *, with_lora: bool = True) -> Params:
    """models/base (full), models/soft (full, edited), models/lora (adapter overlay), prompt on base."""
    import torch

    base = root / "models" / "base"
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    soft = root / "models" / "soft"
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        model.get_input_embeddings().weight[3] += 0.5
        model.save_pretrained(soft)
        model.load_state_dict(state)
    tokenizer.save_pretrained(soft)
    variants = {
        "base": {"method": "none", "model_dir": "models/base"},
        "prompt": {"method": "prompt", "model_dir": "models/base", "prompt_prefix": PREFIX},
        "soft": {"method": "embedding", "model_dir": "models/soft", "embedding_mode": "soft",
                 "embedding_apply": "checkpoint"},
    }
    if with_lora:
        from safetensors.torch import save_file

        lora_dir = root / "models" / "lora"  # the files PEFT writes; the registry never loads them
        lora_dir.mkdir(parents=True)
        (lora_dir / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2}))
        save_file({"lora_A.weight": torch.ones(2, 32), "lora_B.weight": torch.zeros(32, 2)},
                  str(lora_dir / "adapter_model.safetensors"))
        variant_dir.write_manifest(lora_dir, base="models/base", method="lora")
        (lora_dir / "checkpoint-5").mkdir()
        (lora_dir / "checkpoint-5" / "optimizer.pt").write_bytes(b"resume state, never registered")
        variants["lora"] = {"method": "lora", "model_dir": "models/lora"}
    write_metrics(root, "base", (0.20, 0.18, 0.22), (0.70, 0.66, 0.74), "models/base")
    write_metrics(root, "prompt", (0.19, 0.17, 0.21), (0.69, 0.65, 0.73), "models/base")  # CIs overlap -> refused
    write_metrics(root, "soft", (0.10, 0.08, 0.12), (0.68, 0.64, 0.72), "models/soft")  # clearly better -> approved
    if with_lora:
        write_metrics(root, "lora", (0.25, 0.23, 0.27), (0.71, 0.67, 0.75), "models/lora")  # worse
    return params_for(root, variants)


def params_for(root: Path, variants: dict) -> Params:
    return Params.model_validate({
        "variants": variants,
        "registry": {
            "model_name": "test-model",
            "gate": [
                {"metric": "gbem_ua/qa_diff_fem", "rule": "better_than_base_beyond_ci"},
                {"metric": "gbem_ua/qa_f1_man_nofem", "rule": "not_worse_than_base_minus", "tolerance": 0.05},
            ],
        },
        "tracking": {"tracking_uri": f"sqlite:///{root / 'mlflow.db'}", "artifact_location": str(root / "artifacts"),
                     "experiment": "test"},
    })


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_tokenizer, tiny_causal_model):
    """Model dirs and the SQLite store are built once (creating the MLflow schema takes seconds)."""
    import mlflow

    from biaslab.tracking import runs as tracking

    root = tmp_path_factory.mktemp("project")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        tracking.configure(params_for(root, {}).tracking, root=root)
        params = build_project(root, tiny_tokenizer, tiny_causal_model)
        yield root, params
    mlflow.set_tracking_uri(None)


@pytest.fixture
def project(store, request):
    """The shared store, with a registered model of its own for each test."""
    root, params = store
    name = request.node.name[5:40]
    registry = params.registry.model_copy(update={"model_name": f"m-{name}", "champion_model": f"c-{name}",
                                                  "promotions_experiment": f"p-{name}"})
    for stale in (root / "runs").glob("*.json"):
        stale.unlink()
    return root, params.model_copy(update={"registry": registry})


def test_register_twice_creates_one_version_per_variant(project):
    from mlflow import MlflowClient

    from biaslab.registry import CANDIDATE, register_variants, write_register_json

    root, params = project
    first = register_variants(params, root, log=tracking, flavor="artifacts")
    assert set(first) == {"base", "prompt", "soft", "lora"}
    assert not any(r.reused for r in first.values())
    second = register_variants(params, root, log=tracking, flavor="artifacts")
    assert all(r.reused for r in second.values())
    assert {n: r.version for n, r in second.items()} == {n: r.version for n, r in first.items()}

    client = MlflowClient()
    versions = client.search_model_versions(f"name = '{params.registry.model_name}'")
    assert len(versions) == 4
    newest = max(int(v.version) for v in versions)
    assert str(client.get_model_version_by_alias(params.registry.model_name, CANDIDATE).version) == str(newest)

    lora = client.get_model_version(params.registry.model_name, first["lora"].version)
    assert lora.tags["base_model"] == f"models:/{params.registry.model_name}/{first['base'].version}"
    assert lora.tags["method"] == "lora" and lora.tags["variant"] == "lora"
    assert lora.tags["metric.gbem_ua/qa_diff_fem"] == "0.25"
    assert lora.tags["metric_ci.gbem_ua/qa_diff_fem"] == "0.23,0.27"
    # only the gate's metrics: every other one stays on the evaluate run
    assert sorted(k for k in lora.tags if k.startswith(("metric.", "metric_ci."))) == [
        "metric.gbem_ua/qa_diff_fem", "metric.gbem_ua/qa_f1_man_nofem",
        "metric_ci.gbem_ua/qa_diff_fem", "metric_ci.gbem_ua/qa_f1_man_nofem"]
    assert lora.tags["evaluate_run_id"] == metrics_file.read_variant(root, "lora").run_id
    for key in ("git_commit", "data_hash", "model_fingerprint", "content_hash"):
        assert lora.tags[key]
    # the adapter is logged without Trainer checkpoints, with a reference to the base's version
    files = {f.path for f in client.list_artifacts(lora.run_id, "variant_lora")}
    assert "variant_lora/adapter_model.safetensors" in files and "variant_lora/base_reference.json" in files
    assert not any("checkpoint-" in f for f in files)

    write_register_json(second, params.registry.model_name, root / "runs" / "register.json")
    saved = json.loads((root / "runs" / "register.json").read_text())
    assert saved["versions"] == {n: r.version for n, r in first.items()}


def test_changed_content_creates_a_new_version(project):
    from biaslab.registry import register_variants

    root, params = project
    shutil.copytree(root / "models" / "soft", root / "models" / "soft2")
    variants = {**params.variants, "soft2": params.variants["soft"].model_copy(update={"model_dir": "models/soft2"})}
    params = params.model_copy(update={"variants": variants})
    first = register_variants(params, root, log=tracking, flavor="artifacts", variants=["soft2"])
    (root / "models" / "soft2" / "generation_config.json").write_text("{}")
    second = register_variants(params, root, log=tracking, flavor="artifacts", variants=["soft2"])
    assert int(second["soft2"].version) > int(first["soft2"].version) and not second["soft2"].reused


def test_incomplete_upload_is_not_registered(project, monkeypatch):
    from mlflow import MlflowClient

    from biaslab import registry

    root, params = project
    real_manifest = registry.file_manifest

    def manifest_with_extra_file(directory, known=None):
        return {**real_manifest(directory, known), "never_uploaded.bin": (3, "0" * 64)}

    monkeypatch.setattr(registry.register, "file_manifest", manifest_with_extra_file)  # what register uploads
    with pytest.raises(registry.RegistryError, match="incomplete.*never_uploaded"):
        registry.register_variants(params, root, log=tracking, flavor="artifacts", variants=["base"])
    assert MlflowClient().search_model_versions(f"name = '{params.registry.model_name}'") == []


@pytest.mark.parametrize("flavor", ["artifacts", "transformers"])
def test_registering_reads_each_weight_file_twice_and_stages_no_copy_of_it(project, monkeypatch, flavor):
    """Issue 41 (bytes): register hashes a weight file once in the source (the copy check; both manifests reuse
    that hash) and once in the upload, read where a local store keeps it (verify_logged: no downloaded copy).
    The temporary package holds the weight file as a link to the source, not a copy: the one copy written is
    MLflow's stored artifact, a real file with the source's bytes."""
    from biaslab import registry
    from biaslab.registry import register as register_module
    from biaslab.serving import manifest

    root, params = project
    real, reads = manifest.sha256_file, []

    def counting(path):
        if str(path).endswith(".safetensors"):
            reads.append(Path(path))
        return real(path)

    staged = {}
    real_package = register_module.package_variant

    def package_and_look(src, dst, **kwargs):
        copied = real_package(src, dst, **kwargs)
        staged.update({p.relative_to(dst).as_posix(): (p.is_symlink(), p.resolve()) for p in dst.rglob("*.safetensors")})
        return copied

    monkeypatch.setattr(manifest, "sha256_file", counting)
    monkeypatch.setattr(register_module, "package_variant", package_and_look)
    result = registry.register_variants(params, root, log=tracking, flavor=flavor, variants=["soft"])
    source = root / "models" / "soft" / "model.safetensors"
    inside = "model/model.safetensors" if flavor == "transformers" else "model.safetensors"
    assert staged == {inside: (True, source.resolve())}  # a link in the staging folder, not a copy
    assert reads.count(source) == 1
    assert len(reads) == 2, reads  # the source, the upload read back
    uploaded = [p for p in reads if "artifacts" in p.parts]  # the local store's own file, not a download's copy
    assert len(uploaded) == 1 and uploaded[0].is_file() and not uploaded[0].is_symlink(), reads
    assert uploaded[0].read_bytes() == source.read_bytes()
    if flavor == "transformers":  # MLflow's record of where the checkpoint came from: the variant's folder
        from mlflow.models import Model

        logged = Model.load(str(uploaded[0].parents[1] / "MLmodel")).flavors["transformers"]
        assert logged["source_model_name"] == str(root / "models" / "soft")
    assert result["soft"].version


def test_a_source_weight_file_changed_after_staging_is_refused(project, monkeypatch):
    """The staged weight file is a link to the source (no staging copy): a source rewritten between the copy
    check and the upload uploads the new bytes, which verify_logged refuses against the hash taken at the
    check; no version is created."""
    from mlflow import MlflowClient

    from biaslab import registry
    from biaslab.registry import register as register_module
    from biaslab.registry.errors import RegistryError

    root, params = project
    real_package = register_module.package_variant
    source = root / "models" / "soft" / "model.safetensors"
    original = source.read_bytes()  # the module's store is shared: put the bytes back afterwards

    def package_then_rewrite_the_source(src, dst, **kwargs):
        copied = real_package(src, dst, **kwargs)
        source.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        return copied

    monkeypatch.setattr(register_module, "package_variant", package_then_rewrite_the_source)
    try:
        with pytest.raises(RegistryError, match="differ from what was uploaded"):
            registry.register_variants(params, root, log=tracking, flavor="artifacts", variants=["soft"])
    finally:
        source.write_bytes(original)
    assert MlflowClient().search_model_versions(f"name = '{params.registry.model_name}'") == []


def test_an_upload_that_differs_from_the_package_is_refused_in_a_local_store(project, monkeypatch):
    """verify_logged reads a local store's files where they lie (no downloaded copy): a byte changed in the
    stored upload is still refused, and no version is created."""
    from mlflow import MlflowClient

    from biaslab import registry
    from biaslab.registry import package
    from biaslab.registry.errors import RegistryError

    root, params = project
    real = package.verify_logged

    def tamper_then_verify(client, run_id, artifact_path, manifest, **kwargs):
        stored = package.local_artifact_dir(client, run_id, artifact_path)
        weights = next(p for p in stored.rglob("*.safetensors"))
        data = bytearray(weights.read_bytes())
        data[-1] ^= 1
        weights.write_bytes(bytes(data))
        return real(client, run_id, artifact_path, manifest, **kwargs)

    monkeypatch.setattr("biaslab.registry.register.verify_logged", tamper_then_verify)
    with pytest.raises(RegistryError, match="differ from what was uploaded"):
        registry.register_variants(params, root, log=tracking, flavor="artifacts", variants=["soft"])
    assert MlflowClient().search_model_versions(f"name = '{params.registry.model_name}'") == []


def test_transformers_flavor_full_model_is_loadable(project):
    """The default flavour: an MLflow transformers model with an explicit pip list and the same weights."""
    from mlflow import MlflowClient

    from biaslab.registry import register_variants

    root, params = project
    reg = register_variants(params, root, log=tracking, variants=["base"])["base"]
    client = MlflowClient()
    files = {f.path for f in client.list_artifacts(reg.run_id, "variant_base")}
    assert {"variant_base/MLmodel", "variant_base/requirements.txt"} <= files
    req = client.download_artifacts(reg.run_id, "variant_base/requirements.txt", str(root / "dl"))
    assert "transformers==" in Path(req).read_text()
    assert client.get_model_version(params.registry.model_name, reg.version).tags["format"] == "transformers"


def test_a_registered_full_model_has_a_local_card_and_licence_note_never_a_hub_url_of_a_local_path(
        project, tmp_path, caplog, monkeypatch):
    """MLflow asked the Hub for the card of ``<abs path>/models/base`` and wrote a LICENSE.txt pointing at
    ``https://huggingface.co/<abs path>``; the package now brings its own card and licence note."""
    import huggingface_hub
    from mlflow import MlflowClient

    from biaslab.registry import register_variants

    def no_hub(*args, **kwargs):
        raise AssertionError(f"the Hub was asked: {args}")

    monkeypatch.setattr(huggingface_hub.ModelCard, "load", classmethod(lambda cls, p, **kw: (
        no_hub(p) if not Path(p).is_file() else huggingface_hub.ModelCard(Path(p).read_text(encoding="utf-8")))))
    root, params = project
    carded = root / "models" / "carded"
    if not carded.exists():
        import shutil

        shutil.copytree(root / "models" / "base", carded)
        (carded / "README.md").write_text("---\nlicense: apache-2.0\n---\n# A carded checkpoint\n", encoding="utf-8")
    variants = {"base": params.variants["base"].model_dump(), "carded": {"method": "none", "model_dir": "models/carded"}}
    params = Params.model_validate({**params.model_dump(), "variants": variants})
    with caplog.at_level("WARNING", logger="mlflow.transformers"):
        registered = register_variants(params, root, log=tracking, variants=["base", "carded"])
    assert not [r.getMessage() for r in caplog.records if r.name == "mlflow.transformers"]
    for name, expected in (("base", "No licence travels with this checkpoint"), ("carded", "apache-2.0")):
        local = Path(MlflowClient().download_artifacts(registered[name].run_id, f"variant_{name}", str(tmp_path / name)))
        licence = (local / "LICENSE.txt").read_text(encoding="utf-8")
        assert expected in licence and str(root) not in licence and "huggingface.co/" not in licence
        assert str(root) not in (local / "model_card.md").read_text(encoding="utf-8")


def test_transformers_flavor_copies_a_bf16_checkpoint_without_re_saving(project, tmp_path):
    """The flavour is built from the directory: the registered weights are the checkpoint's bytes, still bf16."""
    import hashlib

    import mlflow.transformers
    import torch
    from mlflow import MlflowClient

    from biaslab.registry import register_variants

    root, params = project
    bf16 = root / "models" / "bf16"
    if not bf16.exists():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        AutoModelForCausalLM.from_pretrained(root / "models" / "base", dtype=torch.bfloat16).save_pretrained(bf16)
        AutoTokenizer.from_pretrained(root / "models" / "base").save_pretrained(bf16)
    variants = {"bf16": {"method": "none", "model_dir": "models/bf16"}}
    params = Params.model_validate({**params.model_dump(), "variants": variants})
    reg = register_variants(params, root, log=tracking, variants=["bf16"])["bf16"]
    local = Path(MlflowClient().download_artifacts(reg.run_id, "variant_bf16", str(tmp_path)))
    sha = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    assert sha(local / "model" / "model.safetensors") == sha(bf16 / "model.safetensors")
    assert "torch.bfloat16" in (local / "MLmodel").read_text()
    loaded = mlflow.transformers.load_model(str(local), return_type="components")
    assert loaded["model"].dtype == torch.bfloat16


def test_promotion_refused_and_approved(project):
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    from biaslab.registry import CHAMPION, promote, register_variants, write_register_json

    root, params = project
    result = register_variants(params, root, log=tracking, flavor="artifacts", variants=["base", "prompt", "soft"])
    write_register_json(result, params.registry.model_name, root / "runs" / "register.json")
    client = MlflowClient()

    refused = promote(params, "prompt", root)
    assert not refused.approved and refused.champion_version is None
    assert any("gbem_ua/qa_diff_fem" in r and "FAIL" in r and "overlap" in r for r in refused.reasons)
    tags = client.get_model_version(params.registry.model_name, result["prompt"].version).tags
    assert tags["promotion.decision"] == "refused" and "qa_diff_fem" in tags["promotion.reasons"]
    assert tags["promotion.timestamp"]
    with pytest.raises(MlflowException):
        client.get_model_version_by_alias(params.registry.champion_model, CHAMPION)

    approved = promote(params, "soft", root)
    assert approved.approved, approved.reasons
    champion = client.get_model_version_by_alias(params.registry.champion_model, CHAMPION)
    assert str(champion.version) == approved.champion_version
    assert champion.tags["source_model"] == params.registry.model_name
    assert champion.tags["source_version"] == result["soft"].version
    # the gate read the evaluate runs named at registration, and the record says which bytes it read
    soft_run = metrics_file.read_variant(root, "soft").run_id
    assert approved.gate_inputs["soft"]["evaluate_run_id"] == soft_run
    assert any(k.startswith(f"runs:/{soft_run}/") and k.endswith("metrics.json") for k in approved.gate_inputs["soft"])
    # a copy, not a pointer: the champion's files are artifacts of the gate record's run
    assert champion.run_id == approved.record_run_id
    assert champion.source == client.get_run(approved.record_run_id).info.artifact_uri + "/champion"
    # the gate's conditions are part of the record: an artifact, its sha256 a param (never changed)
    import hashlib

    from biaslab.registry.promotions import GATE_CONDITIONS, gate_conditions

    record = client.get_run(approved.record_run_id)
    conditions = json.loads(Path(client.download_artifacts(record.info.run_id, GATE_CONDITIONS)).read_text())
    assert conditions == gate_conditions(params) and conditions["gate"][0]["metric"] == "gbem_ua/qa_diff_fem"
    assert record.data.params["gate_conditions_sha256"] == hashlib.sha256(
        json.dumps(conditions, sort_keys=True).encode()).hexdigest()
    # a local store says which evidence checks it could not make
    assert any(r.rule == "evaluator_runs (skipped)" and r.passed and "local single-user store" in r.reason
               for r in approved.results)
    assert client.get_model_version(params.registry.model_name, result["soft"].version).tags["promotion.decision"] == "approved"


def test_a_variant_registered_after_the_base_was_evaluated_again_is_gated_against_that_evaluation(project):
    """The base's version is reused while its bytes are unchanged, and its registering run's params keep the
    evaluate run of its first registration. A variant registered after the base was evaluated again names the
    base's new run (``evidence_base_run_id``): promote gates against that one, not the stale run."""
    import shutil

    from biaslab.registry import promote, register_variants, write_register_json

    root, params = project
    base_metrics = root / "metrics" / "base.json"
    saved = base_metrics.read_bytes()
    try:
        first = register_variants(params, root, log=tracking, flavor="artifacts", variants=["base"])
        old_run = metrics_file.read_variant(root, "base").run_id
        write_metrics(root, "base", (0.20, 0.18, 0.22), (0.70, 0.66, 0.74), "models/base")  # evaluated again
        new_run = metrics_file.read_variant(root, "base").run_id
        assert new_run != old_run
        if not (root / "models" / "soft_late").exists():
            shutil.copytree(root / "models" / "soft", root / "models" / "soft_late")
        write_metrics(root, "soft_late", (0.10, 0.08, 0.12), (0.68, 0.64, 0.72), "models/soft_late")
        params = params.model_copy(update={"variants": {**params.variants,
                                                        "soft_late": params.variants["soft"].model_copy(
                                                            update={"model_dir": "models/soft_late"})}})
        result = register_variants(params, root, log=tracking, flavor="artifacts", variants=["base", "soft_late"])
        assert result["base"].version == first["base"].version and result["base"].reused  # the same base version
        write_register_json(result, params.registry.model_name, root / "runs" / "register.json")
        decision = promote(params, "soft_late", root)
        assert decision.gate_inputs["base"]["evaluate_run_id"] == new_run, decision.gate_inputs["base"]
    finally:
        base_metrics.write_bytes(saved)


def test_promote_unknown_or_unregistered_variant(project):
    from biaslab.config import ConfigError
    from biaslab.registry import RegistryError, promote

    root, params = project
    with pytest.raises(ConfigError, match="unknown variant 'nope'.*base"):
        promote(params, "nope", root)
    with pytest.raises(RegistryError, match="does not list it.*--version N"):
        promote(params, "soft", root)


def test_the_champion_is_a_verified_copy_and_a_changed_byte_is_named(project, tmp_path):
    """verify_champion accepts the gated copy; the copy does not change when the candidate's files do; a byte
    changed in the copy itself is named by verify (hashes recomputed) and refused by the pyfunc loader."""
    from urllib.parse import urlparse

    import mlflow.pyfunc
    from mlflow import MlflowClient

    from biaslab.registry import promote, register_variants, write_register_json
    from biaslab.registry.promotions import verify_champion
    from biaslab.serving.manifest import PackageIntegrityError

    root, params = project
    result = register_variants(params, root, log=tracking, flavor="artifacts", variants=["base", "soft"])
    write_register_json(result, params.registry.model_name, root / "runs" / "register.json")
    client = MlflowClient()
    assert verify_champion(client, params).version is None  # no champion yet: nothing to flag
    approved = promote(params, "soft", root)
    check = verify_champion(client, params, files_to=tmp_path / "first")
    assert check.ok, check.problems
    assert check.version == approved.champion_version and check.record_run_id == approved.record_run_id

    # (a) the candidate's files are rewritten after approval: the champion is another copy, untouched
    local = lambda uri: Path(urlparse(uri).path)  # noqa: E731 - the local artifact store's folder of a version
    candidate = local(client.get_model_version(params.registry.model_name, result["soft"].version).source)
    (candidate / "config.json").write_text("{}")
    assert verify_champion(client, params, files_to=tmp_path / "second").ok

    # the champion copy itself changed (only possible with the server's disk): named, and the loader refuses
    copy = local(client.get_model_version(params.registry.champion_model, approved.champion_version).source)
    weights = copy / "model.safetensors"
    original_last = weights.read_bytes()[-1:]
    weights.write_bytes(weights.read_bytes()[:-1] + b"\x00")
    check = verify_champion(client, params, files_to=tmp_path / "third")
    assert not check.ok and "model.safetensors changed" in check.problems[0]
    with pytest.raises(PackageIntegrityError, match="model.safetensors changed"):
        mlflow.pyfunc.load_model(f"models:/{params.registry.champion_model}@champion")
    # the documented load: verified against the record's manifest hash (a hash from outside the package)
    from biaslab.registry import RegistryError
    from biaslab.registry.promotions import load_champion

    with pytest.raises(RegistryError, match="refusing to load .*model.safetensors changed"):
        load_champion(params, tmp_path / "fourth")
    weights.write_bytes(weights.read_bytes()[:-1] + original_last)
    import pandas as pd

    answer = load_champion(params, tmp_path / "fifth").predict(
        pd.DataFrame({"context": ["the nurse said"], "continuation": [" she"]}))
    assert answer["task"][0] == "loglikelihood" and answer["logprob"][0] < 0


def test_promote_reads_the_registration_not_the_tags(project):
    """(b) without runs/register.json nothing is guessed; a changed variant tag or a forged fingerprint tag
    does not make the gate judge another version (the run's params decide, and MLflow never changes them)."""
    from mlflow import MlflowClient

    from biaslab.registry import RegistryError, promote, register_variants, write_register_json

    root, params = project
    result = register_variants(params, root, log=tracking, flavor="artifacts", variants=["base", "prompt", "soft"])
    client = MlflowClient()
    model = params.registry.model_name
    with pytest.raises(RegistryError, match="does not list it"):
        promote(params, "soft", root)  # no runs/register.json: no "newest version tagged soft"
    # the worker re-tags the refused prompt version as soft and names it in its register.json
    client.set_model_version_tag(model, result["prompt"].version, "variant", "soft")
    client.set_model_version_tag(model, result["prompt"].version, "model_fingerprint", "forged")
    forged = {**result, "soft": result["prompt"]}
    write_register_json(forged, model, root / "runs" / "register.json")
    with pytest.raises(RegistryError, match=f"version {result['prompt'].version} was registered for variant "
                                            "'prompt', not 'soft'"):
        promote(params, "soft", root)
    # MLflow refuses to change the param the gate reads
    with pytest.raises(Exception, match="Changing param values is not allowed"):
        client.log_param(result["prompt"].run_id, "variant", "soft")
    assert promote(params, "soft", root, version=result["soft"].version).approved


def test_the_gate_binds_the_evidence_to_the_files_it_approves(project):
    """A registration that names a good evaluate run but holds other weights (here: the base's files registered
    with soft's metrics file) is refused: the promoter fingerprints the downloaded checkpoint again. The same
    check passes for the transformers layout (checkpoint under model/)."""
    from biaslab.registry import promote, register_variants, write_register_json

    root, params = project
    (root / "metrics" / "liar.json").write_text((root / "metrics" / "soft.json").read_text())
    variants = {**params.variants, "liar": params.variants["base"]}
    params = params.model_copy(update={"variants": variants})
    result = register_variants(params, root, log=tracking, variants=["base", "soft", "liar"])  # transformers layout
    write_register_json(result, params.registry.model_name, root / "runs" / "register.json")
    refused = promote(params, "liar", root)
    assert not refused.approved
    assert [r.rule for r in refused.results if not r.passed] == ["evaluated_bytes"]
    assert any("not the evaluated weights" in r for r in refused.reasons)
    assert promote(params, "soft", root).approved


def _overlay_variant(root: Path, params: Params, name: str) -> Params:
    """``name``: the LoRA overlay of models/lora, evaluated as the evaluate stage records an overlay (the base's
    fingerprint and the overlay's together) with metrics clearly better than the base's."""
    fingerprint = variant_dir.overlay_fingerprint(variant_dir.fingerprint_dir(root / "models" / "base"),
                                                  root / "models" / "lora")
    values = {"gbem_ua/qa_diff_fem": metric(0.10, 0.08, 0.12),
              "gbem_ua/qa_f1_man_nofem": metric(0.70, 0.66, 0.74, direction="higher", ideal=1.0)}
    with tracking.stage_run("evaluate", variant=name, tags={"model_fingerprint": fingerprint}) as run:
        tracking.log_metric_values(values)
    metrics_file.write(root, name, values, model_fingerprint=fingerprint, model_dir="models/lora",
                       run_id=run.info.run_id)
    variants = {**params.model_dump()["variants"], name: {"method": "lora", "model_dir": "models/lora"}}
    return Params.model_validate({**params.model_dump(), "variants": variants})


def test_an_overlay_is_promoted_with_the_approved_base_and_a_worker_pinned_base_is_refused(project, tmp_path):
    """An honest LoRA overlay passes: the bytes check runs for it too (its files on the verified base are what its
    evaluate run measured) and the champion's MLmodel is the promoter's, pinning the approved base version. An
    overlay whose package pins a full version the worker uploaded itself (the base's fingerprint tag, its own
    manifest) is refused, although the overlay's files are the evaluated ones."""
    import mlflow
    from mlflow import MlflowClient

    from biaslab.registry import promote, register_variants, write_register_json
    from biaslab.registry.package_check import base_pin, mlmodel_problems
    from biaslab.serving.manifest import write_manifest

    root, params = project
    params = _overlay_variant(root, params, "lora_ok")
    params = _overlay_variant(root, params, "lora_pinned")
    model = params.registry.model_name
    client = MlflowClient()
    result = register_variants(params, root, log=tracking, flavor="artifacts", variants=["base", "lora_ok"])
    write_register_json(result, model, root / "runs" / "register.json")
    approved = promote(params, "lora_ok", root)
    assert approved.approved, approved.reasons
    champion = client.get_model_version(params.registry.champion_model, approved.champion_version)
    local = Path(client.download_artifacts(champion.run_id, "champion", str(tmp_path / "champion")))
    assert mlmodel_problems(local) == []
    assert base_pin(local)["version"] == result["base"].version
    assert base_pin(local)["manifest_sha256"] == result["base"].manifest_sha256
    assert sorted(p.name for p in local.iterdir() if p.name.startswith("adapter_")) == [
        "adapter_config.json", "adapter_model.safetensors"]

    # the worker's own full version: the base's files plus one of its own, its own manifest, the base's tags
    package = tmp_path / "upload"
    shutil.copytree(client.download_artifacts(result["base"].run_id, "variant_base", str(tmp_path / "b")), package)
    (package / "note.txt").write_text("the worker's base")
    (package / "biaslab_manifest.json").unlink()
    with mlflow.start_run() as run:
        mlflow.log_param("manifest_sha256", write_manifest(package, variant="base"))
        mlflow.log_artifacts(str(package), "variant_base")
    base_tags = client.get_model_version(model, result["base"].version).tags
    client.create_model_version(model, f"{run.info.artifact_uri}/variant_base", run_id=run.info.run_id,
                                tags={k: base_tags[k] for k in ("kind", "model_fingerprint", "variant")})
    pinned = register_variants(params, root, log=tracking, flavor="artifacts", variants=["lora_pinned"])["lora_pinned"]
    refused = promote(params, "lora_pinned", root, version=pinned.version, base_version=result["base"].version)
    assert not refused.approved
    assert [r.rule for r in refused.results if not r.passed] == ["base_pin"]
    assert any(f"the approved base is version {result['base'].version}" in r for r in refused.reasons)


def test_a_version_whose_path_climbs_out_of_its_run_is_refused(project):
    """Issue 42 (6): a version's files named with ``..`` under its registering run's artifacts (they could be
    another run's) are refused before anything is downloaded."""
    from mlflow import MlflowClient

    from biaslab.registry import RegistryError, promote, register_variants, write_register_json

    root, params = project
    result = register_variants(params, root, log=tracking, flavor="artifacts", variants=["base", "soft"])
    client = MlflowClient()
    soft = client.get_model_version(params.registry.model_name, result["soft"].version)
    climbing = client.create_model_version(params.registry.model_name, f"{soft.source}/../variant_soft",
                                           run_id=soft.run_id, tags=soft.tags)
    write_register_json({**result, "soft": result["soft"]}, params.registry.model_name, root / "runs" / "register.json")
    with pytest.raises(RegistryError, match=r"name a path with '\.\.'"):
        promote(params, "soft", root, version=str(climbing.version))


def test_promoting_an_overlay_hands_the_rescoring_load_the_verified_base(project, monkeypatch):
    """Issue 41 (bytes): promote downloads the base once (its own temporary folder), hashes its weights once
    (``verify_package``) and hands that very folder, with the approved pin, to the re-scoring check, whose load of
    the overlay uses it instead of resolving the pin again (``tests/unit/test_serving_base_handoff.py`` counts that
    load: 0 downloads, 0 hashes of the base)."""
    from biaslab.registry import promote, register_variants, rescore, write_register_json
    from biaslab.serving import base as base_module
    from biaslab.serving import manifest

    root, params = project
    params = _overlay_variant(root, params, "lora_ok")
    result = register_variants(params, root, log=tracking, flavor="artifacts", variants=["base", "lora_ok"])
    write_register_json(result, params.registry.model_name, root / "runs" / "register.json")
    handed, hashed, resolved = [], [], []
    real_row, real_hash, real_resolve = rescore.rescore_row, manifest.sha256_file, base_module.resolve_base

    def row(params, evidence, packages, **kwargs):
        handed.append((dict(packages), kwargs.get("base")))
        return real_row(params, evidence, packages, **kwargs)

    def hashing(path):
        if Path(path).name == "model.safetensors":
            hashed.append(Path(path))
        return real_hash(path)

    monkeypatch.setattr(rescore, "rescore_row", row)
    monkeypatch.setattr(manifest, "sha256_file", hashing)
    monkeypatch.setattr(base_module, "resolve_base", lambda *a, **k: resolved.append(a) or real_resolve(*a, **k))
    decision = promote(params, "lora_ok", root)
    assert decision.approved, decision.reasons
    [(packages, base)] = handed
    assert base is not None and base.package == packages["base"]  # the promoter's verified download, not the store
    assert (base.registered_model, base.version, base.manifest_sha256) == (
        params.registry.model_name, str(result["base"].version), result["base"].manifest_sha256)
    assert len(hashed) == 1 and hashed[0].is_relative_to(packages["base"]), hashed  # its verify_package, once
    assert resolved == []


def test_the_champion_copy_stages_links_and_reads_its_weights_only_in_the_upload(project, monkeypatch):
    """Issue 41 (bytes): approving a full variant stages the champion's weight file as a link to the promoter's
    verified download (no copy in the temporary folder), its manifests reuse the digests of that verified
    download (no hash of the staged file), and the upload is read back once, where the local store keeps it; the
    champion then verifies as always."""
    from biaslab.registry import champion, promote, register_variants, write_register_json
    from biaslab.serving import manifest

    root, params = project
    result = register_variants(params, root, log=tracking, flavor="artifacts", variants=["base", "soft"])
    write_register_json(result, params.registry.model_name, root / "runs" / "register.json")
    hashed, staged, real_hash, real_copy = [], {}, manifest.sha256_file, champion.copy_to_champion

    def hashing(path):
        if Path(path).name == "model.safetensors":
            hashed.append(Path(path))
        return real_hash(path)

    def copying(client, params, decision, package, registration, known=None):
        staged["package"] = package
        staged["weights"] = [(p.is_symlink(), p.resolve()) for p in package.rglob("model.safetensors")]
        staged["known"] = dict(known or {})
        return real_copy(client, params, decision, package, registration, known)

    monkeypatch.setattr(manifest, "sha256_file", hashing)
    monkeypatch.setattr(champion, "copy_to_champion", copying)
    decision = promote(params, "soft", root)
    assert decision.approved and decision.champion_version, decision.reasons
    [(linked, target)] = staged["weights"]
    assert linked and "champion" not in target.parts  # a link into the verified download
    assert "model.safetensors" in staged["known"]
    assert not [p for p in hashed if p.is_relative_to(staged["package"])], hashed  # the staged file: not hashed
    uploads = [p for p in hashed if "artifacts" in p.parts and "champion" in p.parts]
    assert len(uploads) == 1 and not uploads[0].is_symlink(), hashed  # verify_logged's read back, in place
    from mlflow import MlflowClient

    from biaslab.registry.promotions import verify_champion

    monkeypatch.setattr(manifest, "sha256_file", real_hash)
    assert verify_champion(MlflowClient(), params, files_to=root / "champion-check").ok  # every hash recomputed


def test_promoting_a_full_variant_hands_no_base(project, monkeypatch):
    """A full version's re-scoring load reads its own package: no base is handed (the loader would ignore it)."""
    from biaslab.registry import promote, register_variants, rescore, write_register_json

    root, params = project
    result = register_variants(params, root, log=tracking, flavor="artifacts", variants=["base", "soft"])
    write_register_json(result, params.registry.model_name, root / "runs" / "register.json")
    handed, real_row = [], rescore.rescore_row
    monkeypatch.setattr(rescore, "rescore_row", lambda p, e, packages, **kw: handed.append(kw.get("base"))
                        or real_row(p, e, packages, **kw))
    assert promote(params, "soft", root).approved
    assert handed == [None]
