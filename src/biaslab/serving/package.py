"""Make a version's package a ``python_function`` model: ``MLmodel``, environment files, the ``biaslab`` flavour.

The register stage builds a package per variant (:func:`biaslab.registry.package.package_variant`); this module
adds what ``mlflow.pyfunc.load_model`` needs, without touching the model files already there:

* ``MLmodel`` - flavour ``python_function`` with ``loader_module: biaslab.serving.loader`` (the contract of
  :mod:`.contract`, its signature and an input example), and flavour ``biaslab`` recording what the
  loader rebuilds: the variant's kind, where its checkpoint is (``model`` for the transformers layout,
  ``.`` for a byte copy), its prompt prefixes, the pinned base version of an overlay or prompt variant,
  and the :class:`~.settings.ServingSettings`. A full model registered with the ``transformers`` flavour
  keeps it (``mlflow.transformers.load_model`` still works); only its ``python_function`` entry now
  points at biaslab's loader, so every kind answers the same contract.
* ``requirements.txt`` / ``python_env.yaml`` / ``conda.yaml`` - explicit pins of the installed packages the
  loader imports (MLflow's default probe imports optional packages and fails). biaslab itself is not on
  PyPI: serve in an environment where it is installed (``mlflow models serve --env-manager local``).

Weights are never loaded or re-saved here: the package keeps the checkpoint's bytes and dtype, and an
overlay or prompt package holds only its own files (adapter, hook, prefixes), never the base's weights.
"""

from __future__ import annotations

import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

from biaslab.serving.settings import ServingSettings

LOADER_MODULE = "biaslab.serving.loader"
FLAVOR = "biaslab"
# bump when the package layout or the predict contract changes: it is part of a version's content hash,
# so packages of an older layout are registered again instead of being reused. 2: biaslab_manifest.json in every
# package, its hash a param of the registering run (packages of format 1 have neither and do not load)
FORMAT_VERSION = 2
_REQUIREMENTS = ("mlflow", "torch", "transformers", "tokenizers", "safetensors", "pandas")
_OVERLAY_REQUIREMENTS = ("peft",)
MLFLOW_FILES = ("MLmodel", "requirements.txt", "python_env.yaml", "conda.yaml", "input_example.json",
                "serving_input_example.json")


def serving_identity(settings: ServingSettings) -> dict[str, Any]:
    """What of the serving packaging changes a version's content (hashed with the model files)."""
    return {"format": FORMAT_VERSION, **settings.to_dict()}


def requirements(kind: str) -> list[str]:
    """``name==version`` of every package the loader imports for ``kind``, from the installed versions."""
    names = _REQUIREMENTS + (_OVERLAY_REQUIREMENTS if kind == "overlay" else ())
    pins = []
    for name in names:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return pins


def flavor_config(*, variant: str, method: str, kind: str, checkpoint: str | None, prompt_prefix: dict[str, str],
                  base: dict[str, Any] | None, settings: ServingSettings) -> dict[str, Any]:
    """The ``biaslab`` flavour: everything :mod:`.loader` needs besides the files."""
    if kind == "full" and checkpoint is None:
        raise ValueError(f"variant {variant!r}: a full model needs its checkpoint directory")
    return {
        "format_version": FORMAT_VERSION,
        "variant": variant,
        "method": method,
        "kind": kind,
        "checkpoint": checkpoint,
        "prompt_prefix": dict(prompt_prefix),
        "base": dict(base) if base else None,
        "settings": settings.to_dict(),
    }


def make_servable(package: str | Path, config: dict[str, Any], *, model_kind: str) -> None:
    """Write the pyfunc files of ``config`` (:func:`flavor_config`) into ``package``.

    ``model_kind`` (``causal`` / ``masked``) only picks the input example. An ``MLmodel`` already in the
    package (the transformers flavour) is kept and extended.
    """
    import mlflow.pyfunc
    from mlflow.models import Model

    from biaslab.serving.contract import input_example, signature

    package = Path(package)
    existing = package / "MLmodel"
    mlmodel = Model.load(str(existing)) if existing.is_file() else Model()
    mlmodel.add_flavor(FLAVOR, **config)
    with tempfile.TemporaryDirectory(prefix="pyfunc-") as tmp:
        out = Path(tmp) / "pyfunc"
        mlflow.pyfunc.save_model(
            str(out),
            loader_module=LOADER_MODULE,
            mlflow_model=mlmodel,
            signature=signature(),
            input_example=input_example(model_kind),
            pip_requirements=requirements(config["kind"]),
        )
        for file in out.iterdir():
            if file.is_dir():
                raise RuntimeError(f"mlflow.pyfunc.save_model wrote a directory {file.name!r}; not expected")
            target = package / file.name
            if target.exists() and not existing.is_file():
                raise RuntimeError(f"{package}: the model's own file {file.name!r} would be overwritten by MLflow's")
            shutil.copyfile(file, target)


def model_kind_of(checkpoint: Path, settings: ServingSettings) -> str:
    """``causal`` or ``masked``: ``model.kind``, else what the checkpoint's config says."""
    if settings.model_kind != "auto":
        return settings.model_kind
    from transformers import AutoConfig

    from biaslab.models.load import detect_kind

    return detect_kind(AutoConfig.from_pretrained(str(checkpoint), trust_remote_code=settings.trust_remote_code))


def package_servable(package: str | Path, src: Any, *, flavor: str, base_reference: dict[str, Any] | None,
                     model_name: str, settings: ServingSettings, prompt_prefix: dict[str, str]) -> None:
    """Make the package of a :class:`biaslab.registry.sources.VariantSource` servable (called by the register stage).

    A full model's checkpoint is ``model/`` in the transformers layout and the package root in a byte copy
    (``flavor="artifacts"``); an overlay or prompt version pins its base's registered version.
    """
    from biaslab.serving.base import base_pin

    checkpoint = ("model" if flavor == "transformers" else ".") if src.kind == "full" else None
    config = flavor_config(variant=src.name, method=src.method, kind=src.kind, checkpoint=checkpoint,
                           prompt_prefix=prompt_prefix, base=base_pin(base_reference or {}, model_name),
                           settings=settings)
    make_servable(package, config, model_kind=model_kind_of(src.base_dir or src.model_dir, settings))
