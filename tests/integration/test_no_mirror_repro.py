"""A clone without the data mirror runs ``dvc repro``: every raw input comes from its pinned source.

A real ``dvc repro base_model`` in a fresh copy of the pipeline, with ``data.mirror_dir`` pointing nowhere and
``BIASLAB_RAW_BASE_URL`` at a fake GitHub raw host on loopback (``tests/fake_remote.py``) holding the pinned
files; nothing reaches the network. DVC must not stop at a missing dependency (``prepare`` depends on
``data/raw_inputs/datasets.json``, which the always-run ``raw_data`` stage writes), the prepared tables must be
byte for byte those made from the mirror, a second ``repro`` must rerun nothing but ``preflight`` and ``raw_data`` (always run), and switching
to the mirror (the same bytes) must not rerun ``prepare`` or ``base_model`` either. ``model.source`` is the
session's tiny local model (``base_model`` snapshots it) and ``data.lm_heldout.languages`` is empty, so no
corpus is needed (their rebuild from pinned sources: ``tests/unit/test_remote_sources.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from biaslab.config import DataConfig, LmHeldoutConfig, Params
from biaslab.data import sources
from fake_remote import FakeRemote, serve_pinned_datasets
from workspace import copy_pipeline, init_repo, pipeline_env, run_in

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def set_params(work: Path, mirror_dir: Path, model: Path | None = None) -> None:
    params = yaml.safe_load((work / "params.yaml").read_text(encoding="utf-8"))
    params["data"]["mirror_dir"] = str(mirror_dir)
    params["data"]["lm_heldout"]["languages"] = []
    if model is not None:
        params["model"]["source"] = str(model)
    params.setdefault("tracking", {})["tracking_uri"] = "sqlite:///mlruns/mlflow.db"
    (work / "params.yaml").write_text(yaml.safe_dump(params, allow_unicode=True, sort_keys=False), encoding="utf-8")


def ran(log: str) -> list[str]:
    """The stages a ``dvc repro`` log says it ran."""
    return sorted(line.split("'")[1] for line in log.splitlines() if line.startswith("Running stage '"))


def test_dvc_repro_without_the_mirror(tmp_path, mirror, tiny_causal_model, tiny_tokenizer):
    from biaslab.data.prepare import prepare

    remote = FakeRemote(tmp_path / "remote")
    try:
        serve_pinned_datasets(remote, mirror)
        tiny_causal_model.save_pretrained(tmp_path / "model")
        tiny_tokenizer.save_pretrained(tmp_path / "model")
        work = tmp_path / "work"
        work.mkdir()
        copy_pipeline(work, ROOT)
        set_params(work, tmp_path / "no-mirror", tmp_path / "model")
        env = pipeline_env(work, **{sources.RAW_BASE_ENV: remote.url})
        init_repo(work, env)

        first = run_in(work, env, "dvc", "repro", "base_model")
        assert ran(first) == ["base_model", "preflight", "prepare", "raw_data"]
        optional = {pin.path for pin in sources.OPTIONAL_REMOTE.values()}  # not served: the mirror lacks them
        fetched = {r for r in remote.requests if not any(r.endswith(p) for p in optional)}
        assert len(fetched) == len(sources.dataset_files()) - len(sources.PACKAGED)  # the spec is packaged
        index = json.loads((work / "data" / "raw_inputs" / "datasets.json").read_text(encoding="utf-8"))
        assert sorted(index) == sorted([*sources.dataset_files(), *sources.OPTIONAL_REMOTE])
        assert json.loads((work / "data" / "raw_inputs" / "corpora.json").read_text(encoding="utf-8")) == {}

        from_mirror = tmp_path / "from-mirror" / "prepared"
        prepare(Params(data=DataConfig(mirror_dir=str(mirror), prepared_dir=str(from_mirror), allow_download=False,
                                       lm_heldout=LmHeldoutConfig(languages=()))))
        tables = sorted(p.relative_to(from_mirror) for p in from_mirror.rglob("*") if p.is_file())
        prepared = work / "data" / "prepared"
        assert tables == sorted(p.relative_to(prepared) for p in prepared.rglob("*") if p.is_file())
        for table in tables:  # the split folders too
            assert (work / "data" / "prepared" / table).read_bytes() == (from_mirror / table).read_bytes(), table

        again = run_in(work, env, "dvc", "repro", "base_model")  # nothing changed: only the raw-input check runs
        assert ran(again) == ["preflight", "raw_data"]  # the two always-run checks
        set_params(work, mirror)  # the mirror holds the same bytes: nothing downstream to redo
        switched = run_in(work, env, "dvc", "repro", "base_model")
        assert ran(switched) == ["preflight", "raw_data"]
        assert json.loads((work / "data" / "raw_inputs" / "datasets.json").read_text(encoding="utf-8")) == index
    finally:
        remote.close()
