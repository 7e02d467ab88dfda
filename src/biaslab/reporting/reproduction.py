"""Does a fresh run reproduce the committed metrics? Within their confidence intervals, metric by metric.

``dvc metrics diff`` compares numbers exactly, which is right on the machine type that produced the
committed ``metrics/values/<variant>.json`` (same params, same thread count: every number is
bit-identical) and flags every metric anywhere else: another CPU type trains another default model (its
kernels reduce in another order, and the planted steps amplify that, docs/planted_bias.md 5.1). What can be
checked there is whether each committed value lies inside the 95% bootstrap CI of the fresh run's value
(``metrics/<variant>.json``): a difference inside the CI is smaller than what the benchmark can resolve; with
the planted default model, values outside are expected whenever the lock files name different models.

Statuses per metric: ``identical`` (bit for bit), ``within_ci``, ``outside_ci``, ``no_ci`` (differs and
has no CI, so cannot be judged), ``new`` (no committed value), ``gone`` (committed, not in the fresh run).
Whether the two runs used the same model (:func:`model_verdict`) is read from the DVC lock files (the
``models/base`` digest) and, where the digests differ, from the scores. The same training on the same machine
type gives the same digest (no wall-clock time is written into a model folder,
:data:`biaslab.pretrain.train.TIMING_KEYS`); a lock committed before that held the run's minutes in
``training_summary.json``, so its digest differs from every new run's while the scores are bit-identical.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from biaslab.metrics.values import MetricValue

Status = Literal["identical", "within_ci", "outside_ci", "no_ci", "new", "gone"]
STATUSES: tuple[Status, ...] = ("identical", "within_ci", "outside_ci", "no_ci", "new", "gone")


class ReproductionError(RuntimeError):
    """The committed side cannot be read (not a git checkout, unknown revision, file not committed)."""


@dataclass(frozen=True)
class MetricCheck:
    metric: str
    status: Status
    committed: float | None
    fresh: float | None
    ci_low: float | None = None
    ci_high: float | None = None

    @property
    def delta(self) -> float | None:
        if self.committed is None or self.fresh is None:
            return None
        return self.fresh - self.committed


def git_show(root: str | Path, rev: str, path: str) -> str:
    """``git show <rev>:<path>`` in ``root``; a clear error when it is not there."""
    try:
        result = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True, text=True)
    except OSError as exc:
        raise ReproductionError(f"git is needed to read the committed {path}: {exc}") from None
    if result.returncode != 0:
        raise ReproductionError(f"{path} at {rev}: {result.stderr.strip() or 'not found'} "
                                f"(commit the metrics of a reference run first: dvc repro, then git add metrics/values)")
    return result.stdout


def committed_values(root: str | Path, variant: str, rev: str = "HEAD") -> dict[str, float | None]:
    """The committed ``metrics/values/<variant>.json`` at ``rev``: ``{metric: value}``."""
    path = f"metrics/values/{variant}.json"
    try:
        data = json.loads(git_show(root, rev, path))
    except json.JSONDecodeError as exc:
        raise ReproductionError(f"{path} at {rev}: not JSON ({exc})") from None
    return {k: (None if v is None else float(v)) for k, v in data.items()}


def check_metric(name: str, fresh: MetricValue | None, committed: float | None) -> MetricCheck:
    if fresh is None or fresh.value is None or not math.isfinite(fresh.value):
        return MetricCheck(name, "gone", committed, None)
    value = float(fresh.value)
    if committed is None:
        return MetricCheck(name, "new", None, value, fresh.ci_low, fresh.ci_high)
    if value == committed:
        return MetricCheck(name, "identical", committed, value, fresh.ci_low, fresh.ci_high)
    if fresh.ci_low is None or fresh.ci_high is None:
        return MetricCheck(name, "no_ci", committed, value)
    inside = fresh.ci_low <= committed <= fresh.ci_high
    return MetricCheck(name, "within_ci" if inside else "outside_ci", committed, value, fresh.ci_low, fresh.ci_high)


def check_variant(fresh: Mapping[str, MetricValue], committed: Mapping[str, float | None]) -> list[MetricCheck]:
    """Every metric of either side, sorted by name."""
    names = sorted(set(fresh) | {k for k, v in committed.items() if v is not None})
    return [check_metric(n, fresh.get(n), committed.get(n)) for n in names]


def counts(checks: list[MetricCheck]) -> dict[str, int]:
    found = Counter(c.status for c in checks)
    return {s: found.get(s, 0) for s in STATUSES}


def base_model_digest(lock_text: str) -> str | None:
    """The DVC digest of ``models/base`` in a ``dvc.lock`` text (the ``base_model`` stage's output)."""
    import yaml

    lock = yaml.safe_load(lock_text) or {}
    for out in (lock.get("stages", {}).get("base_model", {}) or {}).get("outs", []) or []:
        if out.get("path") == "models/base":
            return out.get("md5")
    return None


def model_verdict(committed: str | None, fresh: str | None, checks: list[MetricCheck]) -> tuple[bool | None, str]:
    """``(same, sentence)``: did this run train the committed model? ``same`` is None when it cannot be told.

    Equal ``models/base`` digests settle it. Different digests do not (an older lock's folder held the run's
    wall-clock minutes; a metadata file may change without the weights). Then the scores decide: every committed value
    bit-identical (and none new or gone) means the same model; any value that differs means another one.
    """
    if committed is not None and committed == fresh:
        return True, "the same model (identical digest)"
    compared = [c for c in checks if c.status not in ("new", "gone")]
    if not compared:
        return None, "cannot tell: no metric to compare"
    differing = sum(c.status != "identical" for c in compared)
    one_sided = len(checks) - len(compared)
    if differing:
        return False, (f"a different model: {differing} of {len(compared)} values are not bit-identical (another "
                       "CPU type, thread count or seed trains another draw of the default model, "
                       "docs/planted_bias.md 5.1); exact equality is not expected")
    if one_sided:
        return None, (f"cannot tell: the {len(compared)} values both sides have are bit-identical, "
                      f"{one_sided} more only on one side (the metric set changed)")
    return True, ("the same model: every committed value is bit-identical (the digests differ in the folder's "
                  "metadata, e.g. an older lock's training_summary.json with its wall-clock minutes)")


def same_model(root: str | Path, rev: str = "HEAD") -> tuple[str | None, str | None]:
    """``(committed, fresh)`` DVC digests of ``models/base``: the committed lock at ``rev`` and the working one."""
    root = Path(root)
    try:
        committed = base_model_digest(git_show(root, rev, "dvc.lock"))
    except ReproductionError:
        committed = None
    lock = root / "dvc.lock"
    fresh = base_model_digest(lock.read_text(encoding="utf-8")) if lock.is_file() else None
    return committed, fresh
