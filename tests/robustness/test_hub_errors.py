"""Hub failures say what the hub said (gated, missing repo, wrong revision) and what to do; offline says offline.

Nothing reaches the network: the hub's answers are built with ``huggingface_hub``'s own
``hf_raise_for_status`` from fake HTTP responses (the hub's ``X-Error-Code`` header decides the exception
class, exactly as for a real answer) and injected where ``huggingface_hub``/``transformers`` would have made
the request; any socket connection fails the test. A model "on the hub" is a local Hugging Face cache
folder, the layout ``huggingface_hub`` writes (``refs/<branch>`` → commit, ``snapshots/<commit>/``).
"""

from __future__ import annotations

import json
import socket

import pytest

from biaslab.config import ModelConfig
from biaslab.models.load import ModelLoadError, load_model
from biaslab.pretrain.snapshot import snapshot_model

REPO = "biaslab-test/tiny-model"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture()
def hub(monkeypatch, tmp_path):
    """Online mode, an empty cache, no sockets; returns ``answer(code, status)`` to script the hub's reply."""
    import httpx2
    import huggingface_hub.constants
    from huggingface_hub.hf_api import HfApi
    from huggingface_hub.utils import hf_raise_for_status

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf-cache"))

    def no_network(*args, **kwargs):
        raise AssertionError("a test tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", no_network)

    def answer(code: str | None, status: int, *, on: str = "api"):
        def reply(*args, **kwargs):
            headers = {"X-Error-Message": f"hub says: {code}"} | ({"X-Error-Code": code} if code else {})
            url = f"https://huggingface.co/{REPO}/resolve/main/config.json"
            hf_raise_for_status(httpx2.Response(status, request=httpx2.Request("GET", url), headers=headers))

        if on == "api":  # the revision lookup (HfApi.repo_info) answers
            monkeypatch.setattr(HfApi, "repo_info", reply)
        else:  # the file download answers (a gated repo's metadata is public, its files are not)
            import transformers.utils.hub

            monkeypatch.setattr(transformers.utils.hub, "hf_hub_download", reply)
            monkeypatch.setattr(transformers.utils.hub, "snapshot_download", reply)

    return answer


def load_error(source: str = REPO, revision: str | None = None) -> str:
    with pytest.raises(ModelLoadError) as err:
        load_model(source, revision=revision)
    return str(err.value)


def test_gated_repo_reports_the_hubs_message_and_the_token(hub):
    hub("GatedRepo", 401, on="download")
    message = load_error(revision=COMMIT)  # a commit needs no lookup: the download is refused
    assert "gated repository" in message and "GatedRepoError" in message and "hub says: GatedRepo" in message
    assert "HF_TOKEN" in message and f"https://huggingface.co/{REPO}" in message
    assert "no network" not in message and "offline" not in message.lower()


def test_missing_repo_reports_repository_not_found(hub):
    hub("RepoNotFound", 401)
    message = load_error()
    assert "RepositoryNotFoundError" in message and "hub says: RepoNotFound" in message
    assert "HF_TOKEN" in message and "model.source" in message and "no network" not in message


def test_wrong_revision_reports_revision_not_found(hub):
    hub("RevisionNotFound", 404)
    message = load_error(revision="v9-does-not-exist")
    assert "RevisionNotFoundError" in message and "'v9-does-not-exist' does not exist" in message
    assert "model.revision" in message and "no network" not in message


def test_other_http_refusals_keep_the_status_and_the_token_hint(hub):
    hub(None, 403, on="download")
    message = load_error(revision=COMMIT)
    assert "HTTP 403" in message and "HF_TOKEN" in message


def test_unreachable_hub_without_cache_says_no_network(hub, monkeypatch):
    import httpx2
    from huggingface_hub.hf_api import HfApi

    def refused(*args, **kwargs):
        raise httpx2.ConnectError("[Errno 111] Connection refused")

    monkeypatch.setattr(HfApi, "repo_info", refused)
    message = load_error()
    assert "not in the local Hugging Face cache" in message and "no network?" in message
    assert "Connection refused" in message


def test_offline_mode_without_cache_says_offline(monkeypatch, tmp_path):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    message = load_error()
    assert "HF_HUB_OFFLINE=1" in message and "RevisionResolutionError" in message
    assert "HF_TOKEN" not in message and "model.source null" in message


def test_invalid_repo_id_is_named(hub):
    message = load_error("not/a/valid/../id")
    assert "neither a local model directory nor a valid hub repository id" in message


def test_errors_that_are_not_the_hubs_pass_through(tiny_causal_model, tiny_tokenizer, tmp_path):
    from biaslab.models import hub

    assert hub.explain(ValueError("shape mismatch"), REPO, None) is None


def cache_model(cache, model, tokenizer, branch: str = "main", commit: str = COMMIT):
    """``model`` as ``huggingface_hub`` caches a download of ``REPO`` at ``commit`` (``refs/<branch>`` → it)."""
    folder = cache / f"models--{REPO.replace('/', '--')}"
    model.save_pretrained(folder / "snapshots" / commit)
    tokenizer.save_pretrained(folder / "snapshots" / commit)
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "refs" / branch).write_text(commit)


def test_snapshot_records_the_resolved_commit(monkeypatch, tmp_path, tiny_causal_model, tiny_tokenizer):
    import huggingface_hub.constants

    cache = tmp_path / "hf-cache"
    cache_model(cache, tiny_causal_model, tiny_tokenizer)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    loaded = load_model(REPO)
    assert loaded.commit == COMMIT and loaded.fingerprint == f"hub:{REPO}@{COMMIT}"
    record = snapshot_model(ModelConfig(source=REPO, revision="main"), tmp_path / "base")
    written = json.loads((tmp_path / "base" / "snapshot.json").read_text())
    assert record["resolved_commit"] == written["resolved_commit"] == COMMIT and written["revision"] == "main"
    assert (tmp_path / "base" / "model.safetensors").is_file()


def test_snapshot_of_a_local_directory_has_no_commit(tmp_path, tiny_causal_model, tiny_tokenizer):
    tiny_causal_model.save_pretrained(tmp_path / "src")
    tiny_tokenizer.save_pretrained(tmp_path / "src")
    assert snapshot_model(ModelConfig(source=str(tmp_path / "src")), tmp_path / "base")["resolved_commit"] is None
