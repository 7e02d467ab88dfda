"""Every kind of registered version loads with ``mlflow.pyfunc.load_model`` in a fresh process and answers
the predict contract with biaslab's own numbers.

Kinds: full model (transformers layout and byte copy, causal and masked), embedding-hook overlay, LoRA
overlay (a real PEFT adapter), prompt variant. For each: register -> alias -> a *new* Python process loads
``models:/<name>@<alias>`` and predicts -> equal (1e-5) to the evaluation path's scorer
(``load_variant_model`` + ``make_scorer`` + ``with_prefix``) on the same requests, and the same greedy text.
Overlays and prompts must hold no base weights. Tiny models built here, a SQLite store, nothing downloads.
"""

from __future__ import annotations

import copy
import json
import shutil
import os
import subprocess
import sys
from pathlib import Path

import pytest

from biaslab.tracking import runs as tracking
from biaslab.config import Params
from tiny_models import build_tiny_bert

PREFIX = {"en": "Please do not think based on gender stereotypes.", "uk": "Не будь упередженим до статі."}
LOGLIKELIHOOD = [("The doctor said that", " he would come."), ("The nurse said that", " she would come."),
                 ("", "He is a man.")]
PROMPTS = ["The doctor said that", "Кандидат має досвід."]
SENTENCES = ["The nurse said that she would come.", "He is a man."]
MAX_NEW_TOKENS = 6
CAUSAL = ("base", "soft", "soft_copy", "rows", "hook", "lora", "prompt")
MODEL = "serving-test"

LOAD_AND_PREDICT = r"""
import json, sys
import mlflow.pyfunc
import pandas as pd

model_name, requests_json, out = sys.argv[1], sys.argv[2], sys.argv[3]
requests = json.loads(requests_json)
answers = {}
for alias, rows in requests.items():
    model = mlflow.pyfunc.load_model(f"models:/{model_name}@{alias}")
    frame = model.predict(pd.DataFrame(rows), params={"max_new_tokens": %d})
    answers[alias] = {"rows": frame.to_dict(orient="records"), "flavors": sorted(model.metadata.flavors)}
with open(out, "w", encoding="utf-8") as fh:
    json.dump(answers, fh)
""" % MAX_NEW_TOKENS


def _rows(language: str | None = "en") -> list[dict]:
    rows = [{"context": c, "continuation": x} for c, x in LOGLIKELIHOOD]
    rows += [{"prompt": p} for p in PROMPTS] + [{"sentence": s} for s in SENTENCES]
    return [{**r, "language": language} if language else r for r in rows]


