"""The team server on loopback: MLflow's basic-auth app on PostgreSQL, set up as docker-compose.yml sets it up.

One authenticated ``mlflow server`` per module (tracking store and auth store in two databases of the
throwaway PostgreSQL cluster; skipped with an install hint without the server binaries). The admin runs
``biaslab team setup`` as the compose ``init`` service does, creating the shared resources and the users
``worker`` and ``promoter``; then each identity does what its role does, from its own process with its
credentials in ``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD``:

* no credentials, or wrong ones: refused (401), and biaslab says which variables to set;
* a foreign ``Host`` header or a cross-origin write: refused by MLflow's security middleware;
* the worker logs runs and creates model versions, but may not write to the promotions experiment, delete
  versions, or manage users: each refusal is one line naming the user, resource and permission;
* the promoter promotes through the gate (its record lands in the promotions experiment); MLflow cannot stop
  the worker from moving ``champion`` (no per-alias permission), and ``biaslab promote --verify`` flags it;
* the password never appears in anything stored or printed.

The compose file's db-setup SQL is run against the cluster too: Optuna's role can use its database and
cannot open MLflow's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from tracking_server import AuthSettings, running_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ADMIN_PASSWORD = "admin-" + uuid.uuid4().hex  # fresh per run: these are what the secret scans look for
PASSWORDS = {"worker": "worker-" + uuid.uuid4().hex, "promoter": "promoter-" + uuid.uuid4().hex,
             "evaluator": "evaluator-" + uuid.uuid4().hex}
MODEL, EXPERIMENT, PROMOTIONS, EVALUATIONS = "team-model", "team-runs", "team-promotions", "team-evaluations"
CHAMPION_MODEL = "team-champion"
PARAMS = {"tracking": {"experiment": EXPERIMENT},
          "variants": {"base": {"method": "none", "model_dir": "models/base"},
                       "soft": {"method": "embedding", "model_dir": "models/soft", "embedding_mode": "soft",
                                "embedding_apply": "checkpoint"}},
          "registry": {"model_name": MODEL, "promotions_experiment": PROMOTIONS, "champion_model": CHAMPION_MODEL,
                       "evaluations_experiment": EVALUATIONS,
                       "gate": [{"metric": "bench/bias", "rule": "better_than_base_beyond_ci"}]}}


@pytest.fixture(scope="module")
def team_server(postgres_cluster, tmp_path_factory):
    """(url, project dir): an authenticated server, its resources and users created by `biaslab team setup`."""
    suffix = uuid.uuid4().hex[:8]
    databases = [f"team_mlflow_{suffix}", f"team_auth_{suffix}"]
    for database in databases:
        postgres_cluster.execute(f'CREATE DATABASE "{database}"')
    workdir = tmp_path_factory.mktemp("team-server")
    project = workdir / "project"
    project.mkdir()
    (project / "params.yaml").write_text(yaml.safe_dump(PARAMS), encoding="utf-8")
    auth = AuthSettings(database_uri=postgres_cluster.url(databases[1]), admin_password=ADMIN_PASSWORD)
    try:
        with running_server(workdir / "server", postgres_cluster.url(databases[0]), auth=auth) as url:
            for user in ("worker", "promoter", "evaluator"):
                done = biaslab(url, "admin", ADMIN_PASSWORD, project, "team", "setup", "--user", user, "--role", user,
                               "--password-env", "NEW_USER_PASSWORD", extra_env={"NEW_USER_PASSWORD": PASSWORDS[user]})
                assert done.returncode == 0, done.stderr
                assert f"user '{user}' (created), role {user}" in done.stdout
            yield url, project
    finally:
        for database in databases:
            postgres_cluster.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def _env(url: str, user: str | None, password: str | None, project: Path,
         extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_TRACKING_")}
    # HOME: no ~/.mlflow/credentials of the machine's user stands in for the identity under test
    env |= {"MLFLOW_TRACKING_URI": url, "HOME": str(project), **(extra or {})}
    if user is not None:
        env |= {"MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": password}
    return env


def biaslab(url, user, password, project, *args, extra_env=None) -> subprocess.CompletedProcess:
    """``biaslab <args>`` in ``project`` as ``user``."""
    return subprocess.run([sys.executable, "-m", "biaslab.cli.main", *args], cwd=project, capture_output=True, text=True,
                          env=_env(url, user, password, project, extra_env), timeout=300)


def python_as(url, user, password, project, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True,
                          env=_env(url, user, password, project), timeout=300)


LOG_A_RUN = f"""
from biaslab.tracking import runs as tracking
from biaslab.config import TrackingConfig
tracking.configure(TrackingConfig(experiment={EXPERIMENT!r}))
with tracking.stage_run("evaluate", variant="base") as run:
    tracking.log_params({{"note": "a run of the worker"}})
    tracking.log_metric("score", 0.5)
    tracking.log_dict({{"ok": True}}, "result.json")
