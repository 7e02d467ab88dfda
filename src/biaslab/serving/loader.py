"""The ``loader_module`` of every registered version: ``_load_pyfunc`` rebuilds the variant and its scorer.

MLflow calls :func:`_load_pyfunc` with the version's local directory. The ``biaslab`` flavour of its
``MLmodel`` (:mod:`.package`) says what to build, with biaslab's own loader (:mod:`biaslab.models.load`):

* ``full``    - the checkpoint in the package (``model/`` or the root), in its stored dtype;
* ``overlay`` - the pinned base version's checkpoint (:func:`.base.resolve_base`) plus the package's LoRA
  adapter and/or embedding hook (:func:`biaslab.models.load.apply_overlay`);
* ``prompt``  - the pinned base version; the prefixes are applied per request by :mod:`.predictor`.

Before anything is built, every file of the package is hashed and compared with its
``biaslab_manifest.json`` (:mod:`.manifest`; an overlay's base with the manifest hash its pin records): a
changed file refuses to load, naming it. Whether the package's code may run (``trust_remote_code``) or
pickles may load (``allow_pickle``) is the serving host's decision (:class:`.settings.HostOptions`), never the
package's; the checkpoint is where the layout puts it (``model/`` or the root), never a path the package names.

The compute device/dtype follow ``scoring.dtype`` (and ``model.device_map``) as in evaluation (:func:`biaslab.scoring.device.resolve_placement`:
a CUDA GPU when there is one, else the CPU in float32); the stored files are never changed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from biaslab.errors import BiaslabError
from biaslab.serving.predictor import ServedVariant


class ServingError(BiaslabError):
    """A version's package is not a biaslab pyfunc package or cannot be rebuilt."""


def read_flavor(path: str | Path) -> dict[str, Any]:
    """The ``biaslab`` flavour of the ``MLmodel`` in ``path``."""
    import yaml

    from biaslab.serving.package import FLAVOR, FORMAT_VERSION

    mlmodel = Path(path) / "MLmodel"
    if not mlmodel.is_file():
        raise ServingError(f"{path}: no MLmodel file; not an MLflow model")
    flavors = (yaml.safe_load(mlmodel.read_text(encoding="utf-8")) or {}).get("flavors") or {}
    conf = flavors.get(FLAVOR)
    if conf is None:
        raise ServingError(f"{mlmodel}: no '{FLAVOR}' flavour; the version was registered before biaslab versions "
                           "were servable - run `dvc repro register` to register it again")
    if int(conf.get("format_version", 0)) > FORMAT_VERSION:
        raise ServingError(f"{mlmodel}: package format {conf['format_version']} is newer than this biaslab "
                           f"({FORMAT_VERSION}); upgrade biaslab")
    return conf


def load_served_variant(path: str | Path, host: Any = None, *, base: Any = None) -> ServedVariant:
    """Rebuild the variant a version's directory describes (see the module docstring).

    ``host``: the serving host's :class:`~.settings.HostOptions` (default: from the environment).
    ``base``: a :class:`~.base.VerifiedBase` the caller has already downloaded and verified into its own folder
    (the promoter's re-scoring check): an overlay or prompt version loads on it instead of resolving its pin
    again, only if the pin names exactly that version (else :class:`~.base.BaseResolutionError`); ``path`` being
    that very package (the base's own load) is not hashed again; any other full version ignores it. ``serve``
    and MLflow's entry point never pass it."""
    from biaslab.models.load import apply_overlay, load_model, make_scorer
    from biaslab.scoring.device import resolve_placement
    from biaslab.serving.base import checkpoint_dir, resolve_base
    from biaslab.serving.manifest import verify_package
    from biaslab.serving.settings import HostOptions, ServingSettings

    path = Path(path)
    if base is None or not base.is_package(path):
        verify_package(path)
    host = host or HostOptions.from_env()
    conf = read_flavor(path)
    settings = ServingSettings.from_dict(conf.get("settings") or {})
    kind = conf["kind"]
    if kind not in ("full", "overlay", "prompt"):
        raise ServingError(f"{path}: unknown variant kind {kind!r} in the biaslab flavour")
    if kind != "full" and not conf.get("base"):
        raise ServingError(f"{path}: {kind} version without a pinned base version; register its base variant "
                           "together with it (`dvc repro register`)")
    device, dtype = resolve_placement("auto", settings.dtype)
    with tempfile.TemporaryDirectory(prefix="biaslab-base-") as private:  # the base: checked and loaded from one copy
        if kind == "full":
            checkpoint = checkpoint_dir(path)
        elif base is not None:  # already verified in the caller's own copy: not downloaded and hashed again
            checkpoint = base.checkpoint_for(conf["base"])
        else:
            checkpoint = resolve_base(conf["base"], private_dir=Path(private))
        loaded = load_model(checkpoint, kind=settings.model_kind, trust_remote_code=host.trust_remote_code,
                            allow_pickle=host.allow_pickle, dtype=dtype, device_map=settings.device_map,
                            device=device)
    if kind == "overlay":
        loaded = apply_overlay(loaded, path)
    if settings.device_map is None:  # with a device map, accelerate has placed the layers already
        loaded.model.to(device)
    scorer = make_scorer(loaded, settings, prompt_format=settings.prompt_format)
    return ServedVariant(scorer, variant=conf.get("variant", ""), method=conf.get("method", ""), kind=kind,
                         prefixes=conf.get("prompt_prefix") or {})


def _load_pyfunc(data_path: str, model_config: dict[str, Any] | None = None) -> ServedVariant:
    """MLflow's entry point (``python_function`` flavour, ``loader_module``)."""
    return load_served_variant(data_path)
