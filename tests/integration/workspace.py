"""Workspaces the integration tests run in subprocesses.

* :func:`write_workspace` - the tiny LoRA workspace the fine-tune and tuning tests train on, small enough
  for CPU training in seconds: the session's tiny causal model and tokenizer saved as ``<root>/base``, and
  ``<root>/gbem.parquet`` with the real GBEM-UA train items of a few professions, shaped like the prepared
  table ``finetune`` reads;
* :func:`copy_pipeline` + :func:`pipeline_env` + :func:`init_repo` + :func:`run_in` - a copy of the
  project's pipeline (``dvc.yaml``, ``params.yaml``, ``src/``, ``pipelines/``) in a fresh git + DVC repository, for tests
  that run a real ``dvc repro``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd


def write_workspace(root: Path, mirror: Path, model, tokenizer, splits: Sequence[str]) -> Path:
    """Write ``root/base`` and ``root/gbem.parquet``; returns ``root``.

    ``splits[i]`` is the split (``finetune`` / ``validation``) of the i-th profession in sorted order;
    only the first ``len(splits)`` professions are kept.
    """
    model.save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    raw = pd.read_csv(mirror / "gbem_ua" / "acc_dataset" / "train_dataset_acc.csv")
    professions = sorted(raw["profession"].unique())[: len(splits)]
    df = raw[raw["profession"].isin(professions)].rename(columns={"sentence": "qa_sentence"}).reset_index(drop=True)
    df["item_id"] = [f"train:{i}" for i in range(len(df))]
    df["split"] = df["profession"].map(dict(zip(professions, splits)))
    df.to_parquet(root / "gbem.parquet")
    return root


def copy_pipeline(dest: Path, root: Path) -> None:
    """The files a ``dvc repro`` runs from - ``dvc.yaml``, ``params.yaml``, ``src/``, ``pipelines/`` and the committed
    draws calibrate reads (``metrics/draws/``), tracked or not ignored."""
    import shutil
    import subprocess

    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "dvc.yaml",
                             "params.yaml", "src", "pipelines", "metrics/draws"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    for rel in listed:
        if (root / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, dest / rel)


def pipeline_env(work: Path, **extra: str) -> dict[str, str]:
    """The environment a workspace's stages run in: its own ``src`` and ``pipelines`` first, this interpreter's tools on PATH,
    no MLflow server or data/download folder inherited from the caller (``extra`` sets them)."""
    import os
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(work / "src"), str(work))), "HF_HUB_OFFLINE": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **extra}
    for name in ("MLFLOW_TRACKING_URI", "BIASLAB_DATA_DIR", "BIASLAB_DOWNLOAD_DIR", "BIASLAB_RAW_BASE_URL"):
        if name not in extra:
            env.pop(name, None)
    return env


def run_in(work: Path, env: dict[str, str], *cmd: str, timeout: int = 1500) -> str:
    """Run ``cmd`` in ``work``; its combined output, or an assertion error showing the tail of it."""
    import subprocess

    proc = subprocess.run(list(cmd), cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    return proc.stdout + proc.stderr


def init_repo(work: Path, env: dict[str, str]) -> None:
    """``git init`` + ``dvc init`` + one commit of everything in ``work``."""
    git = ("git", "-c", "user.email=test@biaslab", "-c", "user.name=test")
    run_in(work, env, "git", "init", "-q")
    run_in(work, env, "dvc", "init", "-q")
    run_in(work, env, *git, "add", "-A")
    run_in(work, env, *git, "commit", "-qm", "workspace")


def drop_variants(work: Path, names: Sequence[str]) -> None:
    """Remove variants from a copied pipeline: from ``params.yaml`` and from ``dvc.yaml`` (the ``foreach``
    lists that name them, and every dependency on ``models/<name>``, ``metrics/<name>.json`` or
    ``reports/tables/<name>`` or ``data/predictions/<name>``), so ``dvc repro`` neither builds them nor
    waits for them."""
    import yaml

    names = set(names)
    params_file, dvc_file = work / "params.yaml", work / "dvc.yaml"
    params = yaml.safe_load(params_file.read_text(encoding="utf-8"))
    params["variants"] = {k: v for k, v in params["variants"].items() if k not in names}
    params_file.write_text(yaml.safe_dump(params, allow_unicode=True, sort_keys=False), encoding="utf-8")
    produced = {p for n in names
                for p in (f"models/{n}", f"metrics/{n}.json", f"reports/tables/{n}", f"data/predictions/{n}")}
    pipeline = yaml.safe_load(dvc_file.read_text(encoding="utf-8"))
    for name, stage in list(pipeline["stages"].items()):
        if isinstance(stage.get("foreach"), list):
            stage["foreach"] = [item for item in stage["foreach"] if item not in names]
        elif isinstance(stage.get("foreach"), dict):  # variant -> its settings (finetune: the study it reads)
            stage["foreach"] = {key: item for key, item in stage["foreach"].items() if key not in names}
        if "foreach" in stage and not stage["foreach"]:  # every item dropped (tune_variant): no stage at all
            del pipeline["stages"][name]
            continue
        body = stage.get("do", stage)
        if "deps" in body:
            body["deps"] = [d for d in body["deps"] if d not in produced]
    dvc_file.write_text(yaml.safe_dump(pipeline, allow_unicode=True, sort_keys=False), encoding="utf-8")
