"""Model registry: every variant is a version of one registered model; aliases; the promotion gate.

Three jobs, in the order a pipeline meets them:

1. **Register** (:func:`register_variants`, stage ``register``). Each variant of ``params.yaml`` is
   packaged into a local directory, logged as artifacts of a run, *verified* (the artifact store's
   file list, sizes and SHA-256 must match the package, and the package must match the source
   directory), and only then becomes a version of ``registry.model_name``. A version is tagged with
   what a reviewer reads: the method, variant, the gate's metrics with their CIs, git commit, data
   hash, model fingerprint, a ``content_hash`` and the evaluate run holding every other metric;
   registering unchanged content again reuses that version (docs/design.md §5). The alias
   ``candidate`` points at the newest version. What each variant becomes:

   * full model (``config.json`` + safetensors: base, embedding-edited checkpoints) - the
     ``transformers`` flavour (``mlflow.transformers.save_model`` of the checkpoint directory, which
     copies its files: the weights keep their bytes and dtype, nothing is loaded; explicit pip list, so
     ``mlflow.transformers.load_model("models:/<name>@champion")`` works), or a byte copy of the
     directory with ``flavor="artifacts"`` (see docs/registry_report.md for timings);
   * overlay (``variant.json`` + LoRA adapter or embedding hook) - the directory as artifacts plus
     ``base_reference.json``; the tag ``base_model`` names the base's registered version;
   * prompt - ``prompt.json`` (the prefixes and the base reference).

   Every package is also an MLflow ``python_function`` model (:mod:`biaslab.serving`): its loader rebuilds
   the variant with biaslab's own loader - an overlay or prompt from its base's *registered* version,
   pinned by version and content hash - so ``mlflow.pyfunc.load_model("models:/<name>@champion")``
   generates and scores for every kind.

2. **Gate** (:func:`evaluate_gate`): each ``registry.gate`` condition compares the variant's metric
   with the base's (rules documented on :func:`check_condition`).

3. **Promote** (:func:`promote`): pass -> alias ``champion``; either way the decision and its evidence
   are written as ``promotion.*`` tags on the version. Aliases only - the stages API is deprecated.

``mlflow`` is imported inside functions, so importing this module (e.g. for ``biaslab --help``) is cheap.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from biaslab.config import ConfigError, GateCondition, Params, VariantConfig
from biaslab.errors import BiaslabError
from biaslab.metrics.values import MetricValue
from biaslab.outputs import metrics_file, paths, run_file, variant_dir
from biaslab.outputs.metrics_file import VariantMetrics
from biaslab.outputs.variant_dir import fingerprint_dir

CANDIDATE = "candidate"
CHAMPION = "champion"
REGISTER_JSON = paths.run_file("register")
FLAVORS = ("transformers", "artifacts")
# packages a full-model version needs at load time; passed explicitly because MLflow's default probe
# imports optional packages (torchvision...) and fails
_PIP_PACKAGES = ("transformers", "torch", "tokenizers", "safetensors")


class RegistryError(BiaslabError, RuntimeError):
    """A variant cannot be registered or promoted: missing inputs, failed verification, not registered."""


# =========================================================================== what a variant is
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
    identity: dict[str, Any] = {"variant": src.name, "method": src.method, "kind": src.kind}
    if serving is not None:
        identity["serving"] = serving
    if src.kind == "prompt":
        identity |= {"prompt_prefix": src.prompt_prefix, "base": fingerprint_dir(src.base_dir)}
    elif src.kind == "overlay":
        identity |= {"overlay": fingerprint_dir(src.model_dir), "base": fingerprint_dir(src.base_dir),
                     "flavor": "artifacts"}
    else:
        identity |= {"model": fingerprint_dir(src.model_dir), "flavor": flavor}
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


# =========================================================================== packaging + verification
def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_manifest(directory: Path) -> dict[str, tuple[int, str]]:
    """``{relative posix path: (size, sha256)}`` of every file under ``directory``."""
    return {
        p.relative_to(directory).as_posix(): (p.stat().st_size, _sha256(p))
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def pip_requirements(extra: tuple[str, ...] = ()) -> list[str]:
    """Pinned requirements from the installed versions (no probing imports)."""
    reqs = []
    for name in (*_PIP_PACKAGES, *extra):
        try:
            reqs.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return reqs


def _copy_model_files(src: Path, dst: Path) -> None:
    for file in variant_dir.model_files(src):
        target = dst / file.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, target)


def _check_copy(src: Path, dst: Path, prefix: str = "") -> None:
    """Every model file of ``src`` is in ``dst`` (under ``prefix``) with identical bytes."""
    for file in variant_dir.model_files(src):
        rel = file.relative_to(src).as_posix()
        copy = dst / prefix / rel
        if not copy.is_file() or _sha256(copy) != _sha256(file):
            raise RegistryError(f"package of {src} is incomplete: {prefix}{rel} missing or different")


def package_variant(src: VariantSource, dst: Path, *, flavor: str, base_reference: dict[str, Any]) -> None:
    """Build the directory that will be uploaded for ``src`` and check it against the source."""
    dst.mkdir(parents=True, exist_ok=True)
    if src.kind == "prompt":
        (dst / "prompt.json").write_text(
            json.dumps({"variant": src.name, "prompt_prefix": src.prompt_prefix, "base": base_reference},
                       ensure_ascii=False, indent=2, sort_keys=True) + "\n",
            encoding="utf-8",
        )
        return
    if src.kind == "overlay":
        _copy_model_files(src.model_dir, dst)
        (dst / "base_reference.json").write_text(json.dumps(base_reference, indent=2, sort_keys=True) + "\n",
                                                 encoding="utf-8")
        _check_copy(src.model_dir, dst)
        return
    if flavor == "artifacts":
        _copy_model_files(src.model_dir, dst)
        _check_copy(src.model_dir, dst)
        return
    _save_transformers_flavor(src.model_dir, dst)


@contextlib.contextmanager
def _pipeline_classes_for_mlflow():
    """Within the block, ``transformers.pipelines.check_task`` names the pipeline *class*, not its dotted path.

    MLflow 3.17 builds the flavour of a local checkpoint with ``check_task(task)[1]["impl"].__name__``;
    transformers 5 registers ``impl`` as a dotted string, so that fails with ``'str' object has no attribute
    '__name__'``. The patch imports the class the string names, for MLflow's call only.
    """
    import importlib

    from transformers import pipelines

    original = pipelines.check_task

    def check_task(task: str):
        name, meta, options = original(task)
        impl = meta.get("impl")
        if isinstance(impl, str):
            module, _, cls = impl.rpartition(".")
            meta = {**meta, "impl": getattr(importlib.import_module(module), cls)}
        return name, meta, options

    pipelines.check_task = check_task
    try:
        yield
    finally:
        pipelines.check_task = original


def _save_transformers_flavor(model_dir: Path, dst: Path) -> None:
    """``mlflow.transformers.save_model`` of the checkpoint *directory*: MLflow copies its files.

    The weights are never loaded or re-serialised: MLflow's local-checkpoint path copies the directory
    into ``<dst>/model`` (and saves the tokenizer under ``components/``), so the registered version has the
    checkpoint's own bytes and dtype (bf16 stays bf16, recorded as the flavour's ``torch_dtype``), and
    registering costs no model-sized memory. The copy is checked byte for byte against the source.
    """
    import mlflow.transformers
    from transformers import AutoConfig

    from biaslab.models import detect_kind
    from biaslab.weights.index import SafetensorsIndex

    try:
        kind = detect_kind(AutoConfig.from_pretrained(str(model_dir)))
        dtype = SafetensorsIndex(model_dir).floating_dtype()
    except Exception as exc:  # noqa: BLE001 - any failure means the flavour cannot be built
        raise RegistryError(
            f"{model_dir}: cannot read the model to log it with the transformers flavour ({type(exc).__name__}: "
            f"{exc}); fix the model directory, or register a byte copy with --flavor artifacts"
        ) from exc
    shutil.rmtree(dst)  # save_model wants to create the directory itself
    with _pipeline_classes_for_mlflow():
        mlflow.transformers.save_model(
            str(model_dir),
            path=str(dst),
            task="fill-mask" if kind == "masked" else "text-generation",
            torch_dtype=dtype,
            pip_requirements=pip_requirements(),
            model_card=None,
        )
    _check_copy(model_dir, dst, prefix="model/")


def _list_artifacts_recursive(client: Any, run_id: str, path: str) -> dict[str, int | None]:
    found: dict[str, int | None] = {}
    for info in client.list_artifacts(run_id, path):
        if info.is_dir:
            found |= _list_artifacts_recursive(client, run_id, info.path)
        else:
            found[info.path] = info.file_size
    return found


def verify_logged(client: Any, run_id: str, artifact_path: str, manifest: dict[str, tuple[int, str]],
                  *, check_hashes: bool = True) -> None:
    """The artifacts under ``artifact_path`` are exactly ``manifest`` (paths, sizes, and hashes)."""
    found = _list_artifacts_recursive(client, run_id, artifact_path)
    listed = {k[len(artifact_path) + 1:]: v for k, v in found.items()}
    missing = sorted(set(manifest) - set(listed))
    wrong_size = sorted(p for p in manifest if p in listed and listed[p] is not None and listed[p] != manifest[p][0])
    if missing or wrong_size:
        raise RegistryError(
            f"run {run_id}: artifacts under {artifact_path!r} are incomplete - missing {missing[:5]}, "
            f"wrong size {wrong_size[:5]}; not registering"
        )
    if check_hashes:
        import mlflow

        with tempfile.TemporaryDirectory() as tmp:
            local = Path(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=artifact_path, dst_path=tmp))
            bad = sorted(p for p, (_, sha) in manifest.items() if _sha256(local / p) != sha)
        if bad:
            raise RegistryError(f"run {run_id}: artifacts {bad[:5]} differ from what was uploaded; not registering")


# =========================================================================== register
@dataclass
class RegisteredVersion:
    variant: str
    version: str
    content_hash: str
    reused: bool
    run_id: str | None
    source: str


def _client():
    from mlflow import MlflowClient

    return MlflowClient()


def _ensure_registered_model(client: Any, name: str) -> None:
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException:
        client.create_registered_model(
            name, description="biaslab variants: one version per (variant, content). Aliases: candidate, champion."
        )


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


def _order_for_registration(sources: list[VariantSource]) -> list[VariantSource]:
    """Full models first, so overlays and prompts can reference their base's version."""
    return sorted(sources, key=lambda s: s.kind != "full")