print(run.info.run_id)
"""


def _post(url: str, path: str, body: dict, *, auth: tuple[str, str] | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, str]:
    import base64

    request = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    if auth is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# ------------------------------------------------------------------------------------------------ who you are
def test_an_unauthenticated_request_is_refused(team_server):
    url, project = team_server
    status, body = _post(url, "/api/2.0/mlflow/experiments/search", {"max_results": 1})
    assert status == 401 and "not authenticated" in body
    status, _ = _post(url, "/api/2.0/mlflow/experiments/search", {"max_results": 1}, auth=("worker", "wrong-password"))
    assert status == 401
    status, _ = _post(url, "/api/2.0/mlflow/experiments/search", {"max_results": 1},
                      auth=("worker", PASSWORDS["worker"]))
    assert status == 200

    anonymous = python_as(url, None, None, project, LOG_A_RUN)
    assert anonymous.returncode != 0
    assert anonymous.stderr.strip().splitlines()[-1].endswith(
        f"not authenticated on {url}: no credentials: set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD "
        "(or MLFLOW_TRACKING_TOKEN)")
    wrong = python_as(url, "worker", "not-the-password", project, LOG_A_RUN)
    assert wrong.returncode != 0
    assert "the server does not accept the credentials of user 'worker'" in wrong.stderr.strip().splitlines()[-1]


def test_foreign_hosts_and_cross_origin_writes_are_refused(team_server):
    url, _ = team_server
    admin = ("admin", ADMIN_PASSWORD)
    status, body = _post(url, "/api/2.0/mlflow/experiments/search", {"max_results": 1}, auth=admin,
                         headers={"Host": "attacker.example:5000"})  # DNS rebinding
    assert status == 403 and "Invalid Host header" in body
    status, _ = _post(url, "/api/2.0/mlflow/experiments/search", {"max_results": 1}, auth=admin,
                      headers={"Host": "mlflow:5000"})  # the workers' Host header inside compose
    assert status == 200
    status, body = _post(url, "/api/2.0/mlflow/experiments/create", {"name": "from-a-web-page"}, auth=admin,
                         headers={"Origin": "https://attacker.example"})
    assert status == 403 and "Cross-origin request blocked" in body
    with urllib.request.urlopen(f"{url}/health", timeout=30) as response:
        assert response.headers["X-Frame-Options"] == "SAMEORIGIN"


# ------------------------------------------------------------------------------------------------ the worker
def test_the_worker_logs_runs_and_creates_versions_but_writes_nothing_else(team_server):
    url, project = team_server
    done = python_as(url, "worker", PASSWORDS["worker"], project, LOG_A_RUN)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip().splitlines()[-1]

    create_version = f"""
from mlflow import MlflowClient
client = MlflowClient()
mv = client.create_model_version({MODEL!r}, "runs:/{run_id}/result.json", run_id={run_id!r})
client.set_registered_model_alias({MODEL!r}, "candidate", mv.version)
print(mv.version)
"""
    done = python_as(url, "worker", PASSWORDS["worker"], project, create_version)
    assert done.returncode == 0, done.stderr

    # the promotions experiment: readable, not writable (the record of the gate cannot be forged)
    write_a_record = LOG_A_RUN.replace(repr(EXPERIMENT), repr(PROMOTIONS))
    refused = python_as(url, "worker", PASSWORDS["worker"], project, write_a_record)
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1].endswith(
        f"user 'worker' may not create runs in experiment '{PROMOTIONS}' on {url}: that needs EDIT on it "
        "(an admin grants it; README \"Team server\")")

    delete = f"""
from biaslab.tracking import access
from mlflow import MlflowClient
access.name_resources(registered_model={MODEL!r})
with access.refusals():
    MlflowClient().delete_model_version({MODEL!r}, "1")
"""
    refused = python_as(url, "worker", PASSWORDS["worker"], project, delete)
    assert refused.returncode != 0
    assert f"user 'worker' may not delete registered model '{MODEL}' on {url}: that needs MANAGE on it" in refused.stderr


# ------------------------------------------------------------------------------------------------ the promoter
EVALUATE_AS_EVALUATOR = """
from biaslab.config import TrackingConfig, load_params
from biaslab.metrics.values import MetricValue
from biaslab.outputs import metrics_file
from biaslab.outputs.variant_dir import fingerprint_dir
from biaslab.tracking import runs as tracking
params = load_params("params.yaml")
tracking.configure(TrackingConfig(experiment=params.registry.evaluations_experiment))
for variant, (value, lo, hi) in {"base": (0.30, 0.28, 0.32), "soft": (0.10, 0.08, 0.12)}.items():
    values = {"bench/bias": MetricValue(value, "lower", ideal=0.0, ci_low=lo, ci_high=hi, n=100)}
    fingerprint = fingerprint_dir(f"models/{variant}")
    with tracking.stage_run("evaluate", variant=variant, tags={"model_fingerprint": fingerprint}) as run:
        tracking.log_metric_values(values)
        tracking.bind_evidence(variant, fingerprint, [])  # as pipelines/evaluate.py does, last in the run
    metrics_file.write(".", variant, values, model_fingerprint=fingerprint, model_dir=f"models/{variant}",
                       run_id=run.info.run_id)
