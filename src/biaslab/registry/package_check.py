"""The promoter's package: what a variant's version must be by the promoter's ``params.yaml``, checked against
the downloaded files, and the champion's files rebuilt from them.

A worker writes everything in its package - the files, the ``MLmodel``, its manifest - and the params of its
registering run. None of that decides what is served (docs/champion.md, "The package is the promoter's"):

* the **kind** (full, overlay, prompt) comes from the variant's method in the promoter's ``params.yaml``
  (:func:`expected_kind`); the registering run's ``kind`` param and the package's ``MLmodel`` must agree;
* the **evaluated bytes** are checked for every kind: a full model's checkpoint, an overlay's own files on the
  verified base (:func:`biaslab.outputs.variant_dir.overlay_fingerprint`), a prompt's base - each must be what
  its evaluate run measured; the base's checkpoint must be what the base's evaluate run measured;
* the **content hash** is recomputed from those fingerprints and the promoter's serving settings;
* the **MLmodel** must name biaslab's loader and nothing that runs the package's code (``code``,
  ``python_model``, ``model_code_path``, ``artifacts``, ``data``); its ``biaslab`` settings, prompt prefix and
  (overlay, prompt) base pin must be the promoter's - the pin the approved base version's manifest;
* the **champion's files** (:func:`build_champion`) are only an allowed set - the checkpoint's or overlay's
  model files by name (no Python, no pickles unless the promoter's ``params.yaml`` allows them; documents) -
  plus an ``MLmodel`` and environment files the promoter writes itself.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biaslab.registry.gate import RuleResult

FORBIDDEN_PYFUNC_KEYS = ("code", "python_model", "model_code_path", "artifacts", "data")
KNOWN_FLAVORS = frozenset({"python_function", "biaslab", "transformers"})
DOCUMENTS = ("LICENSE.txt", "model_card.md")  # copied as they are: text a person reads, nothing loads them
BASE_REFERENCE, PROMPT_FILE = "base_reference.json", "prompt.json"


def packaging_files() -> frozenset[str]:
    """Top-level names of a package that are the packaging's, not the model's."""
    from biaslab.serving.manifest import MANIFEST_FILE, MLFLOW_LOAD_FILES
    from biaslab.serving.package import MLFLOW_FILES

    return frozenset({*MLFLOW_FILES, MANIFEST_FILE, *MLFLOW_LOAD_FILES, BASE_REFERENCE, PROMPT_FILE, *DOCUMENTS})


def expected_kind(cfg: Any) -> str:
    """``full``, ``overlay`` or ``prompt``: what a variant of ``params.yaml`` (a :class:`biaslab.config.VariantConfig`)
    is registered as, by its method - never by what its registrant says."""
    if cfg.method == "prompt":
        return "prompt"
    if cfg.method == "lora" or (cfg.method == "embedding" and cfg.embedding_apply != "checkpoint"):
        return "overlay"
    return "full"


@dataclass
class Expected:
    """What the promoter's ``params.yaml`` says the version of ``variant`` is and how it is served."""

    variant: str
    method: str
    kind: str
    prompt_prefix: dict[str, str]
    settings: Any  # biaslab.serving.settings.ServingSettings

    @classmethod
    def of(cls, params: Any, variant: str) -> "Expected":
        from biaslab.serving.settings import ServingSettings

        cfg = params.variant(variant)
        return cls(variant, cfg.method, expected_kind(cfg), dict(cfg.prompt_prefix), ServingSettings.from_params(params))


def _failed(metric: str, rule: str, reason: str) -> RuleResult:
    return RuleResult(metric, rule, "the promoter's package (params.yaml, verified bytes)", False, reason)


def read_mlmodel(package: Path) -> dict[str, Any]:
    import yaml

    path = Path(package) / "MLmodel"
    if not path.is_file():
        return {}
    try:
        body = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError):
        return {}
    return body if isinstance(body, dict) else {}


def mlmodel_problems(package: Path, expected: Expected | None = None) -> list[str]:
    """What is wrong with the package's ``MLmodel`` for a biaslab version (empty: nothing). Without ``expected``
    only what would run the package's code: another loader, code paths, pickled models, other flavours."""
    from biaslab.serving.package import FLAVOR, LOADER_MODULE

    flavors = read_mlmodel(package).get("flavors")
    if not isinstance(flavors, dict) or not isinstance(flavors.get("python_function"), dict):
        return ["MLmodel: no python_function flavour (not a biaslab package)"]
    pyfunc = flavors["python_function"]
    problems = []
    if pyfunc.get("loader_module") != LOADER_MODULE:
        problems.append(f"MLmodel: python_function loader_module {pyfunc.get('loader_module')!r}, not biaslab's "
                        f"{LOADER_MODULE!r}")
    problems += [f"MLmodel: python_function {key} {pyfunc[key]!r} (the package's own code or objects)"
                 for key in FORBIDDEN_PYFUNC_KEYS if pyfunc.get(key)]
    other = sorted(set(flavors) - KNOWN_FLAVORS)
    if other:
        problems.append(f"MLmodel: flavours {other} besides biaslab's")
    if expected is None:
        return problems
    conf = flavors.get(FLAVOR) if isinstance(flavors.get(FLAVOR), dict) else {}
    found = {"variant": conf.get("variant"), "method": conf.get("method"), "kind": conf.get("kind"),
             "prompt_prefix": conf.get("prompt_prefix") or {}, "settings": conf.get("settings")}
    wanted = {"variant": expected.variant, "method": expected.method, "kind": expected.kind,
              "prompt_prefix": expected.prompt_prefix, "settings": expected.settings.to_dict()}
    problems += [f"MLmodel: biaslab {key} {found[key]!r}, params.yaml says {wanted[key]!r}"
                 for key in wanted if found[key] != wanted[key]]
    return problems


