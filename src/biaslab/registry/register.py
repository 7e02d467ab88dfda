"""The ``register`` stage's work: every variant becomes a version of ``registry.model_name``.

Unchanged content reuses its version; new content is packaged, uploaded, verified and only then
registered; the alias ``candidate`` moves to the newest version; ``runs/register.json`` records
variant -> version. A variant whose mitigation did not apply to the base model (its ``variant.json`` says
``skipped``: LoRA on a masked LM) gets no version; ``runs/register.json`` lists it under ``skipped`` with
the reason (:func:`skipped_variants`)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from biaslab.config import Params
from biaslab.outputs import metrics_file, paths, run_file
from biaslab.outputs.metrics_file import VariantMetrics
from biaslab.outputs.variant_dir import fingerprint_dir, variant_skip_reason
from biaslab.tracking.git_commit import git_commit
from biaslab.registry import claims
from biaslab.registry.errors import RegistryError
from biaslab.registry.package import file_manifest, package_variant, verify_logged
from biaslab.registry.sources import VariantSource, content_hash, data_hash, resolve_variant
from biaslab.run_log import RunLog


CANDIDATE = "candidate"
REGISTER_JSON = paths.run_file("register")
FLAVORS = ("transformers", "artifacts")


@dataclass
class RegisteredVersion:
    variant: str
    version: str
    content_hash: str
    reused: bool
    run_id: str | None
    source: str
    manifest_sha256: str | None = None  # sha256 of the package's biaslab_manifest.json (a param of its run)


def _client():
    from mlflow import MlflowClient

    return MlflowClient()


def _ensure_registered_model(client: Any, name: str) -> None:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException:
        from biaslab.tracking.team import MODEL_DESCRIPTION

        try:
            client.create_registered_model(name, description=MODEL_DESCRIPTION)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":  # else another worker created it meanwhile
                raise


def find_version_by_content(client: Any, name: str, chash: str) -> Any | None:
    """The existing version holding exactly this content, if any."""
    found = client.search_model_versions(f"name = '{name}' and tags.content_hash = '{chash}'")
    return min(found, key=lambda mv: int(mv.version)) if found else None


def metric_tags(vm: VariantMetrics | None, names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``metric.<name>`` = value and ``metric_ci.<name>`` = ``low,high`` for the metrics ``names``.

    A version carries only what a reviewer reads: ``names`` are the gate's metrics (``registry.gate``);
    every other metric stays on the evaluate run the ``evaluate_run_id`` tag names.
    """
    if vm is None:
        return {}
    tags = {}
    for name, mv in vm.metrics.items():
        if name not in names:
            continue
        key = "".join(c if c.isalnum() or c in "/-._ " else "_" for c in name)
        tags[f"metric.{key}"] = repr(mv.value)
        if mv.ci_low is not None and mv.ci_high is not None:
            tags[f"metric_ci.{key}"] = f"{mv.ci_low!r},{mv.ci_high!r}"
    return tags


def skipped_variants(params: Params, root: str | os.PathLike[str] = ".",
                     variants: list[str] | None = None) -> dict[str, str]:
    """``variant -> reason`` for the variants (of ``variants``, default all) whose directory says their
    mitigation did not apply to the base model (:func:`biaslab.outputs.variant_dir.variant_skip_reason`)."""
    found = {}
    for name in variants or list(params.variants):
        reason = variant_skip_reason(params.variant(name), root)
        if reason is not None:
            found[name] = reason
    return found


def _order_for_registration(sources: list[VariantSource]) -> list[VariantSource]:
    """Full models first, so overlays and prompts can reference their base's version."""
    return sorted(sources, key=lambda s: s.kind != "full")