"""

REGISTER_AS_WORKER = """
import json
from biaslab.config import load_params
from biaslab.registry import register_variants, write_register_json
from biaslab.tracking import runs as tracking
params = load_params("params.yaml")
tracking.configure(params.tracking)
with tracking.stage_run("register"):
    result = register_variants(params, ".", log=tracking, flavor="artifacts")
write_register_json(result, params.registry.model_name, "runs/register.json")
print(json.dumps({n: {"version": r.version, "run_id": r.run_id} for n, r in result.items()}))
"""


@pytest.fixture(scope="module")
def registered(team_server, tiny_tokenizer, tiny_causal_model):
    """(url, project, {variant: {version, run_id}, "promoted": output}): base and soft evaluated by the evaluator,
    registered by the worker, soft promoted by the promoter."""
    import torch

    url, project = team_server
    tiny_causal_model.save_pretrained(project / "models" / "base")
    tiny_tokenizer.save_pretrained(project / "models" / "base")
    state = {k: v.clone() for k, v in tiny_causal_model.state_dict().items()}
    with torch.no_grad():
        tiny_causal_model.get_input_embeddings().weight[3] += 0.5
        tiny_causal_model.save_pretrained(project / "models" / "soft")
        tiny_causal_model.load_state_dict(state)
    tiny_tokenizer.save_pretrained(project / "models" / "soft")
    done = python_as(url, "evaluator", PASSWORDS["evaluator"], project, EVALUATE_AS_EVALUATOR)
    assert done.returncode == 0, done.stderr
    done = python_as(url, "worker", PASSWORDS["worker"], project, REGISTER_AS_WORKER)
    assert done.returncode == 0, done.stderr
    versions = json.loads(done.stdout.strip().splitlines()[-1])
    promoted = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft")
    assert promoted.returncode == 0, promoted.stdout + promoted.stderr
    return url, project, {**versions, "promoted": _one_line(promoted)}


def _as_worker(url, project, code: str) -> subprocess.CompletedProcess:
    return python_as(url, "worker", PASSWORDS["worker"], project, code)


def _one_line(done: subprocess.CompletedProcess) -> str:
    return " ".join((done.stdout + done.stderr).split())  # the console may wrap a message


def test_the_promoter_promotes_a_copy_the_worker_cannot_overwrite(registered):
    """(a) Overwrite after approval: the worker rewrites the approved version's files in its own run; the champion
    is the promoter's copy, which the worker can neither overwrite nor replace; the gate refuses the rewritten
    version, naming the file."""
    url, project, versions = registered
    soft = versions["soft"]
    # the worker cannot run the gate: its record would go where only promoters write
    refused = biaslab(url, "worker", PASSWORDS["worker"], project, "promote", "soft")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert (f"error: user 'worker' may not create runs in experiment '{PROMOTIONS}' on {url}: that needs EDIT on it "
            "(an admin grants it; README \"Team server\")") in _one_line(refused)

    assert f"{MODEL} version {soft['version']} copied to {CHAMPION_MODEL} version 1, now @champion" \
        in versions["promoted"]
    verified = biaslab(url, "worker", PASSWORDS["worker"], project, "promote", "--verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert (f"{CHAMPION_MODEL}@champion = version 1 (variant soft, copied from {MODEL} version {soft['version']}); "
            "gate record: run ") in _one_line(verified)
    assert "every file's sha256 recomputed matches the promoter's manifest" in _one_line(verified)

    # the worker re-uploads the approved version's config.json into its own run: MLflow lets it
    overwrite = f"""
import pathlib, tempfile
from mlflow import MlflowClient
folder = pathlib.Path(tempfile.mkdtemp())
(folder / "config.json").write_text('{{"model_type": "llama", "auto_map": {{"AutoModelForCausalLM": "evil.Model"}}}}')
MlflowClient().log_artifact({soft['run_id']!r}, str(folder / "config.json"), "variant_soft")
"""
    done = _as_worker(url, project, overwrite)
    assert done.returncode == 0, done.stderr
    # ... but the champion is another copy: still verified, and served only after the same check
    assert biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "--verify").returncode == 0
    served = biaslab(url, "worker", PASSWORDS["worker"], project, "serve", "champion", "--print-command")
    assert served.returncode == 0, served.stdout + served.stderr
    assert f"{CHAMPION_MODEL} version 1:" in served.stdout and "--env-manager local" in served.stdout
    # the gate refuses the rewritten version, naming the file
    again = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft")
    assert again.returncode == 1
    assert "config.json changed" in _one_line(again) and "refused:" in again.stdout
    # that refusal is now the newest record of the registration the champion came from: --verify says so, while
    # the champion's own files still match the promoter's manifest
    flagged = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "--verify")
    assert flagged.returncode == 1
    assert f"FLAGGED: the newest gate record of {MODEL} version {soft['version']} (" in _one_line(flagged)
    assert "files differ" not in _one_line(flagged)

    # the champion itself: the worker may not write it in any way
    attempts = {
        "upload into the gate record's copy": (
            f"MlflowClient().log_artifact({{record!r}}, __file__, 'champion')", f"experiment '{PROMOTIONS}'", "EDIT"),
        "add a version": (f"MlflowClient().create_model_version({CHAMPION_MODEL!r}, 'runs:/{soft['run_id']}/variant_soft', "
                          f"run_id={soft['run_id']!r})", f"registered model '{CHAMPION_MODEL}'", "EDIT"),
        "move the alias": (f"MlflowClient().set_registered_model_alias({CHAMPION_MODEL!r}, 'champion', '1')",
                           f"registered model '{CHAMPION_MODEL}'", "EDIT"),
    }
    record = _record_run(url, project)
    for what, (call, resource, permission) in attempts.items():
        code = f"""
