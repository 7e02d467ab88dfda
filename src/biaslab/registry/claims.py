"""One version per content, even when two workers register the same variant at once.

Searching for a version by its ``content_hash`` tag and creating one when none is found is a race: two
workers both find none and both create a version. MLflow offers no conditional create of a version, but
experiment names are unique in every tracking store (a database constraint), and creating an experiment is
something a worker may do. So before it uploads, a worker *claims* the content by creating the experiment
``biaslab-registration-claims/<model>/<content_hash>``:

* created: this worker registers; afterwards it deletes the experiment (a deleted experiment keeps its
  name, so a late racer still cannot claim it, and finds the version instead); if registering fails the
  claim is renamed away first, freeing the name for the next try;
* it exists: another worker is registering that content; this one waits for the version to appear and
  reuses it. A claim older than ``STALE_AFTER_S`` whose version never appeared (its worker was killed) is
  taken over.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

from biaslab.registry.errors import RegistryError

CLAIMS = "biaslab-registration-claims"
CLAIMED_AT = "biaslab.claimed_at"
STALE_AFTER_S = 1800.0
POLL_S = 1.0


def claim_name(model_name: str, chash: str) -> str:
    return f"{CLAIMS}/{model_name}/{chash}"


def _version_by_content(client: Any, model_name: str, chash: str) -> Any | None:
    found = client.search_model_versions(f"name = '{model_name}' and tags.content_hash = '{chash}'")
    return min(found, key=lambda mv: int(mv.version)) if found else None


def claim(client: Any, model_name: str, chash: str, *, wait_s: float = STALE_AFTER_S) -> str | Any:
    """The claim's experiment id when this process is to register ``chash``, else the version another
    process registered meanwhile (waiting for it up to ``wait_s``)."""
    from mlflow.exceptions import MlflowException

    name = claim_name(model_name, chash)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return client.create_experiment(name, tags={CLAIMED_AT: repr(time.time())})
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        found = _version_by_content(client, model_name, chash)
        if found is not None:
            return found
        held = client.get_experiment_by_name(name)
        claimed_at = float((held.tags or {}).get(CLAIMED_AT, "0")) if held is not None else 0.0
        if held is not None and held.lifecycle_stage == "active" and time.time() - claimed_at > STALE_AFTER_S:
            _release(client, held.experiment_id, name)  # its worker died: take the content over
            continue
        if time.monotonic() > deadline:
            raise RegistryError(
                f"content {chash} of registered model {model_name!r} is claimed by another registration "
                f"(experiment {name!r}) whose version has not appeared in {wait_s:.0f} s; run `dvc repro register` "
                "again when that worker has finished")
        time.sleep(POLL_S)


def _release(client: Any, experiment_id: str, name: str) -> None:
    """Free the claim's name (rename, then delete: a deleted experiment would keep the name)."""
    with contextlib.suppress(Exception):
        client.rename_experiment(experiment_id, f"{name}.released-{uuid.uuid4().hex[:8]}")
        client.delete_experiment(experiment_id)


@contextlib.contextmanager
def holding(client: Any, experiment_id: str | None) -> Iterator[None]:
    """Register inside the block; on success the claim is deleted (its name stays taken), on failure freed."""
    if experiment_id is None:
        yield
        return
    try:
        yield
    except BaseException:
        name = client.get_experiment(experiment_id).name
        _release(client, experiment_id, name)
        raise
    with contextlib.suppress(Exception):  # a claim left active only costs a row; the version exists
        client.delete_experiment(experiment_id)