def register_variants(
    params: Params,
    root: str | os.PathLike[str] = ".",
    *,
    metrics_dir: str = "metrics",
    flavor: str = "transformers",
    check_hashes: bool = True,
    variants: list[str] | None = None,
) -> dict[str, RegisteredVersion]:
    """Register every variant (or ``variants``); return variant -> version. MLflow must be configured."""
    from biaslab import tracking
    from biaslab.serving.package import serving_identity
    from biaslab.serving.settings import ServingSettings

    if flavor not in FLAVORS:
        raise RegistryError(f"unknown flavor {flavor!r}; choose one of {FLAVORS}")
    root = Path(root).resolve()
    names = variants or list(params.variants)
    sources = _order_for_registration([resolve_variant(n, params.variant(n), root) for n in names])
    model_name = params.registry.model_name
    client = _client()
    _ensure_registered_model(client, model_name)
    common = {"git_commit": tracking.git_commit(root), "data_hash": data_hash(root, params.data.prepared_dir)}
    result: dict[str, RegisteredVersion] = {}
    full_by_dir: dict[Path, RegisteredVersion] = {}
    serving = ServingSettings.from_params(params)

    with tracking.stage_run("register", tags={"registered_model": model_name}):
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
                "metrics": "present" if vm else f"missing ({metrics_path.name} not found)",
                "format": "prompt" if src.kind == "prompt" else ("artifacts" if src.kind == "overlay" else flavor),
                **common,
                **({"base_model": base_ref["model_uri"] or base_ref["base_dir"]} if base_ref else {}),
                **metric_tags(vm, [c.metric for c in params.registry.gate]),
            }
            tags = {k: str(v) for k, v in tags.items() if v is not None}
            existing = find_version_by_content(client, model_name, chash)
            if existing is not None:
                for key, value in tags.items():  # metrics may have been re-computed for the same content
                    if existing.tags.get(key) != value:
                        client.set_model_version_tag(model_name, existing.version, key, value)
                for key in existing.tags:  # metric tags of metrics that are no longer the gate's
                    if key.startswith(("metric.", "metric_ci.")) and key not in tags:
                        client.delete_model_version_tag(model_name, existing.version, key)
                reg = RegisteredVersion(src.name, str(existing.version), chash, True, existing.run_id, existing.source)
            else:
                reg = _log_and_register(client, model_name, src, flavor, base_ref or {}, tags, check_hashes,
                                        serving=serving, prompt_prefix=params.variant(src.name).prompt_prefix)
            result[src.name] = reg
            if src.kind == "full":
                full_by_dir[src.model_dir] = reg

        newest = max(result.values(), key=lambda r: int(r.version))
        client.set_registered_model_alias(model_name, CANDIDATE, newest.version)
        tracking.log_dict({n: asdict(r) for n, r in result.items()}, "register.json")
    return result


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
    }


