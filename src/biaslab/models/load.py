"""Load any causal or masked LM (plus adapter or embedding edit) from a directory or hub id.

Security: weights load from safetensors only (``use_safetensors=True``); a directory holding only
pickle checkpoints (``*.bin``, ``*.pt``) is refused unless ``allow_pickle`` is set, and
``trust_remote_code`` is off unless the user opts in.

A *variant directory* (``models/<variant>/``) is one of:
* a full model (``config.json`` + ``*.safetensors``): base model, embedding-edited checkpoint;
* ``variant.json`` with ``{"base": "<dir>", ...}`` plus an adapter (``adapter_config.json``, LoRA), edited
  embedding rows (``embedding_rows.safetensors``) and/or a runtime hook spec (``embedding_hook.safetensors``),
  applied on top of the base.
Evaluation calls :func:`load_scorer` and never asks which kind it got.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biaslab.errors import BiaslabError
from biaslab.outputs import variant_dir
from biaslab.models.weights.files import PICKLE_SUFFIXES


class ModelLoadError(BiaslabError, RuntimeError):
    """The model cannot be loaded: not found offline, unsafe format, unknown architecture."""


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    kind: str  # "causal" | "masked"
    fingerprint: str
    source: str
    commit: str | None = None  # the hub commit the files came from (None: a local directory)


ADAPTER_WEIGHTS = "adapter_model.safetensors"


@contextlib.contextmanager
def corrupt_weights_as_error(where: str | os.PathLike[str]) -> Iterator[None]:
    """Within the block, a safetensors file that cannot be read (truncated, corrupted header) is one
    :class:`ModelLoadError` line naming the folder, not a traceback from the Rust reader."""
    from safetensors import SafetensorError

    try:
        yield
    except SafetensorError as exc:
        first = (str(exc).splitlines() or [""])[0]
        raise ModelLoadError(f"{where}: a safetensors file is corrupted or truncated ({first}); rebuild it "
                             "(`dvc repro`) or download it again") from None


def check_safe(path: Path, allow_pickle: bool) -> None:
    """Refuse a directory holding only pickle checkpoints unless ``allow_pickle`` (pickle can run code)."""
    files = [p.name for p in path.iterdir()]
    has_safetensors = any(f.endswith(".safetensors") for f in files)
    pickles = [f for f in files if f.endswith(PICKLE_SUFFIXES) and not f.startswith("training_args")]
    if not has_safetensors and pickles and not allow_pickle:
        raise ModelLoadError(
            f"{path}: only pickle checkpoints found ({', '.join(sorted(pickles))}); pickle can execute code "
            "when loaded. Convert to safetensors, or set model.allow_pickle: true in params.yaml if you trust it."
        )


def detect_kind(config: Any) -> str:
    archs = " ".join(getattr(config, "architectures", None) or [])
    if any(k in archs for k in ("MaskedLM", "ForPreTraining")) or getattr(config, "is_decoder", None) is False and (
        config.model_type in {"bert", "roberta", "xlm-roberta", "distilbert", "electra", "deberta-v2", "camembert"}
    ):
        return "masked"
    return "causal"


def load_model(
    source: str | os.PathLike[str],
    *,
    kind: str = "auto",
    trust_remote_code: bool = False,
    allow_pickle: bool = False,
    revision: str | None = None,
    dtype: str = "auto",
    device_map: str | dict[str, Any] | None = None,
    quantization_config: Any | None = None,
    device: str | None = None,
    fingerprint: str | None = None,
) -> LoadedModel:
    """Load a model and its tokenizer from a local directory, or a hub id (cache or network).

    ``dtype="auto"`` loads what the checkpoint stores (``config.json``'s ``dtype``, which biaslab's own
    model directories always state); a dtype name casts in memory only (e.g. float32 compute on a CPU).
    ``device_map`` (params ``model.device_map``) spreads the layers over several devices with accelerate
    (``"auto"``, ``"balanced"``, ``"cpu"`` or ``{module: device}``) for a model that does not fit one GPU;
    the scorer then feeds inputs to the device of the input embeddings and reads logits where they land.
    ``quantization_config`` (a ``transformers.BitsAndBytesConfig``) loads a k-bit base for QLoRA training
    (:func:`biaslab.mitigation.lora.training_plan.load_for_training`).
    ``device`` (the resolved ``scoring.device``) without a ``device_map``: the weights are created there
    in ``dtype`` (``device_map=device``), not built on the CPU and moved; ``"cpu"`` keeps the plain load.

    A hub id is loaded at one commit (:func:`biaslab.models.hub.resolve_commit`), recorded in ``commit``; a hub
    failure (gated or missing repository, wrong revision, offline) is a :class:`ModelLoadError` carrying the
    hub's own message and what to do (:func:`biaslab.models.hub.explain`).

    ``fingerprint``: a local directory's fingerprint when the caller has it (a
    :class:`~biaslab.outputs.variant_dir.ResolvedVariant`'s), so the checkpoint is not hashed again here.
    """
    source = str(source)
    if device_map is None and device not in (None, "cpu"):  # straight onto the scoring device
        device_map = device  # transformers: {"": torch.device(device)}
    local = Path(source)
    if local.exists():
        if not local.is_dir() or not (local / "config.json").is_file():
            raise ModelLoadError(f"{local}: not a model directory (no config.json)")
        check_safe(local, allow_pickle)
        return _load(source, kind, trust_remote_code, allow_pickle, revision, dtype, device_map, quantization_config,
                     commit=None, fingerprint=fingerprint)
    from biaslab.models import hub

    try:
        resolved = hub.resolve_commit(source, revision)
        return _load(source, kind, trust_remote_code, allow_pickle, resolved, dtype, device_map, quantization_config,
                     commit=resolved.resolved)
    except Exception as exc:
        message = hub.explain(exc, source, revision)
        if message is None:
            raise
        raise ModelLoadError(message) from exc


def _load(source: str, kind: str, trust_remote_code: bool, allow_pickle: bool, revision: str | None, dtype: str,
          device_map: str | dict[str, Any] | None = None, quantization_config: Any | None = None, *,
          commit: str | None, fingerprint: str | None = None) -> LoadedModel:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    config = AutoConfig.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code)
    if kind == "auto":
        kind = detect_kind(config)
    auto = AutoModelForMaskedLM if kind == "masked" else AutoModelForCausalLM
    torch_dtype = getattr(torch, dtype) if dtype != "auto" else "auto"
    with corrupt_weights_as_error(source):
        model = auto.from_pretrained(
            source,
            revision=revision,
            trust_remote_code=trust_remote_code,
            use_safetensors=not allow_pickle or None,
            dtype=torch_dtype,
            **({"device_map": device_map} if device_map is not None else {}),
            **({"quantization_config": quantization_config} if quantization_config is not None else {}),
        )
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code)
    if commit is not None:
        fp = f"hub:{source}@{commit}"
    else:
        fp = fingerprint if fingerprint is not None else variant_dir.fingerprint_dir(source)
    return LoadedModel(model, tokenizer, kind, fp, source, commit)


def load_variant_model(model_dir: str | os.PathLike[str] | variant_dir.ResolvedVariant, manifest: Any = ...,
                       **kwargs: Any) -> LoadedModel:
    """Load a variant directory: a full model, or a base + adapter and/or runtime embedding hook.

    ``model_dir``: the directory, or its :class:`~biaslab.outputs.variant_dir.ResolvedVariant` (what the
    evaluate stage passes: the manifest read once, each fingerprint computed once, kept by that object).
    ``manifest``: with a path, the directory's ``variant.json`` as :func:`biaslab.outputs.variant_dir.read_manifest`
    returned it (``None`` for a full model), when the caller has read it already; else it is read here.
    """
    if isinstance(model_dir, variant_dir.ResolvedVariant):
        resolved = model_dir
    else:
        resolved = variant_dir.resolve(model_dir, ".", manifest)
    if not resolved.directory.is_dir():
        raise ModelLoadError(f"{resolved.directory}: variant directory not found; run `dvc repro` to build it")
    if resolved.manifest is None:
        return load_model(resolved.directory, fingerprint=_local_fingerprint(resolved), **kwargs)
    base = resolved.base
    if base is None:  # not a local directory: a hub id (fingerprinted by its commit), or missing (load_model says so)
        loaded = load_model(resolved.base_ref, **kwargs)
    else:
        loaded = load_model(base.directory, fingerprint=_local_fingerprint(base), **kwargs)
    return apply_overlay(loaded, resolved.directory, own_fingerprint=resolved.own_fingerprint)


def _local_fingerprint(resolved: variant_dir.ResolvedVariant) -> str | None:
    """A model directory's fingerprint, once it is known to be one (else ``load_model``'s own error comes first)."""
    return resolved.own_fingerprint if (resolved.directory / "config.json").is_file() else None


def apply_overlay(loaded: LoadedModel, overlay_dir: str | os.PathLike[str],
                  own_fingerprint: str | None = None) -> LoadedModel:
    """Put an overlay's LoRA adapter (``adapter_config.json``), edited embedding rows and/or embedding hook on a
    loaded base.

    Shared by :func:`load_variant_model` and the serving loader (which finds the base in the registry).
    ``own_fingerprint``: the overlay directory's fingerprint when the caller has it.
    """
    overlay_dir = Path(overlay_dir)
    if (overlay_dir / "adapter_config.json").is_file():
        from peft import PeftModel

        from biaslab.models.peft_notices import quiet_checkpointing_deprecation

        if not (overlay_dir / ADAPTER_WEIGHTS).is_file():  # PEFT would fall back to a pickled adapter_model.bin
            found = sorted(p.name for p in overlay_dir.glob("adapter_model.*"))
            raise ModelLoadError(f"{overlay_dir}: no {ADAPTER_WEIGHTS} (found {found or 'no adapter weights'}); "
                                 "adapters load from safetensors only, never a pickled .bin")
        with quiet_checkpointing_deprecation(), corrupt_weights_as_error(overlay_dir):
            loaded.model = PeftModel.from_pretrained(loaded.model, str(overlay_dir))
        loaded.model.eval()
    if (overlay_dir / "embedding_rows.safetensors").is_file():
        from biaslab.models.embedding_rows import apply_rows_from_dir

        with corrupt_weights_as_error(overlay_dir):
            try:
                apply_rows_from_dir(loaded.model, overlay_dir)
            except ValueError as exc:
                raise ModelLoadError(str(exc)) from None
    if (overlay_dir / "embedding_hook.safetensors").is_file():
        from biaslab.models.embedding_hook import attach_hook_from_dir

        with corrupt_weights_as_error(overlay_dir):
            attach_hook_from_dir(loaded.model, loaded.tokenizer, overlay_dir)
    loaded.fingerprint = variant_dir.overlay_fingerprint(loaded.fingerprint, overlay_dir, own=own_fingerprint)
    loaded.source = str(overlay_dir)
    return loaded


def make_scorer(loaded: LoadedModel, scoring_cfg: Any | None = None, prompt_prefix: str = "",
                prompt_format: str = "raw"):
    """The :class:`~biaslab.scoring.protocol.Scorer` for a loaded model: causal or masked by its kind.

    ``scoring_cfg`` is params' ``scoring`` section (batching, ``add_bos``, result cache);
    ``prompt_format`` is ``evaluation.prompt_format`` (``raw`` or ``chat``, causal LMs only).
    """
    batch_size = getattr(scoring_cfg, "batch_size", "auto")
    max_batch_tokens = getattr(scoring_cfg, "max_batch_tokens", 1024)
    if loaded.kind == "masked":
        from biaslab.scoring.masked import MaskedScorer

        if prompt_format != "raw":
            raise ModelLoadError(f"params.yaml evaluation.prompt_format: {prompt_format}, but {loaded.source} is a "
                                 "masked LM (no chat template, no prompts to wrap); use raw")
        return MaskedScorer(loaded.model, loaded.tokenizer, batch_size=batch_size, max_batch_tokens=max_batch_tokens,
                            prompt_prefix=prompt_prefix)
    from biaslab.scoring.causal import CausalScorer

    cache = None
    if getattr(scoring_cfg, "cache_dir", None):
        from biaslab.scoring.cache import ScoreCache

        # the dtype changes the numbers, so it is part of the model's identity for cached scores
        dtype = str(next(loaded.model.parameters()).dtype).removeprefix("torch.")
        cache = ScoreCache(scoring_cfg.cache_dir, f"{loaded.fingerprint}-{dtype}")
    return CausalScorer(
        loaded.model, loaded.tokenizer, batch_size=batch_size, max_batch_tokens=max_batch_tokens,
        prompt_prefix=prompt_prefix, cache=cache, add_bos=getattr(scoring_cfg, "add_bos", "auto"),
        prompt_format=prompt_format, prefix_sharing=getattr(scoring_cfg, "prefix_sharing", "auto"),
    )