import sys
from mlflow import MlflowClient
from biaslab.tracking import access
__file__ = sys.executable
access.name_resources(experiment={PROMOTIONS!r}, registered_model={CHAMPION_MODEL!r})
with access.refusals():
    {call.format(record=record)}
"""
        refused = _as_worker(url, project, code)
        assert refused.returncode != 0, what
        assert f"user 'worker' may not" in refused.stderr and resource in refused.stderr, (what, refused.stderr[-500:])
        assert f"that needs {permission} on it" in refused.stderr, what


def _record_run(url, project) -> str:
    code = (f"from mlflow import MlflowClient; "
            f"print(MlflowClient().get_model_version_by_alias({CHAMPION_MODEL!r}, 'champion').run_id)")
    done = _as_worker(url, project, code)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_the_gate_judges_only_the_registered_version(registered, tmp_path):
    """(b) No runs/register.json, a changed variant tag, a fingerprint tag the worker wrote, a version made by
    hand: the gate never judges a version the register stage did not record for that variant."""
    url, project, versions = registered
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    shutil.copy(project / "params.yaml", fresh / "params.yaml")
    refused = biaslab(url, "promoter", PASSWORDS["promoter"], fresh, "promote", "soft")
    assert refused.returncode == 2
    assert "runs/register.json does not list it" in _one_line(refused)  # no "newest version tagged soft"

    base, soft = versions["base"], versions["soft"]
    register_json = project / "runs" / "register.json"
    honest = register_json.read_text()
    forge = f"""
import json
from mlflow import MlflowClient
client = MlflowClient()
client.set_model_version_tag({MODEL!r}, {base['version']!r}, "variant", "soft")
client.set_model_version_tag({MODEL!r}, {base['version']!r}, "model_fingerprint", "forged")
soft = client.get_model_version({MODEL!r}, {soft['version']!r})
from biaslab.tracking import runs as tracking
from biaslab.config import TrackingConfig
tracking.configure(TrackingConfig(experiment={EXPERIMENT!r}))
with tracking.stage_run("register", variant="soft") as run:  # its own files, no registration params
    tracking.log_dict({{"variant": "soft"}}, "variant_soft/variant.json")
by_hand = client.create_model_version({MODEL!r}, f"{{run.info.artifact_uri}}/variant_soft", run_id=run.info.run_id,
                                      tags=soft.tags)
print(by_hand.version)
"""
    done = _as_worker(url, project, forge)
    assert done.returncode == 0, done.stderr
    by_hand = done.stdout.strip().splitlines()[-1]
    try:
        body = json.loads(honest)
        register_json.write_text(json.dumps({**body, "versions": {**body["versions"], "soft": base["version"]}}))
        refused = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft")
        assert refused.returncode == 2
        assert (f"{MODEL} version {base['version']} was registered for variant 'base', not 'soft' (its run's param; "
                "the tag says 'soft'); refusing to promote it") in _one_line(refused)
        register_json.write_text(json.dumps({**body, "versions": {**body["versions"], "soft": by_hand}}))
        refused = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft")
        assert refused.returncode == 2
        assert f"{MODEL} version {by_hand} was not created by the register stage" in _one_line(refused)
    finally:
        register_json.write_text(honest)
    # MLflow refuses to change the params the gate reads, for the worker as for anyone
    rewrite = f"from mlflow import MlflowClient; MlflowClient().log_param({base['run_id']!r}, 'variant', 'soft')"
    done = _as_worker(url, project, rewrite)
    assert done.returncode != 0 and "Changing param values is not allowed" in done.stderr


def test_renaming_and_recreating_the_model_does_not_swap_the_champion(registered):
    """(c) The worker renames the candidates away, recreates the name, copies every earlier version and puts at the
    approved version's number a look-alike from a run of its own - other weights, its own manifest, params copied
    from the approved registration, the approved version's tags: the champion model is untouched and still verified, renaming it is refused,
    and the gate refuses the look-alike (its checkpoint is not the weights the evaluate run measured)."""
    url, project, versions = registered
    soft = versions["soft"]
    swap = f"""