def _log_and_register(client: Any, model_name: str, src: VariantSource, flavor: str, base_ref: dict[str, Any],
                      tags: dict[str, str], check_hashes: bool, *, serving: Any = None,
                      prompt_prefix: dict[str, str] | None = None) -> RegisteredVersion:
    """Package, upload, verify, then (only then) create the version.

    With ``serving`` (:class:`biaslab.serving.settings.ServingSettings`) the package is a ``python_function``
    model that ``mlflow.pyfunc.load_model`` rebuilds with biaslab's loader (:mod:`biaslab.serving`).
    """
    from mlflow.store.artifact.runs_artifact_repo import RunsArtifactRepository

    from biaslab import tracking
    from biaslab.serving.package import package_servable

    artifact_path = f"variant_{src.name}"
    with tempfile.TemporaryDirectory(prefix=f"register-{src.name}-") as tmp:
        package = Path(tmp) / "package"
        package_variant(src, package, flavor=flavor, base_reference=base_ref)
        if serving is not None:
            package_servable(package, src, flavor=flavor, base_reference=base_ref, model_name=model_name,
                             settings=serving, prompt_prefix=prompt_prefix or src.prompt_prefix)
        manifest = file_manifest(package)
        run_tags = {"content_hash": tags["content_hash"], "model_fingerprint": tags["model_fingerprint"]}
        with tracking.stage_run("register", variant=src.name, nested=True, tags=run_tags) as run:
            run_id = run.info.run_id
            tracking.log_params({"variant": src.name, "method": src.method, "kind": src.kind,
                                 "base_model": tags.get("base_model", ""), "format": tags["format"]})
            tracking.log_artifact(package, artifact_path)
            verify_logged(client, run_id, artifact_path, manifest, check_hashes=check_hashes)
    source = RunsArtifactRepository.get_underlying_uri(f"runs:/{run_id}/{artifact_path}")
    mv = client.create_model_version(model_name, source, run_id=run_id, tags=tags,
                                     description=f"{src.name} ({src.method})")
    return RegisteredVersion(src.name, str(mv.version), tags["content_hash"], False, run_id, source)


