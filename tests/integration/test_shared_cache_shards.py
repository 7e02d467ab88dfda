"""Workers that share one DVC cache divide the pipeline without running a stage twice (issue 37).

The compose layout (docker-compose.yml, :mod:`pipelines.stage.shard`) on a tiny real pipeline: four clones of
one repository (``upstream``, two shard workers, ``collect``), each with its own workspace and
``cache.dir`` set to one shared folder. ``upstream`` runs the shared stage; each worker runs
``dvc repro`` of its :func:`~pipelines.stage.shard.shard_targets`; ``collect`` runs the whole pipeline. Every
stage writes a line to a log outside the workspaces when its command really runs: each must run once.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml
from workspace import init_repo, run_in

from pipelines.stage.shard import shard_targets

pytestmark = pytest.mark.slow

STEP = '''
import sys
from pathlib import Path

stage, item = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
with open("../ran.log", "a") as log:  # outside the workspace: a line per command really run
    log.write(f"{stage} {item}".strip() + "\\n")
if stage == "prepare":
    Path("prepared.txt").write_text("shared input\\n")
elif stage == "evaluate":
    Path(f"metric_{item}.txt").write_text(Path("prepared.txt").read_text() + item + "\\n")
else:
    Path("summary.txt").write_text("".join(Path(f"metric_{v}.txt").read_text() for v in "abc"))
'''


def test_shard_workers_with_one_cache_run_every_stage_once(tmp_path):
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "step.py").write_text(STEP)
    (origin / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "prepare": {"cmd": "python step.py prepare", "deps": ["step.py"], "outs": ["prepared.txt"]},
        "evaluate": {"foreach": ["a", "b", "c"], "do": {
            "cmd": "python step.py evaluate ${item}", "deps": ["step.py", "prepared.txt"],
            "outs": ["metric_${item}.txt"]}},
        "report": {"cmd": "python step.py report", "deps": [f"metric_{v}.txt" for v in "abc"],
                   "outs": ["summary.txt"]},
    }}))
    env = {**os.environ, "DVC_NO_ANALYTICS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    init_repo(origin, env)
    cache = tmp_path / "shared-cache"
    workers = {}
    for name in ("upstream", "worker-1", "worker-2", "collect"):
        home = tmp_path / name
        home.mkdir()
        run_in(tmp_path, env, "git", "clone", "-q", str(origin), str(home / "work"))
        run_in(home / "work", env, "dvc", "config", "--local", "cache.dir", str(cache))
        workers[name] = home

    run_in(workers["upstream"] / "work", env, "dvc", "repro", "prepare")
    for i, name in ((1, "worker-1"), (2, "worker-2")):
        run_in(workers[name] / "work", env, "dvc", "repro", *shard_targets(["a", "b", "c"], i, 2))
    out = run_in(workers["collect"] / "work", env, "dvc", "repro")

    ran = {name: (home / "ran.log").read_text().split("\n")[:-1] if (home / "ran.log").exists() else []
           for name, home in workers.items()}
    assert ran == {"upstream": ["prepare"], "worker-1": ["evaluate a", "evaluate c"],
                   "worker-2": ["evaluate b"], "collect": ["report"]}, out
    assert (workers["collect"] / "work" / "summary.txt").read_text() == "shared input\na\nshared input\nb\nshared input\nc\n"