def register_variants(
    params: Params,
    root: str | os.PathLike[str] = ".",
    *,
    log: RunLog,
    metrics_dir: str = "metrics",
    flavor: str = "transformers",
    check_hashes: bool = True,
    variants: list[str] | None = None,
    skipped: dict[str, str] | None = None,
) -> dict[str, RegisteredVersion]:
    """Register every variant (or ``variants``); return variant -> version. MLflow must be configured.

    Each new package is logged to a run of ``log`` (nested under the active run: the register stage's)
    before its version is created; the caller logs the result. Skipped variants (:func:`skipped_variants`,
    or ``skipped`` when the caller has already read them) are left out: there is nothing to register.
    """
    from biaslab.serving.package import serving_identity
    from biaslab.serving.settings import ServingSettings

    if flavor not in FLAVORS:
        raise RegistryError(f"unknown flavor {flavor!r}; choose one of {FLAVORS}")
    root = Path(root).resolve()
    if skipped is None:
        skipped = skipped_variants(params, root, variants)
    names = [n for n in variants or list(params.variants) if n not in skipped]
    sources = _order_for_registration([resolve_variant(n, params.variant(n), root) for n in names])
    model_name = params.registry.model_name
    client = _client()
    _ensure_registered_model(client, model_name)
    common = {"git_commit": git_commit(root), "data_hash": data_hash(root, params.data.prepared_dir)}
    gate_base = _gate_base_evidence(root / metrics_dir)
    result: dict[str, RegisteredVersion] = {}
    full_by_dir: dict[Path, RegisteredVersion] = {}
    serving = ServingSettings.from_params(params)

    for src in sources:
        metrics_path = root / metrics_dir / f"{src.name}.json"
        vm = metrics_file.read(metrics_path, src.name) if metrics_path.is_file() else None
        chash = content_hash(src, flavor, serving_identity(serving))
        base_ref = _base_reference(src, full_by_dir, model_name)
        tags = {
            "variant": src.name,
            "method": src.method,
            "kind": src.kind,
            "content_hash": chash,
            "model_fingerprint": (vm and vm.model_fingerprint) or fingerprint_dir(src.model_dir),
            "model_dir": os.path.relpath(src.model_dir, root),
            "evaluate_run_id": vm.run_id if vm else None,
            **(gate_base if src.name != GATE_BASE else {}),
            "metrics": "present" if vm else f"missing ({metrics_path.name} not found)",
            "format": "prompt" if src.kind == "prompt" else ("artifacts" if src.kind == "overlay" else flavor),
            **common,
            **({"base_model": base_ref["model_uri"] or base_ref["base_dir"]} if base_ref else {}),
            **metric_tags(vm, [c.metric for c in params.registry.gate]),
        }
        tags = {k: str(v) for k, v in tags.items() if v is not None}
        existing = find_version_by_content(client, model_name, chash)
        claim = None
        if existing is None:  # one version per content, even when two workers get here at once
            claim = claims.claim(client, model_name, chash)
            if not isinstance(claim, str):
                existing, claim = claim, None
        if existing is not None:
            for key, value in tags.items():  # metrics may have been re-computed for the same content
                if existing.tags.get(key) != value:
                    client.set_model_version_tag(model_name, existing.version, key, value)
            for key in existing.tags:  # metric tags of metrics that are no longer the gate's
                if key.startswith(("metric.", "metric_ci.")) and key not in tags:
                    client.delete_model_version_tag(model_name, existing.version, key)
            reg = RegisteredVersion(src.name, str(existing.version), chash, True, existing.run_id, existing.source,
                                    registered_manifest_sha256(client, existing))
        else:
            with claims.holding(client, claim):
                reg = _log_and_register(client, log, model_name, src, flavor, base_ref or {}, tags, check_hashes,
                                        serving=serving, prompt_prefix=params.variant(src.name).prompt_prefix)
        result[src.name] = reg
        if src.kind == "full":
            full_by_dir[src.model_dir] = reg

    newest = max(result.values(), key=lambda r: int(r.version))
    client.set_registered_model_alias(model_name, CANDIDATE, newest.version)
    return result


GATE_BASE = "base"  # the variant ``biaslab promote`` gates against by default


def _gate_base_evidence(metrics_dir: Path) -> dict[str, str]:
    """``evidence_base_variant`` / ``evidence_base_run_id``: the evaluate run of :data:`GATE_BASE` that this
    registration's evaluation is to be compared with - the base's run of the same evaluation, read from the same
    metrics files as the variant's own ``evaluate_run_id``.

    Why: a version is reused while its content is unchanged, and its registering run's params never change, so
    the base's version keeps the evaluate run of its first registration. After the evaluation changed (other
    items, another benchmark version, a new column) a variant registered later would be gated against that old
    base run - refused for scoring other inputs, or compared with numbers of another evaluation. Promote reads
    the base's evidence from here when it gates against :data:`GATE_BASE` (the base's bytes must still be what
    that run measured: ``registry/package_check.py``)."""
    path = metrics_dir / f"{GATE_BASE}.json"
    vm = metrics_file.read(path, GATE_BASE) if path.is_file() else None
    return {"evidence_base_variant": GATE_BASE, "evidence_base_run_id": vm.run_id} if vm and vm.run_id else {}