def write_register_json(result: dict[str, RegisteredVersion], model_name: str,
                        path: str | os.PathLike[str] = REGISTER_JSON) -> None:
    """``runs/register.json``: variant -> version, plus the details downstream stages may want."""
    newest = max(result.values(), key=lambda r: int(r.version)) if result else None
    run_file.write(
        path,
        model_name=model_name,
        versions={n: r.version for n, r in result.items()},
        candidate=newest.version if newest else None,
        details={n: asdict(r) for n, r in result.items()},
    )


# =========================================================================== gate
@dataclass
class ConditionResult:
    """One gate condition, evaluated: the numbers, the verdict, and why."""

    metric: str
    rule: str
    tolerance: float
    variant_value: float | None
    variant_ci: tuple[float, float] | None
    base_value: float | None
    base_ci: tuple[float, float] | None
    direction: str | None
    passed: bool
    reason: str


def _ci(mv: MetricValue) -> tuple[float, float] | None:
    if mv.ci_low is None or mv.ci_high is None or not (math.isfinite(mv.ci_low) and math.isfinite(mv.ci_high)):
        return None
    return (float(mv.ci_low), float(mv.ci_high))


def _distance_interval(ci: tuple[float, float], ideal: float) -> tuple[float, float]:
    """The interval of |x - ideal| for x in ``ci``: [0, far] when ``ideal`` lies inside the CI."""
    lo, hi = ci
    near, far = sorted((abs(lo - ideal), abs(hi - ideal)))
    return (0.0, far) if lo <= ideal <= hi else (near, far)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def check_condition(cond: GateCondition, variant: MetricValue | None, base: MetricValue | None) -> ConditionResult:
    """Evaluate one condition. Rules (``t`` = ``tolerance``, ``v`` variant, ``b`` base):

    * ``better_than_base_beyond_ci`` - better in the metric's direction *and* the CIs are disjoint by
      more than ``t``: ``higher``: v.ci_low - b.ci_high > t; ``lower``: b.ci_low - v.ci_high > t;
      ``target``: with d(CI) the interval of |x - ideal| over the CI (``[0, far]`` if the CI contains
      the ideal), b.d_low - v.d_high > t. Fails when either CI is missing.
    * ``not_worse_than_base_minus`` - ``higher``: v >= b - t; ``lower``: v <= b + t;
      ``target``: |v - ideal| <= |b - ideal| + t.
    * ``at_most`` / ``at_least`` - v <= t / v >= t (``tolerance`` is the threshold; no base needed).
    """
    rule, t = cond.rule, cond.tolerance

    def result(passed: bool, reason: str) -> ConditionResult:
        return ConditionResult(
            metric=cond.metric, rule=rule, tolerance=t,
            variant_value=variant.value if variant else None, variant_ci=_ci(variant) if variant else None,
            base_value=base.value if base else None, base_ci=_ci(base) if base else None,
            direction=variant.direction if variant else (base.direction if base else None),
            passed=passed, reason=reason,
        )

    if variant is None or not math.isfinite(variant.value):
        return result(False, "metric missing or not computed for the variant")
    v = variant.value
    if rule == "at_most":
        return result(v <= t, f"{_fmt(v)} {'<=' if v <= t else '>'} {_fmt(t)}")
    if rule == "at_least":
        return result(v >= t, f"{_fmt(v)} {'>=' if v >= t else '<'} {_fmt(t)}")
    if base is None or not math.isfinite(base.value):
        return result(False, "metric missing or not computed for the base")
    b, direction = base.value, variant.direction
    ideal = variant.ideal if variant.ideal is not None else (base.ideal if base.ideal is not None else 0.0)

    if rule == "not_worse_than_base_minus":
        if direction == "higher":
            ok, why = v >= b - t, f"{_fmt(v)} vs base - tol = {_fmt(b - t)} (higher is better)"
        elif direction == "lower":
            ok, why = v <= b + t, f"{_fmt(v)} vs base + tol = {_fmt(b + t)} (lower is better)"
        else:
            dv, db = abs(v - ideal), abs(b - ideal)
            ok, why = dv <= db + t, f"|v-ideal| = {_fmt(dv)} vs |base-ideal| + tol = {_fmt(db + t)}"
        return result(ok, ("ok: " if ok else "worse than allowed: ") + why)

    # better_than_base_beyond_ci
    vci, bci = _ci(variant), _ci(base)
    if vci is None or bci is None:
        return result(False, "no confidence interval for the " + ("variant" if vci is None else "base")
                      + "; cannot claim an improvement beyond the CI")
    if direction == "higher":
        gap, how = vci[0] - bci[1], f"variant ci_low {_fmt(vci[0])} vs base ci_high {_fmt(bci[1])}"
    elif direction == "lower":
        gap, how = bci[0] - vci[1], f"variant ci_high {_fmt(vci[1])} vs base ci_low {_fmt(bci[0])}"
    else:
        dv, db = _distance_interval(vci, ideal), _distance_interval(bci, ideal)
        gap = db[0] - dv[1]
        how = f"variant |x-{ideal:g}| <= {_fmt(dv[1])} vs base |x-{ideal:g}| >= {_fmt(db[0])}"
    if gap > t:
        return result(True, f"better beyond CI: {how}")
    if (direction == "higher" and v <= b) or (direction == "lower" and v >= b) or (
        direction == "target" and abs(v - ideal) >= abs(b - ideal)
    ):
        return result(False, f"not better than base ({_fmt(v)} vs {_fmt(b)}, {direction} is better)")
    return result(False, f"CIs overlap: {how}" + (f" (margin {_fmt(t)} required)" if t else ""))