def build_variants(root: Path, tokenizer, model, bert, bert_tokenizer) -> Params:
    """models/base, soft (full, edited), rows (edited-rows overlay), hook (embedding-hook overlay), lora (PEFT
    overlay), bert (masked)."""
    import torch
    from peft import LoraConfig, get_peft_model

    from biaslab.models.embedding_hook import save_hook
    from biaslab.models.embedding_rows import save_rows

    base = root / "models" / "base"
    model.save_pretrained(base)
    tokenizer.save_pretrained(base)
    soft = root / "models" / "soft"
    edited = copy.deepcopy(model)
    with torch.no_grad():
        edited.get_input_embeddings().weight[:50] *= 0.5
    edited.save_pretrained(soft)
    tokenizer.save_pretrained(soft)

    rows = root / "models" / "rows"  # soft's edit of rows 0..49, stored as the rows (embedding_apply: rows)
    rows.mkdir(parents=True)
    weight = edited.get_input_embeddings().weight.detach()
    save_rows(rows, row_ids=range(50), rows=weight[:50], embedding_tensor="model.embed_tokens.weight",
              vocab_rows=weight.shape[0], untie_output_head=False)
    (rows / "variant.json").write_text(json.dumps({"base": "models/base", "method": "embedding", "apply": "rows"}))

    hook = root / "models" / "hook"
    hook.mkdir(parents=True)
    dim = model.get_input_embeddings().weight.shape[1]
    basis = torch.nn.functional.normalize(torch.randn(1, dim, generator=torch.Generator().manual_seed(1)), dim=1)
    targets = [tokenizer.encode(w, add_special_tokens=False) for w in (" doctor", " nurse", " man")]
    save_hook(hook, basis, targets, sorted({i for t in targets for i in t}), len(tokenizer))
    (hook / "variant.json").write_text(json.dumps({"base": "models/base", "method": "embedding"}))

    lora = root / "models" / "lora"
    torch.manual_seed(0)
    peft = get_peft_model(copy.deepcopy(model), LoraConfig(r=2, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                            init_lora_weights=False))
    peft.save_pretrained(lora)
    (lora / "variant.json").write_text(json.dumps({"base": "models/base", "method": "lora"}))

    bert.save_pretrained(root / "models" / "bert")
    bert_tokenizer.save_pretrained(root / "models" / "bert")
    variants = {
        "base": {"method": "none", "model_dir": "models/base"},
        "soft": {"method": "embedding", "model_dir": "models/soft", "embedding_mode": "soft",
                 "embedding_apply": "checkpoint"},
        "rows": {"method": "embedding", "model_dir": "models/rows", "embedding_mode": "soft"},
        "hook": {"method": "embedding", "model_dir": "models/hook", "embedding_mode": "soft",
                 "embedding_apply": "hook"},
        "lora": {"method": "lora", "model_dir": "models/lora"},
        "prompt": {"method": "prompt", "model_dir": "models/base", "prompt_prefix": PREFIX},
        "bert": {"method": "none", "model_dir": "models/bert"},
    }
    return Params.model_validate({
        "variants": variants,
        "registry": {"model_name": MODEL, "gate": []},
        "tracking": {"tracking_uri": f"sqlite:///{root / 'mlflow.db'}", "artifact_location": str(root / "artifacts"),
                     "experiment": "serving"},
    })


@pytest.fixture(scope="module")
def registered(tmp_path_factory, tiny_tokenizer, tiny_causal_model):
    """All variants registered (full models as transformers flavour; ``soft`` again as a byte copy)."""
    import mlflow
    from mlflow import MlflowClient

    from biaslab import registry
    from biaslab.tracking import runs as tracking

    root = tmp_path_factory.mktemp("serving")
    bert, bert_tokenizer = build_tiny_bert()
    params = build_variants(root, tiny_tokenizer, tiny_causal_model, bert, bert_tokenizer)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)
        tracking.configure(params.tracking, root=root)
        versions = {n: r.version for n, r in registry.register_variants(params, root, log=tracking).items()}
        copy_params = params.model_copy(update={"variants": {**params.variants,
                                                             "soft_copy": params.variants["soft"]}})
        versions["soft_copy"] = registry.register_variants(copy_params, root, log=tracking, flavor="artifacts",
                                                           variants=["soft_copy"])["soft_copy"].version
        client = MlflowClient()
        for name, version in versions.items():
            client.set_registered_model_alias(MODEL, f"serve-{name.replace('_', '-')}", version)
        client.set_registered_model_alias(MODEL, "champion", versions["lora"])
        yield root, params, versions, mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(None)


