"""The ``raw_data`` stage: the sha256 of every raw input, the same from the mirror as from the pinned sources.

Its records are what ``prepare``, ``base_model`` and ``control_model`` depend on in ``dvc.yaml``, so they must
hold content only (no path, no time): two runs write the same bytes, and the mirror and a fake remote serving
the pinned files give the same records. No test touches the network.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from biaslab.data import sources
from biaslab.outputs import paths
from fake_remote import FakeRemote, serve_pinned_datasets

ROOT = Path(__file__).resolve().parents[2]


def write_params(root: Path, mirror: Path, model_source: str | None = None, **data) -> Path:
    """``root/params.yaml``: the project's, with ``data.mirror_dir``, ``model.source`` and ``data`` keys set."""
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw["data"].update(mirror_dir=str(mirror), **data)
    raw["model"]["source"] = model_source
    (root / "params.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    return root / "params.yaml"


def run_stage(root: Path) -> dict[str, bytes]:
    from pipelines import raw_data

    assert raw_data.main(["--params", str(root / "params.yaml")]) == 0
    return {name: paths.raw_inputs_file(name).read_bytes() for name in ("datasets", "corpora")}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BIASLAB_DATA_DIR", raising=False)
    monkeypatch.delenv(sources.DOWNLOAD_DIR_ENV, raising=False)
    return tmp_path


def test_records_every_raw_input_from_the_mirror_by_content(project, mirror, monkeypatch):
    monkeypatch.setenv(sources.RAW_BASE_ENV, "http://127.0.0.1:9")  # the optional files: refused at once
    write_params(project, mirror)
    first = run_stage(project)
    datasets, corpora = (json.loads(first[name]) for name in ("datasets", "corpora"))
    for rel in sources.dataset_files():
        expected = mirror / rel if (mirror / rel).is_file() else sources.packaged_path(sources.PACKAGED[rel])
        assert datasets[rel] == sha256(expected), rel
    for rel in sources.OPTIONAL_REMOTE:  # not in the mirror, not downloadable here: recorded as absent
        assert datasets[rel] == (sha256(mirror / rel) if (mirror / rel).is_file() else None)
    for lang in ("en", "uk", "ru"):  # the reader's two files per language, not the mirror's SOURCE.md notes
        for name in (f"{lang}_corpus.txt", "MANIFEST.tsv"):
            digest = sha256(mirror / "corpora" / lang / name)
            assert corpora[f"{lang}/{name}"] == digest and datasets[f"lm_heldout/{lang}/{name}"] == digest
    assert len(corpora) == 6 and not any("SOURCE.md" in key for key in [*datasets, *corpora])
    assert run_stage(project) == first  # no timestamps, no paths: a second run writes the same bytes


def test_a_snapshotted_model_needs_no_corpus(project, mirror):
    write_params(project, mirror, lm_heldout={"languages": []}, model_source=str(project / "some-model"))
    records = run_stage(project)
    assert json.loads(records["corpora"]) == {}
    assert not any(key.startswith("lm_heldout/") for key in json.loads(records["datasets"]))


def test_the_pinned_sources_give_the_mirrors_records(project, mirror, monkeypatch):
    remote = FakeRemote(project / "remote")
    try:
        serve_pinned_datasets(remote, mirror)
        monkeypatch.setenv(sources.RAW_BASE_ENV, remote.url)
        # a snapshotted model and no held-out text: no corpus (their rebuild is tested in test_remote_sources)
        model = str(project / "some-model")
        write_params(project, project / "no-mirror", model, lm_heldout={"languages": []})
        from_remote = run_stage(project)
        asked = len(remote.requests)
        assert run_stage(project) == from_remote  # from the download cache now
        optional = {pin.path for pin in sources.OPTIONAL_REMOTE.values()}
        assert all(any(r.endswith(p) for p in optional) for r in remote.requests[asked:])  # only the absent ones
        write_params(project, mirror, model, lm_heldout={"languages": []})
        assert run_stage(project) == from_remote  # the mirror's bytes are the pinned bytes: the same records
    finally:
        remote.close()


def test_a_missing_needed_file_fails_the_stage_naming_it(project, tmp_path, capsys):
    from pipelines import raw_data

    write_params(project, tmp_path / "no-mirror", str(tmp_path / "some-model"), allow_download=False,
                 lm_heldout={"languages": []})
    assert raw_data.main(["--params", "params.yaml"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("raw_data failed: ") and "data.allow_download is false" in err
    assert not paths.raw_inputs_file("datasets").exists()