def evaluate_gate(conditions: list[GateCondition], variant: VariantMetrics,
                  base: VariantMetrics) -> list[ConditionResult]:
    """Every condition of ``registry.gate`` for ``variant`` against ``base``."""
    return [check_condition(c, variant.metrics.get(c.metric), base.metrics.get(c.metric)) for c in conditions]


# =========================================================================== promote
@dataclass
class PromotionDecision:
    variant: str
    model_name: str
    version: str
    approved: bool
    results: list[ConditionResult]
    timestamp: str

    @property
    def reasons(self) -> list[str]:
        return [f"{'PASS' if r.passed else 'FAIL'} {r.metric} {r.rule}: {r.reason}" for r in self.results]


def find_variant_version(client: Any, model_name: str, variant: str, register_json: Path | None = None) -> Any:
    """The registered version of ``variant``: from ``runs/register.json`` if present, else the newest tagged one."""
    from mlflow.exceptions import MlflowException

    if register_json is not None:
        version = run_file.registered_versions(register_json).get(variant)
        if version is not None:
            try:
                mv = client.get_model_version(model_name, str(version))
                if mv.tags.get("variant") == variant:
                    return mv
            except MlflowException:
                pass
    try:
        found = client.search_model_versions(f"name = '{model_name}' and tags.variant = '{variant}'")
    except MlflowException:
        found = []
    if not found:
        raise RegistryError(
            f"variant {variant!r} has no version in registered model {model_name!r}; "
            "run the register stage first (`dvc repro register`)"
        )
    return max(found, key=lambda mv: int(mv.version))