import shutil, tempfile
from mlflow import MlflowClient
from biaslab.config import TrackingConfig
from biaslab.serving.manifest import write_manifest
from biaslab.tracking import runs as tracking
client = MlflowClient()
approved = client.get_model_version({MODEL!r}, {soft['version']!r})
registration = client.get_run(approved.run_id).data.params
client.rename_registered_model({MODEL!r}, {MODEL + '-moved'!r})
client.create_registered_model({MODEL!r})
package = tempfile.mkdtemp() + "/variant_soft"
shutil.copytree(client.download_artifacts(approved.run_id, "variant_soft", tempfile.mkdtemp()), package)
shutil.copy("models/base/model.safetensors", package + "/model.safetensors")  # the worker's own weights
tracking.configure(TrackingConfig(experiment={EXPERIMENT!r}))
with tracking.stage_run("register", variant="soft") as run:
    manifest = write_manifest(package, variant="soft", content_hash=registration["content_hash"])
    tracking.log_params({{**registration, "manifest_sha256": manifest}})
    tracking.log_artifact(package, "variant_soft")
for number in range(1, int(approved.version) + 1):  # every earlier version faithfully, the approved one swapped
    old = client.get_model_version({MODEL + '-moved'!r}, str(number))
    if number < int(approved.version):
        mv = client.create_model_version({MODEL!r}, old.source, run_id=old.run_id, tags=old.tags)
    else:
        mv = client.create_model_version({MODEL!r}, f"{{run.info.artifact_uri}}/variant_soft",
                                         run_id=run.info.run_id, tags=approved.tags)
print(mv.version)
"""
    done = _as_worker(url, project, swap)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == soft["version"]
    rename = f"""
from mlflow import MlflowClient
from biaslab.tracking import access
access.name_resources(registered_model={CHAMPION_MODEL!r})
with access.refusals():
    MlflowClient().rename_registered_model({CHAMPION_MODEL!r}, "elsewhere")
"""
    refused = _as_worker(url, project, rename)
    assert refused.returncode != 0
    assert (f"user 'worker' may not change registered model '{CHAMPION_MODEL}' on {url}: that needs EDIT on it"
            in refused.stderr)
    def champion_untouched() -> None:  # (a refusal recorded by the overwrite test may flag it; never its files)
        verified = _one_line(biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "--verify"))
        assert f"{CHAMPION_MODEL}@champion = version 1 (variant soft, copied from {MODEL} version " in verified
        assert "files differ" not in verified and "no gate record" not in verified

    champion_untouched()
    # the look-alike of the same number: the gate fingerprints its files and refuses it
    again = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft")
    assert again.returncode == 1, again.stdout + again.stderr
    assert "not the evaluated weights" in _one_line(again) and "refused:" in again.stdout
    # the recreated model is the worker's: the promoter's grant went with the renamed one, and it is told
    assert f"note: the decision's promotion.* tags were not written: user 'promoter' may not tag versions of " \
           f"registered model '{MODEL}'" in _one_line(again)
    champion_untouched()


WORKER_REGISTERS = """
import json, pathlib, shutil, tempfile
from mlflow import MlflowClient
from biaslab.config import TrackingConfig
from biaslab.serving.manifest import write_manifest
from biaslab.tracking import runs as tracking
client = MlflowClient()
approved = client.get_model_version({model!r}, {version!r})
registration = dict(client.get_run(approved.run_id).data.params)
package = pathlib.Path(tempfile.mkdtemp()) / "variant_{variant}"
shutil.copytree(client.download_artifacts(approved.run_id, "variant_{variant}", tempfile.mkdtemp()), package)
{edit}
tracking.configure(TrackingConfig(experiment={experiment!r}))
with tracking.stage_run("register", variant="{variant}") as run:
    (package / "biaslab_manifest.json").unlink()
    manifest = write_manifest(package, variant="{variant}", content_hash=registration["content_hash"])
    tracking.log_params({{**registration, "manifest_sha256": manifest}})
    tracking.log_artifact(str(package), "variant_{variant}")
mv = client.create_model_version({model!r}, f"{{run.info.artifact_uri}}/variant_{variant}", run_id=run.info.run_id,
                                 tags=approved.tags)
