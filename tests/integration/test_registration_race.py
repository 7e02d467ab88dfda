"""Two workers register the same variant at the same moment: one version, both get its number.

Two processes run ``register_variants`` against one loopback ``mlflow server`` (SQLite behind it). Each waits,
right after searching the registry by content hash and finding nothing, until the other has searched too -
the race that used to give two versions of the same content. The claim (:mod:`biaslab.registry.claims`)
lets one of them register; the other waits for that version and reuses it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tracking_server import running_server

pytestmark = pytest.mark.slow

MODEL = "race-model"
RACER = r"""
import json, pathlib, sys, time
from biaslab.config import load_params
from biaslab.registry import register as registration
from biaslab.registry import register_variants
from biaslab.tracking import runs as tracking

me, other = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
search = registration.find_version_by_content


def racing(client, name, chash):
    found = search(client, name, chash)
    me.touch()  # searched; now wait until the other worker has searched as well
    deadline = time.time() + 300
    while not other.exists() and time.time() < deadline:
        time.sleep(0.05)
    return found


registration.find_version_by_content = racing
params = load_params("params.yaml")
tracking.configure(params.tracking)
with tracking.stage_run("register"):
    result = register_variants(params, ".", log=tracking, flavor="artifacts", variants=["base"])
print(json.dumps({"version": result["base"].version, "reused": result["base"].reused}))
"""


def test_two_racing_registrations_give_one_version(tmp_path, tiny_tokenizer, tiny_causal_model):
    from mlflow import MlflowClient

    project = tmp_path / "project"
    tiny_causal_model.save_pretrained(project / "models" / "base")
    tiny_tokenizer.save_pretrained(project / "models" / "base")
    (project / "params.yaml").write_text(yaml.safe_dump({
        "variants": {"base": {"method": "none", "model_dir": "models/base"}},
        "registry": {"model_name": MODEL}, "tracking": {"experiment": "race"}}), encoding="utf-8")
    with running_server(tmp_path / "server", f"sqlite:///{tmp_path / 'server.db'}") as url:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}, "MLFLOW_TRACKING_URI": url}
        flags = [tmp_path / "a.searched", tmp_path / "b.searched"]
        racers = [subprocess.Popen([sys.executable, "-c", RACER, str(mine), str(theirs)], cwd=project, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for mine, theirs in (flags, flags[::-1])]
        outcomes = []
        for racer in racers:
            out, err = racer.communicate(timeout=900)
            assert racer.returncode == 0, err[-3000:]
            outcomes.append(json.loads(out.strip().splitlines()[-1]))
        assert all(flag.exists() for flag in flags)  # both searched before either registered
        versions = MlflowClient(url).search_model_versions(f"name = '{MODEL}'")
    assert len(versions) == 1
    assert {o["version"] for o in outcomes} == {str(versions[0].version)}
    assert sorted(o["reused"] for o in outcomes) == [False, True]  # one registered, the other reused it