def promote(
    params: Params,
    variant: str,
    root: str | os.PathLike[str] = ".",
    *,
    metrics_dir: str = "metrics",
    base_variant: str = "base",
    register_json: str | os.PathLike[str] = REGISTER_JSON,
) -> PromotionDecision:
    """Gate ``variant`` against ``base_variant``; alias ``champion`` if it passes; tag the decision either way."""
    params.variant(variant)  # unknown variant -> ConfigError listing the known ones
    if base_variant not in params.variants:
        known = ", ".join(params.variants)
        raise ConfigError(f"base variant {base_variant!r} is not in params.yaml variants ({known})")
    root = Path(root)
    vm = metrics_file.read(root / metrics_dir / f"{variant}.json", variant)
    bm = metrics_file.read(root / metrics_dir / f"{base_variant}.json", base_variant)
    model_name = params.registry.model_name
    client = _client()
    mv = find_variant_version(client, model_name, variant, root / register_json)

    results = evaluate_gate(list(params.registry.gate), vm, bm)
    registered_fp = mv.tags.get("model_fingerprint")
    if vm.model_fingerprint and registered_fp and vm.model_fingerprint != registered_fp:
        results.append(ConditionResult(
            "model_fingerprint", "evidence_matches_version", 0.0, None, None, None, None, None, False,
            f"metrics/{variant}.json is for model {vm.model_fingerprint}, version {mv.version} holds "
            f"{registered_fp}; re-run `dvc repro`",
        ))
    if not params.registry.gate:
        results.append(ConditionResult("-", "gate_defined", 0.0, None, None, None, None, None, False,
                                       "registry.gate in params.yaml is empty; refusing to promote without a gate"))
    approved = all(r.passed for r in results)
    decision = PromotionDecision(variant, model_name, str(mv.version), approved, results,
                                 datetime.now(timezone.utc).isoformat(timespec="seconds"))
    record_decision(client, decision)
    if approved:
        client.set_registered_model_alias(model_name, CHAMPION, decision.version)
    return decision


def record_decision(client: Any, decision: PromotionDecision) -> None:
    """Write the decision and its evidence as ``promotion.*`` tags on the model version."""
    evidence = [
        {k: v for k, v in asdict(r).items() if v is not None} for r in decision.results
    ]
    tags = {
        "promotion.decision": "approved" if decision.approved else "refused",
        "promotion.reasons": "; ".join(decision.reasons)[:5000],
        "promotion.timestamp": decision.timestamp,
        "promotion.evidence": json.dumps(evidence, sort_keys=True)[:5000],
    }
    for key, value in tags.items():
        client.set_model_version_tag(decision.model_name, decision.version, key, value)