print(mv.version)
"""


def _worker_registers(url, project, soft_version: str, edit: str, variant: str = "soft") -> str:
    """The worker's own version of ``variant``: the registered package ``soft_version`` edited by ``edit`` (python
    acting on ``package`` and ``registration``), a manifest it writes itself, that registration's params otherwise;
    returns its number."""
    code = WORKER_REGISTERS.format(model=MODEL, version=soft_version, experiment=EXPERIMENT, edit=edit,
                                   variant=variant)
    done = _as_worker(url, project, code)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_a_worker_set_kind_does_not_switch_off_the_bytes_check(registered):
    """Attack 1: other weights registered with ``kind=overlay`` and soft's real evaluation: the promoter derives
    the kind from params.yaml (soft is an embedding edit applied as a checkpoint: full), so the kind the worker
    logged is refused and the checkpoint is fingerprinted anyway."""
    url, project, versions = registered
    edit = ('shutil.copy("models/base/model.safetensors", package / "model.safetensors")\n'
            'registration["kind"] = "overlay"')
    version = _worker_registers(url, project, versions["soft"]["version"], edit)
    refused = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft", "--version", version)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    line = _one_line(refused)
    assert "refused:" in refused.stdout and "kind 'overlay'" in line and "not the evaluated weights" in line


EVIL_LOADER = '''import yaml
mlmodel = yaml.safe_load((package / "MLmodel").read_text())
mlmodel["flavors"]["python_function"].update(loader_module="evil", code=".code")
(package / "MLmodel").write_text(yaml.safe_dump(mlmodel))
(package / ".code").mkdir()  # hidden: outside the checkpoint fingerprint
(package / ".code" / "evil.py").write_text("def _load_pyfunc(path):\\n    raise SystemExit('the worker ran')\\n")'''


def test_a_package_with_its_own_loader_and_code_is_refused(registered):
    """Attack 2: the honest checkpoint with ``python_function: {loader_module: evil, code: code}`` and
    ``.code/evil.py`` (hidden: outside the checkpoint fingerprint): the promoter refuses an MLmodel that is not biaslab's loader (and its copy never holds it)."""
    url, project, versions = registered
    version = _worker_registers(url, project, versions["soft"]["version"], EVIL_LOADER)
    refused = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft", "--version", version)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    line = _one_line(refused)
    assert "refused:" in refused.stdout and "loader_module 'evil'" in line and "code" in line


FAKE_EVALUATION = """
from biaslab.config import TrackingConfig
from biaslab.metrics.values import MetricValue
from biaslab.outputs.variant_dir import fingerprint_dir
from biaslab.tracking import runs as tracking
tracking.configure(TrackingConfig(experiment={experiment!r}))
values = {{"bench/bias": MetricValue({value}, "lower", ideal=0.0, ci_low={value} - 0.01, ci_high={value} + 0.01, n=100)}}
fingerprint = fingerprint_dir("models/{variant}")
with tracking.stage_run("evaluate", variant="{variant}", tags={{"model_fingerprint": fingerprint}}) as run:
    tracking.log_metric_values(values)
    tracking.bind_evidence("{variant}", fingerprint, [])  # it can log the binding params too: in its own run
print(run.info.run_id)
"""


def _fake_evaluation(url, project, variant: str, value: float, experiment: str = EXPERIMENT):
    return _as_worker(url, project, FAKE_EVALUATION.format(experiment=experiment, variant=variant, value=value))


def test_a_worker_created_evaluate_run_is_no_evidence(registered):
    """Item 1: the worker may not write the evaluations experiment; an evaluate run of its own (made-up metrics,
    binding params it computed itself) named by a registration of soft's honest files is refused."""
    url, project, versions = registered
    refused = _fake_evaluation(url, project, "soft", 0.01, experiment=EVALUATIONS)
    assert refused.returncode != 0 and f"user 'worker' may not create runs in experiment '{EVALUATIONS}'" in refused.stderr
    done = _fake_evaluation(url, project, "soft", 0.01)
    assert done.returncode == 0, done.stderr
    fake = done.stdout.strip().splitlines()[-1]
    version = _worker_registers(url, project, versions["soft"]["version"], f'registration["evaluate_run_id"] = {fake!r}')
    again = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft", "--version", version)
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"evaluate run {fake} of 'soft' is in experiment" in _one_line(again)
    assert f"not the evaluations experiment '{EVALUATIONS}'" in _one_line(again)


def test_forged_base_evidence_is_refused(registered):
    """Item 1: an evaluate run of the worker's own that makes the base look bad, named as the base's evidence -
    by the variant's registration (``evidence_base_run_id``, the base run the gate reads) or, when that names
    none, by a base version the worker registered again: the gate refuses the base's evidence as it refuses a
    variant's."""
    url, project, versions = registered
    done = _fake_evaluation(url, project, "base", 0.90)
    assert done.returncode == 0, done.stderr
    fake = done.stdout.strip().splitlines()[-1]
    soft = _worker_registers(url, project, versions["soft"]["version"],
                             f'registration["evidence_base_run_id"] = {fake!r}')
    again = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft", "--version", soft)
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"evaluate run {fake} of 'base' is in experiment" in _one_line(again)
    base = _worker_registers(url, project, versions["base"]["version"], f'registration["evaluate_run_id"] = {fake!r}',
                             variant="base")
    soft = _worker_registers(url, project, versions["soft"]["version"], 'registration.pop("evidence_base_run_id", None)')
    again = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft",
                    "--version", soft, "--base-version", base)
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"evaluate run {fake} of 'base' is in experiment" in _one_line(again)


