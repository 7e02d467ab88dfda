"""Mirror-first resolution, the pinned remote sources and checksum-verified download (no network)."""

from __future__ import annotations

import hashlib
import io

import pytest

from biaslab.config import DataConfig
from biaslab.data import sources
from biaslab.data.errors import DataError


def test_every_pinned_checksum_matches_the_mirror(mirror):
    for rel, remote in sources.REMOTE.items():
        if rel in sources.OPTIONAL_REMOTE and not (mirror / rel).is_file():
            continue  # optional files the mirror does not carry (checked when present)
        assert hashlib.sha256((mirror / rel).read_bytes()).hexdigest() == remote.sha256, rel
        assert remote.url.startswith("https://raw.githubusercontent.com/") and len(remote.commit) == 40


def test_env_mirror_wins_over_params(tmp_path, monkeypatch):
    (tmp_path / "rubia").mkdir()
    (tmp_path / "rubia" / "rubia.tsv").write_text("x")
    monkeypatch.setenv("BIASLAB_DATA_DIR", str(tmp_path))
    cfg = DataConfig(mirror_dir="/nonexistent", allow_download=False)
    assert sources.resolve(cfg, "rubia/rubia.tsv") == tmp_path / "rubia" / "rubia.tsv"


def test_missing_file_without_download_is_an_error(tmp_path, monkeypatch):
    monkeypatch.delenv("BIASLAB_DATA_DIR", raising=False)
    cfg = DataConfig(mirror_dir=str(tmp_path), allow_download=False, prepared_dir=str(tmp_path / "p"))
    with pytest.raises(DataError, match="rubia.tsv.*allow_download is false"):
        sources.resolve(cfg, "rubia/rubia.tsv")
    with pytest.raises(DataError, match="no public download source"):
        sources.resolve(DataConfig(mirror_dir=str(tmp_path)), "stereoset/dev.json")


class FakeResponse(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_download_verifies_sha256_and_caches(tmp_path, monkeypatch):
    payload = b"pro\tanti\n"
    remote = sources.RemoteFile("o/r", "0" * 40, "rubia.tsv", hashlib.sha256(payload).hexdigest())
    monkeypatch.setitem(sources.REMOTE, "rubia/rubia.tsv", remote)
    monkeypatch.delenv("BIASLAB_DATA_DIR", raising=False)
    monkeypatch.setenv(sources.DOWNLOAD_DIR_ENV, str(tmp_path / "raw"))
    urls = []
    monkeypatch.setattr(sources.urllib.request, "urlopen",
                        lambda url, timeout: urls.append(url) or FakeResponse(payload))
    cfg = DataConfig(mirror_dir=str(tmp_path / "empty"), allow_download=True)
    path = sources.resolve(cfg, "rubia/rubia.tsv")
    assert path.read_bytes() == payload and urls == [f"https://raw.githubusercontent.com/o/r/{'0' * 40}/rubia.tsv"]
    assert sources.resolve(cfg, "rubia/rubia.tsv") == path and len(urls) == 1  # cached


def test_download_with_wrong_checksum_leaves_nothing(tmp_path, monkeypatch):
    remote = sources.RemoteFile("o/r", "0" * 40, "rubia.tsv", "f" * 64)
    monkeypatch.setattr(sources.urllib.request, "urlopen", lambda url, timeout: FakeResponse(b"tampered"))
    dest = tmp_path / "raw" / "rubia.tsv"
    with pytest.raises(DataError, match="sha256 mismatch"):
        sources.fetch(remote, dest)
    assert not dest.parent.exists() or not any(dest.parent.iterdir())