def base_pin(package: Path) -> dict[str, Any] | None:
    from biaslab.serving.package import FLAVOR

    conf = (read_mlmodel(package).get("flavors") or {}).get(FLAVOR)
    return conf.get("base") if isinstance(conf, dict) else None


def approved_pin(model_name: str, base_variant: str, base_mv: Any, base_reg: dict[str, str]) -> dict[str, Any]:
    """The pin a champion overlay or prompt gets: the base version the gate compared against, by its manifest."""
    return {"registered_model": model_name, "version": str(base_mv.version), "content_hash": base_reg["content_hash"],
            "variant": base_variant, "manifest_sha256": base_reg["manifest_sha256"]}


def layout(package: Path) -> str:
    """``transformers`` (checkpoint in ``model/``) or ``artifacts`` (checkpoint at the root) of a full package."""
    return "transformers" if (Path(package) / "model" / "config.json").is_file() else "artifacts"


def checkpoint_fingerprint(package: Path) -> str:
    """The model fingerprint (:func:`biaslab.outputs.variant_dir.fingerprint_dir`) of a full version's checkpoint
    in ``package``: the identity its evaluate run recorded, recomputed from the files themselves (a checkpoint
    at the package root hashes without the package's own files around it)."""
    from biaslab.outputs.variant_dir import fingerprint_dir
    from biaslab.serving.base import checkpoint_dir
    from biaslab.serving.manifest import MANIFEST_FILE, MLFLOW_LOAD_FILES
    from biaslab.serving.package import MLFLOW_FILES

    checkpoint = checkpoint_dir(Path(package))
    packaging = frozenset({*MLFLOW_FILES, MANIFEST_FILE, *MLFLOW_LOAD_FILES})
    besides = packaging if checkpoint == Path(package).resolve() else frozenset()
    return fingerprint_dir(checkpoint, besides=besides, verify=True)  # proves the bytes: never the stat cache's word


def overlay_fingerprint(package: Path) -> str:
    """The fingerprint of an overlay package's own files (its variant directory as registered)."""
    from biaslab.outputs.variant_dir import fingerprint_dir

    return fingerprint_dir(package, besides=packaging_files(), verify=True)  # proves the bytes, as above


@dataclass
class PackageCheck:
    """The rows :func:`check_package` adds to the gate (failures only) and what the champion is built from."""

    rows: list[RuleResult]
    expected: Expected
    pin: dict[str, Any] | None  # overlay/prompt: the approved base version