def _fresh_process_predict(root: Path, tracking_uri: str, requests: dict[str, list[dict]]) -> dict:
    out = root / "answers.json"
    env = {**os.environ, "MLFLOW_TRACKING_URI": tracking_uri,
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", LOAD_AND_PREDICT, MODEL, json.dumps(requests), str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(out.read_text(encoding="utf-8"))


def _reference(root: Path, params: Params, variant: str) -> dict:
    """The evaluation path's answers: ``load_variant_model`` + ``make_scorer`` (+ the prompt prefix)."""
    from biaslab.mitigation.prompt import resolve_prompt_prefix
    from biaslab.models.load import load_variant_model, make_scorer
    from biaslab.scoring.requests import Request

    cfg = params.variant(variant)
    loaded = load_variant_model(root / cfg.model_dir, dtype="float32")
    scorer = make_scorer(loaded, params.scoring, prompt_format=params.evaluation.prompt_format)
    prefix = resolve_prompt_prefix(cfg, "en", variant)
    scorer = scorer.with_prefix(prefix) if prefix else scorer
    sentences = [s.logprob for s in scorer.sentence_scores(SENTENCES)]
    if loaded.kind == "masked":
        return {"sentence": sentences}
    return {
        "loglikelihood": [s.logprob for s in scorer.loglikelihood([Request(c, x) for c, x in LOGLIKELIHOOD])],
        "generate": scorer.generate(PROMPTS, max_new_tokens=MAX_NEW_TOKENS),
        "sentence": sentences,
    }


@pytest.mark.slow
def test_every_kind_loads_in_a_fresh_process_and_predicts_like_the_scorer(registered, monkeypatch):
    root, params, versions, tracking_uri = registered
    monkeypatch.chdir(root)  # variant.json names its base relative to the project root, as in the pipeline
    requests = {f"serve-{n.replace('_', '-')}": _rows() for n in CAUSAL}
    requests["serve-bert"] = [{"sentence": s} for s in SENTENCES]
    requests["champion"] = _rows(language=None)
    answers = _fresh_process_predict(root, tracking_uri, requests)

    results = {}
    for variant in (*CAUSAL, "bert"):
        rows = answers[f"serve-{variant.replace('_', '-')}"]["rows"]
        ref = _reference(root, params, "soft" if variant == "soft_copy" else variant)
        by_task = {task: [r for r in rows if r["task"] == task] for task in ("loglikelihood", "generate", "sentence")}
        assert [r["logprob"] for r in by_task["sentence"]] == pytest.approx(ref["sentence"], abs=1e-5), variant
        if variant != "bert":
            assert [r["logprob"] for r in by_task["loglikelihood"]] == pytest.approx(ref["loglikelihood"], abs=1e-5)
            assert [r["generated"] for r in by_task["generate"]] == ref["generate"], variant
            assert all(r["n_tokens"] > 0 for r in by_task["loglikelihood"])
        results[variant] = [r["logprob"] for r in rows if r["logprob"] is not None]
    # each mitigation changes the numbers (the overlay / prefix really was applied)
    for variant in ("soft", "rows", "hook", "lora", "prompt"):
        assert results[variant] != pytest.approx(results["base"], abs=1e-4), variant
    assert results["soft_copy"] == pytest.approx(results["soft"], abs=1e-6)
    assert results["rows"] == results["soft"]  # the same edit, stored as its rows: the same numbers
    # the alias champion (lora) without a language column: same answers
    assert answers["champion"]["rows"] == [{k: v for k, v in r.items()} for r in answers["serve-lora"]["rows"]]
    # full models in the transformers layout keep the transformers flavour next to biaslab's
    assert {"biaslab", "python_function", "transformers"} <= set(answers["serve-base"]["flavors"])


def test_overlays_and_prompts_reference_the_base_instead_of_copying_it(registered):
    from mlflow import MlflowClient

    root, params, versions, _ = registered
    client = MlflowClient()
    base = client.get_model_version(MODEL, versions["base"])
    for variant in ("rows", "hook", "lora", "prompt"):
        mv = client.get_model_version(MODEL, versions[variant])
        local = Path(client.download_artifacts(mv.run_id, f"variant_{variant}", str(root / "dl" / variant)))
        files = {p.name for p in local.rglob("*") if p.is_file()}
        assert "model.safetensors" not in files and "config.json" not in files, (variant, files)
        import yaml

        flavor = yaml.safe_load((local / "MLmodel").read_text())["flavors"]["biaslab"]
        assert flavor["kind"] == ("prompt" if variant == "prompt" else "overlay")
        assert flavor["base"] == {"registered_model": MODEL, "version": versions["base"],
                                  "content_hash": base.tags["content_hash"], "variant": "base",
                                  "manifest_sha256": client.get_run(base.run_id).data.params["manifest_sha256"]}
        assert "python_function" in yaml.safe_load((local / "MLmodel").read_text())["flavors"]
        assert "peft==" in (local / "requirements.txt").read_text() or variant != "lora"


def test_a_base_pin_resolves_by_content_and_refuses_another_base(registered):
    from mlflow import MlflowClient

    from biaslab.serving.base import BaseResolutionError, find_base_version

    _, _, versions, _ = registered
    client = MlflowClient()
    chash = client.get_model_version(MODEL, versions["base"]).tags["content_hash"]
    pin = {"registered_model": MODEL, "version": versions["soft"], "content_hash": chash}
    assert str(find_base_version(client, pin).version) == versions["base"]  # wrong number, right content
    with pytest.raises(BaseResolutionError, match="no version of .* holds content"):
        find_base_version(client, {**pin, "content_hash": "0" * 24})
    # the base's files are checked against the manifest hash the pin records, before anything loads them
    from biaslab.serving.base import resolve_base

    base = client.get_model_version(MODEL, versions["base"])
    pinned = {**pin, "version": versions["base"],
              "manifest_sha256": client.get_run(base.run_id).data.params["manifest_sha256"]}
    assert (resolve_base(pinned, client) / "config.json").is_file()
    with pytest.raises(BaseResolutionError, match="the manifest was rewritten after it was recorded"):
        resolve_base({**pinned, "manifest_sha256": "0" * 64}, client)
    with pytest.raises(BaseResolutionError, match="pinned without its manifest hash"):
        resolve_base({**pinned, "manifest_sha256": None}, client)


def test_a_base_is_checked_and_loaded_from_one_private_copy(registered, tmp_path):
    """Issue 42 (6): on a local store the base is copied into the loader's own folder, and that copy is checked and
    loaded - a file changed in the store after the check is not what loads."""
    from urllib.parse import urlparse

    from mlflow import MlflowClient

    from biaslab.serving.base import resolve_base

    _, _, versions, _ = registered
    client = MlflowClient()
    base = client.get_model_version(MODEL, versions["base"])
    pin = {"registered_model": MODEL, "version": versions["base"], "content_hash": base.tags["content_hash"],
           "manifest_sha256": client.get_run(base.run_id).data.params["manifest_sha256"]}
    checkpoint = resolve_base(pin, client, private_dir=tmp_path)
    assert checkpoint.resolve().is_relative_to(tmp_path.resolve())
    stored = Path(urlparse(client.get_model_version_download_uri(MODEL, versions["base"])).path) / "model" / "config.json"
    original = stored.read_bytes()
    try:
        stored.write_text("{}")  # someone with the store's disk, after the check
        assert (checkpoint / "config.json").read_bytes() == original
    finally:
        stored.write_bytes(original)


def test_bad_requests_are_refused_with_the_row():
    from biaslab.serving.contract import RequestError, parse_requests

    with pytest.raises(RequestError, match="row 1: fill exactly one"):
        parse_requests([{"prompt": "a"}, {"prompt": "b", "sentence": "c"}])
    with pytest.raises(RequestError, match="row 0: context without continuation"):
        parse_requests([{"context": "a", "sentence": "b"}])
    with pytest.raises(RequestError, match="unknown input column"):
        parse_requests([{"text": "a"}])
    assert [r.task for r in parse_requests([{"continuation": " x"}, {"sentence": "y"}])] == ["loglikelihood", "sentence"]


def test_serve_command_resolves_variant_version_and_alias(registered):
    from typer.testing import CliRunner

    from biaslab.cli.main import app

    root, params, versions, tracking_uri = registered
    (root / "params.yaml").write_text(json.dumps(params.model_dump(mode="json")), encoding="utf-8")
    runner = CliRunner()
    for target, version in (("lora", versions["lora"]), (versions["hook"], versions["hook"]),
                            ("serve-lora", versions["lora"])):
        result = runner.invoke(app, ["serve", target, "--print-command", "--root", str(root), "--port", "5123"])
        assert result.exit_code == 0, result.output
        out = " ".join(result.output.split())
        # a checked local copy (files vs its manifest, MLmodel names biaslab's loader), kept for the printed command
        assert f"{MODEL} version {version}: " in out and "models:/" not in out
        local = out.split(" serve -m ")[1].split(" --env-manager local -h 127.0.0.1 -p 5123")[0]
        kept = out.split("the checked copy stays in ")[1].split(" for that command")[0]
        assert Path(local).is_dir() and (Path(local) / "MLmodel").is_file() and local.startswith(kept)
        assert "curl -s http://127.0.0.1:5123/invocations" in result.output
        shutil.rmtree(kept)
    missing = runner.invoke(app, ["serve", "nope", "--print-command", "--root", str(root)])
    assert missing.exit_code == 2 and "no variant of params.yaml" in missing.output
    # `champion` is the champion model's (a champion alias on the candidates is not served)
    none = runner.invoke(app, ["serve", "champion", "--print-command", "--root", str(root)])
    assert none.exit_code == 2 and f"no @champion on {params.registry.champion_model}" in none.output


@pytest.mark.slow
def test_mlflow_models_serve_on_loopback_answers_the_contract(registered):
    """A real ``mlflow models serve`` of @champion (the LoRA overlay): /invocations equals the scorer."""
    import signal
    import socket
    import time
    import urllib.request

    from biaslab.cli.serve import example_request, serve_command, serve_env

    root, params, versions, tracking_uri = registered
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = serve_env(os.environ, MLFLOW_TRACKING_URI=tracking_uri,
                    PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"),
                                                os.environ.get("PYTHONPATH", "")]))
    log = (root / "serve.log").open("w")
    server = subprocess.Popen(serve_command(f"models:/{MODEL}@champion", "127.0.0.1", port), env=env,
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert server.poll() is None, (root / "serve.log").read_text()[-4000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "server did not answer /ping in 300 s"
            time.sleep(1)
        body = json.dumps(example_request()).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/invocations", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as reply:
            rows = json.loads(reply.read())["predictions"]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        log.close()

    from biaslab.models.load import load_variant_model, make_scorer
    from biaslab.scoring.requests import Request

    cwd = os.getcwd()
    os.chdir(root)
    try:
        scorer = make_scorer(load_variant_model(root / "models" / "lora", dtype="float32"), params.scoring)
    finally:
        os.chdir(cwd)
    records = example_request()["dataframe_records"]
    expected = scorer.loglikelihood([Request(r["context"], r["continuation"]) for r in records[:2]])
    assert [r["logprob"] for r in rows[:2]] == pytest.approx([s.logprob for s in expected], abs=1e-5)
    assert rows[2]["generated"] == scorer.generate([records[2]["prompt"]], max_new_tokens=10)[0]


def test_an_overlay_registered_alone_pins_the_registered_base(registered):
    import shutil

    import yaml
    from mlflow import MlflowClient

    from biaslab import registry

    root, params, versions, _ = registered
    shutil.copytree(root / "models" / "hook", root / "models" / "hook_alone")
    alone = params.variants["hook"].model_copy(update={"model_dir": "models/hook_alone"})
    params = params.model_copy(update={"variants": {**params.variants, "hook_alone": alone}})
    reg = registry.register_variants(params, root, log=tracking, variants=["hook_alone"])["hook_alone"]
    client = MlflowClient()
    local = Path(client.download_artifacts(reg.run_id, "variant_hook_alone", str(root / "dl" / "alone")))
    pin = yaml.safe_load((local / "MLmodel").read_text())["flavors"]["biaslab"]["base"]
    assert pin["version"] == versions["base"] and pin["variant"] == "base"
    assert pin["content_hash"] == client.get_model_version(MODEL, versions["base"]).tags["content_hash"]


def test_scoring_settings_recorded_at_registration_are_the_served_ones(registered):
    """``scoring.add_bos: true`` changes the numbers; a version registered with it is a new version and serves them."""
    import mlflow.pyfunc
    import pandas as pd

    from biaslab import registry
    from biaslab.models.load import load_model, make_scorer
    from biaslab.scoring.requests import Request

    root, params, versions, _ = registered
    with_bos = params.model_copy(update={"scoring": params.scoring.model_copy(update={"add_bos": True})})
    reg = registry.register_variants(with_bos, root, log=tracking, variants=["base"])["base"]
    assert not reg.reused and reg.version != versions["base"]  # the settings are part of the content hash
    served = mlflow.pyfunc.load_model(f"models:/{MODEL}/{reg.version}").predict(
        pd.DataFrame({"context": [c for c, _ in LOGLIKELIHOOD], "continuation": [x for _, x in LOGLIKELIHOOD]}))
    requests = [Request(c, x) for c, x in LOGLIKELIHOOD]
    loaded = load_model(root / "models" / "base", dtype="float32")
    bos = [s.logprob for s in make_scorer(loaded, with_bos.scoring).loglikelihood(requests)]
    auto = [s.logprob for s in make_scorer(loaded, params.scoring).loglikelihood(requests)]
    assert list(served["logprob"]) == pytest.approx(bos, abs=1e-5)
    assert bos != pytest.approx(auto, abs=1e-4)


def test_a_full_package_loads_without_a_registry_and_honours_the_device_map(tmp_path, tiny_tokenizer, tiny_causal_model,
                                                                             monkeypatch):
    """The loader needs only the package for a full model; ``model.device_map`` goes to the model loader."""
    import shutil

    from biaslab.models import load as models
    from biaslab.models.load import load_model, make_scorer
    from biaslab.registry import VariantSource
    from biaslab.scoring.requests import Request
    from biaslab.serving.loader import load_served_variant
    from biaslab.serving.manifest import write_manifest
    from biaslab.serving.package import package_servable
    from biaslab.serving.settings import ServingSettings

    checkpoint = tmp_path / "checkpoint"
    tiny_causal_model.save_pretrained(checkpoint)
    tiny_tokenizer.save_pretrained(checkpoint)
    package = tmp_path / "package"
    shutil.copytree(checkpoint, package)
    src = VariantSource("base", "none", "full", checkpoint)
    package_servable(package, src, flavor="artifacts", base_reference=None, model_name=MODEL,
                     settings=ServingSettings(device_map="cpu"), prompt_prefix={})
    write_manifest(package)
    calls = []
    monkeypatch.setattr(models, "load_model", lambda *a, **kw: calls.append(kw) or load_model(*a, **kw))
    served = load_served_variant(package)
    assert calls[0]["device_map"] == "cpu" and calls[0]["dtype"] == "float32"
    rows = served.predict([{"context": c, "continuation": x} for c, x in LOGLIKELIHOOD])
    reference = make_scorer(load_model(checkpoint, dtype="float32")).loglikelihood(
        [Request(c, x) for c, x in LOGLIKELIHOOD])
    assert list(rows["logprob"]) == pytest.approx([s.logprob for s in reference], abs=1e-5)


def test_the_serve_environment_finds_this_environments_uvicorn():
    """MLflow runs ``exec uvicorn`` through the shell: this interpreter's bin comes first on PATH, even when the
    virtualenv is not activated (``.venv/bin/biaslab serve``, ``make test``)."""
    import sys

    from biaslab.cli.serve import serve_env

    bin_dir = str(Path(sys.executable).parent)
    env = serve_env({"PATH": "/usr/bin:/bin", "KEEP": "1"}, MLFLOW_TRACKING_URI="sqlite:///x.db")
    assert env["PATH"].split(os.pathsep) == [bin_dir, "/usr/bin", "/bin"]
    assert env["KEEP"] == "1" and env["MLFLOW_TRACKING_URI"] == "sqlite:///x.db"
    assert serve_env({})["PATH"] == bin_dir
    assert (Path(bin_dir) / "uvicorn").exists()  # what mlflow's scoring server is started with
