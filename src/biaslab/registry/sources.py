"""What a variant is for the registry: a ``full`` model, an ``overlay`` on a base, or a ``prompt``; and the
content hash a registered version is found by (unchanged content reuses its version)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biaslab.config import VariantConfig
from biaslab.outputs import variant_dir
from biaslab.outputs.variant_dir import fingerprint_dir
from biaslab.registry.errors import RegistryError


@dataclass
class VariantSource:
    """Where a variant's content lives and how it is packaged."""

    name: str
    method: str
    kind: str  # "full" | "overlay" | "prompt"
    model_dir: Path
    base_dir: Path | None = None  # overlay / prompt: the full model they apply to
    prompt_prefix: dict[str, str] = field(default_factory=dict)


def resolve_variant(name: str, cfg: VariantConfig, root: Path) -> VariantSource:
    """Classify a variant by its directory: ``variant.json`` = overlay, ``config.json`` = full model."""
    model_dir = (root / cfg.model_dir).resolve()
    if cfg.method == "prompt":
        return VariantSource(name, cfg.method, "prompt", model_dir, base_dir=model_dir,
                             prompt_prefix=dict(cfg.prompt_prefix))
    kind = variant_dir.kind(model_dir)
    if kind == "overlay":
        return VariantSource(name, cfg.method, "overlay", model_dir, base_dir=variant_dir.base_dir(model_dir, root))
    if kind == "full":
        return VariantSource(name, cfg.method, "full", model_dir)
    raise RegistryError(
        f"variant {name!r}: {model_dir} is neither a model directory (config.json) nor an overlay (variant.json); "
        "run `dvc repro` to build it"
    )


def content_hash(src: VariantSource, flavor: str, serving: dict[str, Any] | None = None) -> str:
    """Identity of what would be registered: variant, method, content of its directories, packaging.

    ``serving`` (:func:`biaslab.serving.package.serving_identity`): the pyfunc packaging and the settings
    a served version scores with; a change registers a new version instead of reusing an old package.
    """
    if src.kind == "prompt":
        return identity_hash(src.name, src.method, src.kind, serving, base=fingerprint_dir(src.base_dir),
                             prompt_prefix=src.prompt_prefix)
    if src.kind == "overlay":
        return identity_hash(src.name, src.method, src.kind, serving, base=fingerprint_dir(src.base_dir),
                             overlay=fingerprint_dir(src.model_dir))
    return identity_hash(src.name, src.method, src.kind, serving, model=fingerprint_dir(src.model_dir), flavor=flavor)


def identity_hash(name: str, method: str, kind: str, serving: dict[str, Any] | None, *, model: str | None = None,
                  overlay: str | None = None, base: str | None = None, prompt_prefix: dict[str, str] | None = None,
                  flavor: str | None = None) -> str:
    """The content hash of a variant from its fingerprints (:func:`content_hash` of the directories; the promoter
    recomputes it from the downloaded, verified files and its own ``params.yaml``)."""
    identity: dict[str, Any] = {"variant": name, "method": method, "kind": kind}
    if serving is not None:
        identity["serving"] = serving
    if kind == "prompt":
        identity |= {"prompt_prefix": dict(prompt_prefix or {}), "base": base}
    elif kind == "overlay":
        identity |= {"overlay": overlay, "base": base, "flavor": "artifacts"}
    else:
        identity |= {"model": model, "flavor": flavor}
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:24]


def data_hash(root: Path, prepared_dir: str = "data/prepared") -> str:
    """Identity of the prepared data: the ``prepare`` outs' md5s from ``dvc.lock``, else a content hash."""
    lock = root / "dvc.lock"
    if lock.is_file():
        import yaml

        stage = ((yaml.safe_load(lock.read_text(encoding="utf-8")) or {}).get("stages") or {}).get("prepare") or {}
        outs = [(o.get("path"), o.get("md5")) for o in stage.get("outs", []) if o.get("md5")]
        if outs:
            return "dvc:" + hashlib.sha256(json.dumps(sorted(outs)).encode()).hexdigest()[:16]
    prepared = root / prepared_dir
    return f"sha:{fingerprint_dir(prepared)}" if prepared.is_dir() else "unknown"