FORGED_TABLE = """
from biaslab.benchmarks.agreement.items import load_pairs
pairs = load_pairs()
table = pairs[(pairs["split"] == "test") & (pairs["language"] == "en")].head(8).assign(
    method="loglikelihood", logprob_grammatical=-1.0, logprob_ungrammatical=-2.0, n_grammatical=4, n_ungrammatical=4,
    margin=1.0, correct=1)  # a model that always prefers grammar: made up, never scored
"""


def test_forged_tables_with_a_leaked_evaluator_credential_are_refused(registered):
    """Item 1 on top: with the evaluator's credential (leaked) a new, self-consistent evaluate run of soft in the
    evaluations experiment - made-up metrics and an agreement table never scored, bound by its own params - passes
    every evidence check; the promoter re-scores a sample of its rows from soft's verified files and refuses."""
    url, project, versions = registered
    code = FAKE_EVALUATION.format(experiment=EVALUATIONS, variant="soft", value=0.01).replace(
        "    tracking.log_metric_values(values)\n",
        "    tracking.log_metric_values(values)\n"
        "    tracking.log_table(table, 'predictions/agreement__pairs.json')\n")
    done = python_as(url, "evaluator", PASSWORDS["evaluator"], project, FORGED_TABLE + code)
    assert done.returncode == 0, done.stderr
    forged = done.stdout.strip().splitlines()[-1]
    honest = ('for f in pathlib.Path("models/soft").iterdir():\n'  # soft's evaluated files (test (a) rewrote the
              '    shutil.copy(f, package / f.name)\n'  # approved version's config.json in the worker's run)
              f'registration["evaluate_run_id"] = {forged!r}')
    version = _worker_registers(url, project, versions["soft"]["version"], honest)
    again = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft", "--version", version)
    assert again.returncode == 1, again.stdout + again.stderr
    line = _one_line(again)
    assert "evaluator_runs" not in line and "evaluated_bytes" not in line, line[-4000:]  # the run itself is one the evaluator could have written
    assert "'soft' table agreement__pairs row" in line and "recomputed from the verified files" in line, line[-4000:]


def test_evidence_rewritten_after_an_honest_evaluation_is_refused(registered):
    """Item 1: the worker cannot rewrite the evaluator's run; with the evaluator's credential (leaked) the run's
    metrics.json is rewritten after the evaluation: its sha256 is not the one the run's param binds, refused.
    (Last of the promotions here: soft's evidence stays rewritten.)"""
    url, project, versions = registered
    from biaslab.outputs import metrics_file

    run_id = metrics_file.read(project / "metrics" / "soft.json", "soft").run_id
    rewrite = f"""
import json, pathlib, tempfile
from mlflow import MlflowClient
client = MlflowClient()
local = pathlib.Path(client.download_artifacts({run_id!r}, "metrics.json", tempfile.mkdtemp()))
body = json.loads(local.read_text())
body["bench/bias"]["value"] = 0.0
local.write_text(json.dumps(body))
client.log_artifact({run_id!r}, str(local))
"""
    refused = _as_worker(url, project, rewrite)
    assert refused.returncode != 0
    done = python_as(url, "evaluator", PASSWORDS["evaluator"], project, rewrite)
    assert done.returncode == 0, done.stderr
    again = biaslab(url, "promoter", PASSWORDS["promoter"], project, "promote", "soft",
                    "--version", versions["soft"]["version"])
    assert again.returncode == 1, again.stdout + again.stderr
    assert f"evaluate run {run_id} of 'soft': metrics.json: sha256" in _one_line(again)
    assert "it logged" in _one_line(again)


def test_only_the_admin_manages_users(team_server):
    url, project = team_server
    done = biaslab(url, "worker", PASSWORDS["worker"], project, "team", "setup", "--user", "mallory", "--role",
                   "promoter", "--password-env", "P", extra_env={"P": "mallory-password-1"})
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.strip().splitlines()[-1] == (
        f"error: user 'worker' may not manage users and permissions on {url}: only MLflow's admin may")


