"""An evaluate run binds its evidence: params (which MLflow never lets anyone change) naming what it measured.

The promotion gate reads an evaluate run's ``metrics.json`` and ``predictions/*.json`` artifacts. Whoever may
write a run's experiment can rewrite its artifacts and tags, while a logged param stays what it was. So, last in
its run, the evaluate stage logs (:func:`evidence_params`):

* ``evidence.variant`` - the variant evaluated;
* ``evidence.model_fingerprint`` - the model it loaded (the promoter recomputes it from a version's files);
* ``evidence.items_sha256`` - the data it scored: sha256 of the prepared files' digests (the evaluate run's
  dataset inputs); the variant's and the base's must be equal;
* ``evidence.sha256.<artifact path>`` - sha256 of each evidence artifact *as stored* (downloaded back after the
  upload), and ``evidence.artifacts`` - how many, so a changed, removed or added table is seen.

:func:`binding_problems` is the gate's side: the same hashes recomputed from what it downloaded.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

PREFIX = "evidence."
VARIANT, FINGERPRINT, ITEMS, COUNT = (f"{PREFIX}variant", f"{PREFIX}model_fingerprint", f"{PREFIX}items_sha256",
                                      f"{PREFIX}artifacts")
SHA = f"{PREFIX}sha256."
EVIDENCE_ARTIFACTS = ("metrics.json", "predictions")  # what the gate reads (biaslab.registry.evidence.RunEvidence)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def items_sha256(datasets: Iterable[Any]) -> str:
    """One hash of the data an evaluation scored: its :class:`~biaslab.tracking.datasets.DatasetRef` s' names and
    DVC digests (the prepared files the enabled benchmarks read)."""
    pairs = sorted((str(ref.name), str(ref.digest)) for ref in datasets)
    return hashlib.sha256(json.dumps(pairs).encode()).hexdigest()


def stored_evidence(client: Any, run_id: str, folder: Path) -> dict[str, str]:
    """``{artifact path: sha256}`` of the run's evidence artifacts, downloaded into ``folder``."""
    from mlflow.exceptions import MlflowException

    found: dict[str, str] = {}
    for artifact in EVIDENCE_ARTIFACTS:
        try:
            local = Path(client.download_artifacts(run_id, artifact, str(folder)))
        except (MlflowException, OSError):
            continue
        files = [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.is_file())
        found |= {p.relative_to(folder).as_posix(): _sha256(p) for p in files}
    return found


def evidence_params(client: Any, run_id: str, *, variant: str, model_fingerprint: str | None,
                    datasets: Iterable[Any]) -> dict[str, str]:
    """The binding params of the evaluate run ``run_id`` (see the module doc), its artifacts read back from the store."""
    with tempfile.TemporaryDirectory(prefix="evidence-") as tmp:
        hashes = stored_evidence(client, run_id, Path(tmp))
    return {VARIANT: variant, FINGERPRINT: model_fingerprint or "", ITEMS: items_sha256(datasets),
            COUNT: str(len(hashes)), **{f"{SHA}{path}": sha for path, sha in hashes.items()}}


def binding_problems(params: Mapping[str, str], read: Mapping[str, str], variant: str) -> list[str]:
    """What differs between a run's binding params and the evidence the gate read (``{artifact path: sha256}``)."""
    if not params.get(COUNT):
        return ["it logged no evidence.* params (not an evaluate run that binds its evidence)"]
    problems = []
    if params.get(VARIANT) != variant:
        problems.append(f"it evaluated variant {params.get(VARIANT)!r}, not {variant!r}")
    bound = {k[len(SHA):]: v for k, v in params.items() if k.startswith(SHA)}
    if str(len(bound)) != params[COUNT]:
        problems.append(f"it binds {len(bound)} artifacts, its evidence.artifacts says {params[COUNT]}")
    problems += [f"{path}: sha256 {read[path][:12]}… is not the {bound[path][:12]}… it logged"
                 for path in sorted(bound) if path in read and read[path] != bound[path]]
    problems += [f"{path}: bound by the run, not found" for path in sorted(set(bound) - set(read))]
    problems += [f"{path}: read, but not bound by the run" for path in sorted(set(read) - set(bound))]
    return problems