def check_package(params: Any, expected: Expected, reg: dict[str, str], package: Path, evaluated_fp: str | None,
                  *, base: Path | None, base_evaluated_fp: str | None, pin: dict[str, Any]) -> PackageCheck:
    """The checks of the module doc on a verified ``package`` (and the verified ``base`` package, if any)."""
    from biaslab.registry.sources import identity_hash
    from biaslab.serving.package import serving_identity

    rows: list[RuleResult] = []
    kind = expected.kind
    if reg.get("kind") != kind:
        rows.append(_failed("package", "kind", f"variant {expected.variant!r} (method {expected.method}) is a {kind!r} "
                                               f"version by params.yaml; its registering run logged kind "
                                               f"{reg.get('kind')!r}"))
    if reg.get("method") and reg["method"] != expected.method:
        rows.append(_failed("package", "method", f"registering run logged method {reg['method']!r}, params.yaml "
                                                 f"says {expected.method!r}"))
    rows += [_failed("package", "mlmodel", p) for p in mlmodel_problems(package, expected)]
    base_fp = checkpoint_fingerprint(base) if base is not None else None
    if base is not None and base_fp != base_evaluated_fp:
        rows.append(_failed("base", "evaluated_bytes", f"the base version's checkpoint has fingerprint {base_fp}, "
                                                       f"the base's evaluate run measured {base_evaluated_fp}"))
    if kind == "full":
        fp = found_fp = checkpoint_fingerprint(package)
        identity = {"model": fp, "flavor": layout(package)}
    elif kind == "overlay":
        fp = overlay_fingerprint(package)
        found_fp = _overlay_on(base_fp, fp)
        identity = {"overlay": fp, "base": base_fp}
    else:
        found_fp = base_fp
        identity = {"base": base_fp, "prompt_prefix": expected.prompt_prefix}
    if found_fp != evaluated_fp:
        rows.append(_failed("files", "evaluated_bytes", f"the version's files have fingerprint {found_fp} ({kind}), "
                                                        f"its evaluate run {reg.get('evaluate_run_id')} measured "
                                                        f"{evaluated_fp}: not the evaluated weights"))
    chash = identity_hash(expected.variant, expected.method, kind, serving_identity(expected.settings), **identity)
    if chash != reg.get("content_hash"):
        rows.append(_failed("package", "content_hash", f"recomputed from the files and params.yaml: {chash}; the "
                                                       f"registering run logged {reg.get('content_hash')!r}"))
    if kind != "full":
        found = base_pin(package) or {}
        if (found.get("manifest_sha256") != pin["manifest_sha256"] or str(found.get("version")) != pin["version"]
                or found.get("registered_model") != pin["registered_model"]):
            rows.append(_failed("package", "base_pin", f"the package pins base version {found.get('version')!r} "
                                                       f"of {found.get('registered_model')!r} (manifest "
                                                       f"{found.get('manifest_sha256')!r}); the approved base is "
                                                       f"version {pin['version']} of {pin['registered_model']!r} "
                                                       f"(manifest {pin['manifest_sha256']})"))
    return PackageCheck(rows, expected, pin if kind != "full" else None)


def _overlay_on(base_fp: str | None, overlay_fp: str) -> str | None:
    """:func:`biaslab.outputs.variant_dir.overlay_fingerprint` from the two fingerprints."""
    import hashlib

    return hashlib.sha256((base_fp + overlay_fp).encode()).hexdigest()[:16] if base_fp else None


def _allowed(path: Path, params: Any) -> bool:
    from biaslab.models.weights.files import is_model_file

    return is_model_file(path.name, allow_pickle=params.model.allow_pickle,
                         trust_remote_code=params.model.trust_remote_code)


def build_champion(params: Any, check: PackageCheck, package: Path, dst: Path, *,
                   base: Path | None) -> tuple[Path, dict[str, str]]:
    """The champion's files in ``dst``: the allowed files of the verified ``package`` and the promoter's own
    ``MLmodel`` (biaslab's loader, the promoter's settings, the approved base pin).

    Returns ``dst`` and the sha256 of the files taken from ``package`` (``{path in dst: sha256}``), read from
    its manifest, which the promoter has just verified file by file (``promote``'s download, a folder of its
    own): the champion's manifests reuse them instead of hashing the checkpoint again. Weight files are staged
    as links to that download (:func:`biaslab.registry.package.stage_file`), not copied: the upload reads
    through them and ``verify_logged`` reads the upload back."""
    from biaslab.registry.package import stage_file
    from biaslab.serving.base import checkpoint_dir
    from biaslab.serving.manifest import read_manifest
    from biaslab.serving.package import flavor_config, make_servable, model_kind_of

    exp, package = check.expected, Path(package).resolve()
    dst.mkdir(parents=True)
    skip = packaging_files()
    listed = read_manifest(package)["files"]
    known: dict[str, str] = {}

    def take(file: Path, target: Path) -> None:
        stage_file(file, target)
        if (digest := listed.get(file.relative_to(package).as_posix())) is not None:
            known[target.relative_to(dst).as_posix()] = digest

    checkpoint = None
    if exp.kind == "full":
        source = checkpoint_dir(package)
        checkpoint = "model" if source != package else "."
        files = [p for p in sorted(source.iterdir()) if p.is_file() and _allowed(p, params)
                 and not (source == package and p.name in skip)]
        (dst / checkpoint).mkdir(exist_ok=True)
        for file in files:
            take(file, dst / checkpoint / file.name)
    elif exp.kind == "overlay":
        for file in sorted(package.iterdir()):
            if file.is_file() and file.name not in skip and _allowed(file, params):
                take(file, dst / file.name)
    else:
        (dst / PROMPT_FILE).write_text(json.dumps({"variant": exp.variant, "prompt_prefix": exp.prompt_prefix,
                                                   "base": check.pin}, ensure_ascii=False, indent=2,
                                                  sort_keys=True) + "\n", encoding="utf-8")
    for name in DOCUMENTS:
        if (package / name).is_file():
            shutil.copyfile(package / name, dst / name)
    config = flavor_config(variant=exp.variant, method=exp.method, kind=exp.kind, checkpoint=checkpoint,
                           prompt_prefix=exp.prompt_prefix, base=check.pin, settings=exp.settings)
    weights = dst / checkpoint if checkpoint else checkpoint_dir(base)
    make_servable(dst, config, model_kind=model_kind_of(weights, exp.settings))
    return dst, known
