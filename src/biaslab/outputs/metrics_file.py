"""The metrics files of one variant: ``metrics/<variant>.json`` and ``metrics/values/<variant>.json``.

``metrics/<variant>.json`` (written by ``evaluate@<variant>``; read by ``register``, ``report``,
``biaslab show-metrics`` and ``biaslab promote``)::

    {"metrics": {"<benchmark>/<metric>": {"value": 0.12, "direction": "lower", "ideal": 0.0,
                                          "ci_low": 0.1, "ci_high": 0.14, "n": 348, "description": "…"}, …},
     "variant": "base", "method": "none", "model_dir": "models/base", "model_source": "models/base",
     "model_fingerprint": "…", "run_id": "<MLflow run of evaluate@base>"}

Metrics are sorted by name; a field that is ``None`` (no CI, no ideal) is left out of its record. A variant
whose mitigation does not apply to the base model (its ``variant.json`` says ``skipped``: LoRA on a masked
LM, :mod:`biaslab.mitigation.applicability`) has ``"metrics": {}`` and ``"skipped": "<reason>"``.
``metrics/values/<variant>.json`` is ``{"<metric>": value}`` only: the file DVC declares as
``metrics``, so ``dvc metrics show/diff`` print one number per metric. Both are written atomically.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biaslab.atomic import atomic_write_text
from biaslab.errors import BiaslabError, MissingInputError
from biaslab.metrics.values import MetricValue
from biaslab.outputs import paths

META_FIELDS = ("variant", "method", "model_dir", "model_source", "model_fingerprint", "run_id", "skipped")


class MetricsFileError(BiaslabError):
    """A metrics file exists but does not have the documented shape."""


@dataclass
class VariantMetrics:
    """``metrics/<variant>.json``: metric values plus which model produced them."""

    variant: str
    metrics: dict[str, MetricValue]
    model_fingerprint: str | None = None
    model_dir: str | None = None
    run_id: str | None = None
    skipped: str | None = None  # why the variant has no metrics (its mitigation does not apply to the model)


def payload(metrics: Mapping[str, MetricValue], **meta: Any) -> dict[str, Any]:
    """The JSON object of ``metrics/<variant>.json``: sorted metric records, then ``meta``."""
    unknown = sorted(set(meta) - set(META_FIELDS))
    if unknown:
        raise ValueError(f"metrics file: unknown field(s) {unknown}; known: {list(META_FIELDS)}")
    return {"metrics": {k: v.to_dict() for k, v in sorted(metrics.items())}, **meta}


def write(root: str | os.PathLike[str], variant: str, metrics: Mapping[str, MetricValue], **meta: Any) -> Path:
    """Write both files of ``variant`` under project ``root``; returns the path of ``metrics/<variant>.json``.

    ``meta`` are the provenance fields (:data:`META_FIELDS`); ``variant`` is recorded too.
    """
    root = Path(root)
    record = root / paths.metrics_file(variant)
    atomic_write_text(record, json.dumps(payload(metrics, variant=variant, **meta), indent=2) + "\n")
    values = {name: metric.value for name, metric in sorted(metrics.items())}
    atomic_write_text(root / paths.metric_values_file(variant), json.dumps(values, indent=2) + "\n")
    return record


def metric_from_record(record: Mapping[str, Any]) -> MetricValue:
    """One record of the ``metrics`` mapping back to a :class:`MetricValue` (missing value -> NaN)."""
    return MetricValue(
        value=float(record["value"]) if record.get("value") is not None else math.nan,
        direction=record.get("direction", "higher"),
        ideal=record.get("ideal"),
        ci_low=record.get("ci_low"),
        ci_high=record.get("ci_high"),
        n=record.get("n"),
        description=record.get("description", ""),
    )


def read(path: str | os.PathLike[str], variant: str | None = None) -> VariantMetrics:
    """Read one ``metrics/<variant>.json``; a missing or malformed file is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise MissingInputError(f"{path}: metrics file not found; run `dvc repro` (evaluate stage) first")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        metrics = {name: metric_from_record(m) for name, m in raw["metrics"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MetricsFileError(
            f"{path}: not a metrics file ({exc!r}); expected {{'metrics': {{name: {{value, direction}}}}}}"
        ) from exc
    return VariantMetrics(
        variant=raw.get("variant") or variant or path.stem,
        metrics=metrics,
        model_fingerprint=raw.get("model_fingerprint"),
        model_dir=raw.get("model_dir"),
        run_id=raw.get("run_id"),
        skipped=raw.get("skipped"),
    )


def read_variant(root: str | os.PathLike[str], variant: str) -> VariantMetrics:
    """``metrics/<variant>.json`` of project ``root``."""
    return read(Path(root) / paths.metrics_file(variant), variant)


def read_if_present(root: str | os.PathLike[str], variant: str) -> VariantMetrics | None:
    """``metrics/<variant>.json`` of project ``root``, or ``None`` when the variant is not evaluated yet."""
    path = Path(root) / paths.metrics_file(variant)
    return read(path, variant) if path.is_file() else None


def read_values(root: str | os.PathLike[str], variant: str) -> dict[str, float | None]:
    """``metrics/values/<variant>.json`` of project ``root``: ``{metric: value}``."""
    path = Path(root) / paths.metric_values_file(variant)
    if not path.is_file():
        raise MissingInputError(f"{path}: metric values not found; run `dvc repro` (evaluate@{variant}) first")
    return json.loads(path.read_text(encoding="utf-8"))