def _base_reference(src: VariantSource, full_by_dir: dict[Path, RegisteredVersion],
                    model_name: str) -> dict[str, Any] | None:
    """Where an overlay/prompt variant's base lives: its directory and, if registered, its version."""
    if src.base_dir is None:
        return None
    base = full_by_dir.get(src.base_dir)
    return {
        "base_dir": str(src.base_dir),
        "base_variant": base.variant if base else None,
        "base_version": base.version if base else None,
        "model_uri": f"models:/{model_name}/{base.version}" if base else None,
        "base_fingerprint": fingerprint_dir(src.base_dir) if src.base_dir.is_dir() else None,
        "content_hash": base.content_hash if base else None,
        "manifest_sha256": base.manifest_sha256 if base else None,
    }


def registered_manifest_sha256(client: Any, version: Any) -> str | None:
    """The manifest hash a version's registering run logged as a param (MLflow never changes a logged param)."""
    return client.get_run(version.run_id).data.params.get("manifest_sha256") if version.run_id else None


def _log_and_register(client: Any, log: RunLog, model_name: str, src: VariantSource, flavor: str, base_ref: dict[str, Any],
                      tags: dict[str, str], check_hashes: bool, *, serving: Any = None,
                      prompt_prefix: dict[str, str] | None = None) -> RegisteredVersion:
    """Package, upload, verify, then (only then) create the version.

    With ``serving`` (:class:`biaslab.serving.settings.ServingSettings`) the package is a ``python_function``
    model that ``mlflow.pyfunc.load_model`` rebuilds with biaslab's loader (:mod:`biaslab.serving`).
    """
    from mlflow.store.artifact.runs_artifact_repo import RunsArtifactRepository

    from biaslab.serving.manifest import MANIFEST_FILE, read_manifest, write_manifest
    from biaslab.serving.package import package_servable

    artifact_path = f"variant_{src.name}"
    with tempfile.TemporaryDirectory(prefix=f"register-{src.name}-") as tmp:
        package = Path(tmp) / "package"
        # the copy check hashes each copied weight file once; both manifests reuse those hashes (register
        # reads a checkpoint-sized file: the source and the copy at the check, the upload at verify_logged)
        copied = package_variant(src, package, flavor=flavor, base_reference=base_ref)
        if serving is not None:
            package_servable(package, src, flavor=flavor, base_reference=base_ref, model_name=model_name,
                             settings=serving, prompt_prefix=prompt_prefix or src.prompt_prefix)
        manifest_sha256 = write_manifest(package, copied, variant=src.name, content_hash=tags["content_hash"])
        manifest = file_manifest(package, {**read_manifest(package)["files"], MANIFEST_FILE: manifest_sha256})
        run_tags = {"content_hash": tags["content_hash"], "model_fingerprint": tags["model_fingerprint"]}
        with log.stage_run("register", variant=src.name, nested=True, tags=run_tags) as run:
            run_id = run.info.run_id
            # params, not tags: MLflow refuses to change a logged param, so these stay what was registered
            # (the promotion gate reads them: which variant, which bytes, which evaluate run)
            log.log_params({"variant": src.name, "method": src.method, "kind": src.kind,
                            "base_model": tags.get("base_model", ""), "format": tags["format"],
                            "content_hash": tags["content_hash"], "manifest_sha256": manifest_sha256,
                            "model_fingerprint": tags["model_fingerprint"],
                            "evaluate_run_id": tags.get("evaluate_run_id", ""),
                            "evidence_base_variant": tags.get("evidence_base_variant", ""),
                            "evidence_base_run_id": tags.get("evidence_base_run_id", "")})
            log.log_artifact(package, artifact_path)
            verify_logged(client, run_id, artifact_path, manifest, check_hashes=check_hashes)
    source = RunsArtifactRepository.get_underlying_uri(f"runs:/{run_id}/{artifact_path}")
    mv = client.create_model_version(model_name, source, run_id=run_id, tags=tags,
                                     description=f"{src.name} ({src.method})")
    return RegisteredVersion(src.name, str(mv.version), tags["content_hash"], False, run_id, source, manifest_sha256)


def write_register_json(result: dict[str, RegisteredVersion], model_name: str,
                        path: str | os.PathLike[str] = REGISTER_JSON, *, skipped: dict[str, str] | None = None) -> None:
    """``runs/register.json``: variant -> version, plus the details downstream stages may want, and
    ``skipped`` (variant -> why it has no version) when any variant was skipped."""
    newest = max(result.values(), key=lambda r: int(r.version)) if result else None
    run_file.write(
        path,
        model_name=model_name,
        versions={n: r.version for n, r in result.items()},
        candidate=newest.version if newest else None,
        details={n: asdict(r) for n, r in result.items()},
        **({"skipped": skipped} if skipped else {}),
    )
