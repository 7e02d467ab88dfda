"""The Hugging Face Hub as a model source: which commit a revision names, and what the hub said when it refused.

Two jobs, both about loading ``model.source`` when it is a hub id rather than a local directory:

* :func:`resolve_commit` turns the requested revision (``None`` = the default branch, a branch, a tag or a
  commit) into the commit hash it points to *now*, through ``huggingface_hub``'s own resolution (the API
  online, the cache's ``refs/`` offline). Every file of one load is then fetched at that commit, and
  ``snapshot.json`` records it: a branch moves, a commit does not.
* :func:`explain` turns an exception raised while loading into a message a user can act on, keeping the
  hub's own words. ``transformers`` re-raises hub errors as a generic ``OSError`` (the hub's exception is
  its ``__cause__``), so the chain is searched for ``huggingface_hub``'s exception classes: a gated repo,
  a missing repo and a wrong revision each get the hub's message and what to do (``HF_TOKEN``); only a
  real offline condition (``HF_HUB_OFFLINE=1``, or the hub unreachable and nothing cached) says offline.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

TOKEN_HINT = (
    "If the repository is gated or private, request access on its hub page while logged in, then give a token "
    "that has access: `export HF_TOKEN=hf_...` (or `hf auth login`); in Docker pass it with `-e HF_TOKEN`."
)


def resolve_commit(repo_id: str, revision: str | None) -> Any:
    """``revision`` of hub model ``repo_id`` resolved to a commit: a ``str`` equal to the request, ``.resolved`` = hash.

    Offline (``HF_HUB_OFFLINE=1``) the cache's ``refs/<revision>`` answers; online the hub's API does (and the
    answer is cached for later offline runs). Raises the hub's own errors (repository or revision not found,
    cannot resolve offline); :func:`explain` words them.
    """
    from huggingface_hub import HfApi, constants

    return HfApi().resolve_revision(repo_id, revision=revision, local_files_only=constants.is_offline_mode())


def download_snapshot(repo_id: str, commit: str, patterns: Sequence[str]) -> Path:
    """Fetch ``repo_id`` at ``commit`` into the Hugging Face cache: the model's files, its weights once.

    ``patterns`` are the model-file patterns (:data:`biaslab.models.weights.files.MODEL_FILE_PATTERNS`, plus
    pickles / code where allowed). The weights are fetched in a second call, once the sharding index is
    known: the index and the shards it names only (:func:`biaslab.models.weights.files.hub_weight_patterns`),
    so a repository that also ships ``consolidated.safetensors`` (Mistral-7B-v0.3: 14.5 GB more) is not
    downloaded twice. Offline both calls read the cache.
    """
    from huggingface_hub import snapshot_download

    from biaslab.models.weights.files import INDEX_FILE, hub_weight_patterns

    other = [p for p in patterns if not p.endswith(".safetensors")]
    folder = Path(snapshot_download(repo_id=repo_id, revision=commit, allow_patterns=other))
    index = folder / INDEX_FILE
    weights = hub_weight_patterns(index if index.is_file() else None)
    return Path(snapshot_download(repo_id=repo_id, revision=commit, allow_patterns=other + weights))


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _indented(message: str) -> str:
    return "\n".join(f"    {line}" for line in str(message).strip().splitlines())


def explain(exc: BaseException, source: str, revision: str | None) -> str | None:
    """A user-facing message for a hub failure while loading ``source``; ``None`` when ``exc`` is not one.

    The message names the hub's exception class and quotes its message, then says what to do.
    """
    import httpx2
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        DisabledRepoError,
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
        RevisionResolutionError,
    )

    chain = list(_chain(exc))

    def first(*types: type[BaseException]) -> BaseException | None:
        return next((e for e in chain if isinstance(e, types)), None)

    rev = revision or "the default branch"
    page = f"https://huggingface.co/{source}"
    # order matters: GatedRepoError is a RepositoryNotFoundError, both are HfHubHTTPErrors
    if (hub := first(GatedRepoError)) is not None:
        what = f"model {source!r} is a gated repository and the hub refused access"
        todo = f"Accept its terms at {page} while logged in, then set HF_TOKEN to a token of that account. {TOKEN_HINT}"
    elif (hub := first(RevisionNotFoundError)) is not None:
        what = f"model {source!r}: revision {rev!r} does not exist on the hub"
        todo = (f"Set model.revision to a branch, tag or 40-character commit listed at {page}/commits/main "
                "(null = the default branch).")
    elif (hub := first(RepositoryNotFoundError, DisabledRepoError)) is not None:
        what = f"model {source!r}: the hub has no repository of that name that this token may read"
        todo = f"Check model.source (organisation/name, as on the hub page). {TOKEN_HINT}"
    elif (hub := first(HFValidationError)) is not None:
        what = f"model {source!r} is neither a local model directory nor a valid hub repository id"
        todo = "Give an existing local path, or a hub id of the form organisation/name."
    elif (hub := first(RevisionResolutionError, LocalEntryNotFoundError, OfflineModeIsEnabled,
                       httpx2.TransportError)) is not None:
        offline = constants.is_offline_mode()
        why = "HF_HUB_OFFLINE=1 is set" if offline else "the hub could not be reached (no network?)"
        what = f"model {source!r} ({rev}) is not in the local Hugging Face cache and {why}"
        todo = (f"Download it once with network access{' (unset HF_HUB_OFFLINE)' if offline else ''}, or give a "
                f"local directory; the cache is {constants.HF_HUB_CACHE} (set HF_HOME to move it). "
                "Leave model.source null to train the offline default model.")
    elif (hub := first(EntryNotFoundError)) is not None:
        what = f"model {source!r} ({rev}) lacks a file that loading needs"
        todo = "Check that the repository holds a transformers checkpoint (config.json, *.safetensors, tokenizer)."
    elif (hub := first(HfHubHTTPError)) is not None:
        status = getattr(getattr(hub, "response", None), "status_code", None)
        what = f"model {source!r}: the hub answered HTTP {status}"
        todo = TOKEN_HINT if status in (401, 403) else "Retry later, or use a local copy of the model."
    else:
        return None
    return f"{what}.\n  huggingface_hub {type(hub).__name__}:\n{_indented(str(hub))}\n  {todo}"