def test_setup_refuses_to_adopt_a_promotions_experiment_or_champion_model_a_worker_created(team_server):
    """Attack 5: a worker creates the promotions experiment, the champion model or the evaluations experiment of a
    project before setup does (MLflow makes it MANAGE there: it could log forged gate records, add versions, grant
    itself back), or one whose artifacts live outside the server's proxied store: setup refuses to adopt them,
    naming the user and the location. Setup run again on what it created itself is fine (idempotent)."""
    url, project = team_server
    squat = """
from mlflow import MlflowClient
client = MlflowClient()
client.create_experiment('squatted-promotions')
client.create_registered_model('squatted-champion')
"""
    done = python_as(url, "worker", PASSWORDS["worker"], project, squat)
    assert done.returncode == 0, done.stderr
    elsewhere = "from mlflow import MlflowClient; MlflowClient().create_experiment('elsewhere', artifact_location='s3://worker-bucket/elsewhere')"
    assert python_as(url, "admin", ADMIN_PASSWORD, project, elsewhere).returncode == 0
    for registry, refusal in (
            ({"promotions_experiment": "squatted-promotions"},
             "experiment 'squatted-promotions': user 'worker' holds MANAGE on it"),
            ({"champion_model": "squatted-champion"},
             "registered model 'squatted-champion': user 'worker' holds MANAGE on it"),
            ({"evaluations_experiment": "elsewhere"},
             "experiment 'elsewhere' stores its artifacts at 's3://worker-bucket/elsewhere', not in the server's proxied store")):
        other = project.parent / "other-project"
        other.mkdir(exist_ok=True)
        (other / "params.yaml").write_text(yaml.safe_dump({**PARAMS, "registry": {**PARAMS["registry"], **registry}}))
        done = biaslab(url, "admin", ADMIN_PASSWORD, other, "team", "setup", "--user", "worker", "--role", "worker")
        assert done.returncode == 2, done.stdout + done.stderr
        assert "refusing to adopt what `biaslab team setup` did not create" in _one_line(done)
        assert refusal in _one_line(done)
    for _ in range(2):  # what setup created itself: adopted again, the grant replaced by the role's
        done = biaslab(url, "admin", ADMIN_PASSWORD, project, "team", "setup", "--user", "worker", "--role", "worker")
        assert done.returncode == 0, done.stderr
        assert "user 'worker' (existing), role worker" in done.stdout


# ------------------------------------------------------------------------------------------------ secrets
def test_no_password_is_stored_or_printed(team_server, tmp_path, monkeypatch):
    """Every run, param, tag, metric key, artifact and version of the server, and biaslab's output, are free of
    the passwords the identities used."""
    import mlflow

    url, project = team_server
    done = python_as(url, "worker", PASSWORDS["worker"], project, LOG_A_RUN)
    assert done.returncode == 0, done.stderr
    secrets = [ADMIN_PASSWORD, *PASSWORDS.values()]
    assert not [s for s in secrets if s in done.stdout + done.stderr]

    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", ADMIN_PASSWORD)
    client = mlflow.MlflowClient(url)
    stored: list[str] = []
    experiments = client.search_experiments()
    for experiment in experiments:
        stored += [json.dumps(dict(experiment.tags)), experiment.name]
        for run in client.search_runs([experiment.experiment_id], max_results=1000):
            stored += [json.dumps(run.data.params), json.dumps(run.data.tags), json.dumps(list(run.data.metrics)),
                       run.info.user_id or "", run.info.run_name or ""]
            target = tmp_path / run.info.run_id
            if client.list_artifacts(run.info.run_id):
                mlflow.artifacts.download_artifacts(run_id=run.info.run_id, dst_path=str(target), tracking_uri=url)
                stored += [p.read_bytes().decode(errors="replace") for p in target.rglob("*") if p.is_file()]
    for mv in client.search_model_versions(f"name = '{MODEL}'"):
        stored += [json.dumps(dict(mv.tags)), mv.source or "", mv.description or ""]
    assert len(experiments) >= 3 and len(stored) > 10
    leaked = [s for s in secrets if any(s in text for text in stored)]
    assert not leaked


# ------------------------------------------------------------------------------------------------ db-setup
def test_the_db_setup_sql_gives_optuna_a_role_that_cannot_open_mlflows_databases(postgres_cluster, tmp_path):
    import optuna
    import psycopg2

    psql = shutil.which("psql") or str(Path(postgres_cluster_bin()) / "psql")
    sql = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["configs"]["db-setup"]["content"]
    (tmp_path / "db-setup.sql").write_text(sql, encoding="utf-8")
    postgres_cluster.execute('CREATE DATABASE "mlflow"')
    try:
        env = {**os.environ, "PGHOST": postgres_cluster.host, "PGPORT": str(postgres_cluster.port),
               "PGUSER": postgres_cluster.user, "PGDATABASE": "mlflow", "OPTUNA_DB_PASSWORD": "optuna-test-pw"}
        for _ in range(2):  # idempotent: a second `docker compose up` runs it again
            done = subprocess.run([psql, "-v", "ON_ERROR_STOP=1", "-f", str(tmp_path / "db-setup.sql")], env=env,
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
        as_optuna = f"postgresql+psycopg2://optuna@{postgres_cluster.host}:{postgres_cluster.port}"
        optuna.create_study(study_name="s", storage=f"{as_optuna}/optuna")  # its schema, in its own database
        for database in ("mlflow", "mlflow_auth"):
            with pytest.raises(psycopg2.OperationalError, match="permission denied for database"):
                psycopg2.connect(f"postgresql://optuna@{postgres_cluster.host}:{postgres_cluster.port}/{database}")
        psycopg2.connect(postgres_cluster.dsn("mlflow_auth")).close()  # MLflow's own user still can
    finally:
        for database in ("optuna", "mlflow_auth", "mlflow"):
            postgres_cluster.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        postgres_cluster.execute("DROP ROLE IF EXISTS optuna")


def postgres_cluster_bin() -> str:
    from conftest import find_pg_bin

    found = find_pg_bin()
    if found is None or not (found / "psql").exists():
        pytest.skip("psql not found")
    return str(found)
