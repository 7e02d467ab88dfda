"""Stage ``preflight``: the whole plan checked against this machine before any heavy work (docs/gpu.md).

    python -m pipelines.preflight --params params.yaml

The first stage of ``dvc repro`` (``raw_data`` depends on its record; DVC always runs it: it reads the machine,
not files). For the variants the active profile runs (docs/profiles.md), four checks, each failing in seconds
with one line that says what to change (:class:`PreflightError`):

* **device** - ``scoring.device: cuda`` needs a CUDA GPU torch can see;
* **packages and LoRA precision** - every LoRA variant the profile runs through
  :func:`biaslab.mitigation.lora.training_plan.plan_training` (the check ``tune``/``finetune`` make when they
  start): bitsandbytes for ``quantization: 4bit|8bit`` or a bitsandbytes optimizer (``auto`` on a GPU), a GPU
  for fp16/bf16;
* **GPU memory** - on a GPU, the largest estimate (scoring one batch; one LoRA step of each enabled LoRA
  variant, logit pairing's anchor pass included) against the free memory;
* **disk** - the full checkpoint copies the profile writes against the free space of the project's disk.

What it cannot know it says (a hub model not yet in the cache has no local config: memory and disk are then
not estimated) rather than guess. It prints one line of what it found and writes the plan's needs to
``runs/preflight.json``. No MLflow run: it trains and measures nothing.

**The estimates** are rough, not measurements. Memory is :mod:`biaslab.mitigation.lora.memory_estimate`'s, the
one estimate ``bench/preset_memory.py`` and docs/presets.md print too (weights, one scoring batch, one LoRA step,
logit pairing's anchor pass, PEFT's fp32 casts on a k-bit base, the CUDA context), counted on a ``meta``-device
model built from ``config.json`` (no weights, no download). Fragmentation is not modelled; the check fails only
when the estimate exceeds free memory. The disk estimate counts full checkpoint copies: ``models/base`` and
each full-copy embedding edit (``embedding_apply: checkpoint``), each kept in ``models/``, DVC's cache and the MLflow store (the measured run of
issue 41: 5.9 + 3.4 + 5.9 checkpoints for five full copies).
"""

import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from biaslab.config import Params, load_params
from biaslab.errors import BiaslabError
from biaslab.outputs import paths, run_file
from pipelines.stage.entry import stage_main


# --------------------------------------------------------------------------- estimates
GIB = 1024**3
STORE_COPIES = 3        # each full checkpoint lives in models/, .dvc/cache and mlruns/
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


@dataclass(frozen=True)
class ModelSize:
    """What the checks need of the model the run starts from: its ``config.json`` fields, its parameter count and
    its bytes on disk."""

    config: dict[str, Any]
    parameters: int
    checkpoint_bytes: int  # the weight files as stored (what every full copy costs on disk)


def transformers_config(config: dict[str, Any]) -> Any:
    """``config.json``'s fields as a transformers config (what :mod:`biaslab.mitigation.lora.memory_estimate`
    counts, on PyTorch's ``meta`` device: no weights, no download)."""
    from transformers import AutoConfig

    return AutoConfig.for_model(config["model_type"], **{k: v for k, v in config.items() if k != "model_type"})


def size_from_config(config: dict[str, Any], checkpoint_bytes: int | None = None) -> ModelSize:
    """``config.json``'s fields; without weight files the checkpoint is its parameters in the stored dtype."""
    from biaslab.mitigation.lora.memory_estimate import shape_of

    masked = any(a.endswith("ForMaskedLM") for a in config.get("architectures") or [])
    parameters = shape_of(transformers_config(config), masked=masked).parameters
    if checkpoint_bytes is None:
        checkpoint_bytes = parameters * DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype")
                                                            or "float32"), 4)
    return ModelSize(config, parameters, checkpoint_bytes)


def local_size(model_dir: Path) -> ModelSize | None:
    """The model saved in ``model_dir`` (``None`` without a ``config.json``); its bytes are the weight files a
    loader reads (:func:`biaslab.models.weights.files.indexed_shards`: never a stray ``consolidated.safetensors``)."""
    from biaslab.models.weights.files import indexed_shards

    config = model_dir / "config.json"
    if not config.is_file():
        return None
    shards = indexed_shards(model_dir)
    files = ([model_dir / n for n in shards] if shards is not None
             else sorted(model_dir.glob("*.safetensors")) or sorted(model_dir.glob("*.bin")))
    size = sum(f.stat().st_size for f in files if f.is_file()) or None
    return size_from_config(json.loads(config.read_text(encoding="utf-8")), size)


# --------------------------------------------------------------------------- checks
class PreflightError(BiaslabError, RuntimeError):
    """The plan cannot run on this machine; the message says what to change."""


@dataclass
class Machine:
    """What the checks read of the machine (a test passes its own)."""

    cuda: bool
    bf16: bool
    bitsandbytes: str | None
    device_name: str | None = None
    gpu_free_bytes: int | None = None


def probe_machine() -> Machine:
    """This machine: CUDA, bfloat16, bitsandbytes (looked up, not imported), free GPU memory."""
    import torch

    from biaslab.mitigation.lora.training_plan import probe_capabilities

    caps = probe_capabilities()
    free = torch.cuda.mem_get_info()[0] if caps.cuda else None
    return Machine(caps.cuda, caps.bf16, caps.bitsandbytes, caps.device_name, free)


@dataclass
class Report:
    """What the preflight found: written to ``runs/preflight.json``."""

    profile: str
    variants: list[str]
    device: str
    lora: dict[str, dict[str, Any]] = field(default_factory=dict)
    memory_bytes: dict[str, float] = field(default_factory=dict)
    gpu_free_bytes: int | None = None
    disk_bytes: float | None = None
    disk_free_bytes: int | None = None
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        gib = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
        parts = [f"profile {self.profile} ({len(self.variants)} variants)", f"device {self.device}"]
        if self.memory_bytes:
            worst = max(self.memory_bytes, key=self.memory_bytes.get)
            parts.append(f"GPU memory {gib(self.memory_bytes[worst])} ({worst}) of {gib(self.gpu_free_bytes or 0)} free")
        if self.disk_bytes is not None:
            parts.append(f"disk {gib(self.disk_bytes)} of {gib(self.disk_free_bytes or 0)} free")
        return "preflight: ok: " + ", ".join(parts) + "".join(f"; {n}" for n in self.notes)


def check(params: Params, machine: Machine, root: str | os.PathLike[str] = ".") -> Report:
    """Every check, in the order above; the first that fails raises :class:`PreflightError`."""
    root = Path(root)
    device = _device(params, machine)
    report = Report(params.profile, params.enabled_variants(), device, gpu_free_bytes=machine.gpu_free_bytes)
    lora_variants = [n for n in report.variants if params.variant(n).method == "lora"]
    found, where = model_size(params, root)
    masked = found is not None and found.get("masked")
    if masked:
        report.notes.append("a masked LM: LoRA is skipped, not checked")
    for name in [] if masked else lora_variants:
        report.lora[name] = _lora_plan(params, name, machine)
    model = found["size"] if found else None
    if model is None:
        report.notes.append(f"memory and disk not estimated ({where})")
        return report
    if device == "cuda":
        _memory(params, model, lora_variants if not masked else [], machine, report)
    _disk(params, model, root, report)
    return report


def _device(params: Params, machine: Machine) -> str:
    wanted = params.scoring.device
    if wanted == "cuda" and not machine.cuda:
        raise PreflightError("scoring.device is cuda but torch sees no CUDA GPU: set scoring.device: auto (or cpu), "
                             "or run on a CUDA host with the CUDA build of torch")
    return "cuda" if machine.cuda and wanted != "cpu" else "cpu"


def _lora_plan(params: Params, name: str, machine: Machine) -> dict[str, Any]:
    from biaslab.mitigation.lora.training_plan import Capabilities, TrainingHardwareError, plan_training

    caps = Capabilities(machine.cuda, machine.bf16, machine.bitsandbytes, machine.device_name)
    try:
        return plan_training(params.lora_for(name), caps).describe()
    except TrainingHardwareError as exc:
        raise PreflightError(f"variant {name}: {exc}") from None


def model_size(params: Params, root: Path) -> tuple[dict[str, Any] | None, str]:
    """``({"size": ModelSize, "masked": bool}, where)`` of the model the run starts from, or ``(None, why not)``.

    A local ``model.source`` is read in place; a hub id from the Hugging Face cache (no download); the default
    model (``source: null``) from ``model.pretrain``."""
    source = params.model.source
    if source is None:
        p = params.model.pretrain
        config = {"model_type": "llama", "hidden_size": p.hidden_size, "intermediate_size": p.intermediate_size,
                  "num_hidden_layers": p.num_hidden_layers, "num_attention_heads": p.num_attention_heads,
                  "num_key_value_heads": p.num_key_value_heads, "vocab_size": p.vocab_size,
                  "tie_word_embeddings": False, "torch_dtype": "float32"}
        return {"size": size_from_config(config), "masked": False}, "the default model"
    local = Path(source) if Path(source).is_absolute() else root / source
    if local.is_dir():
        size = local_size(local)
        if size is None:
            return None, f"{source}: no config.json"
        return {"size": size, "masked": _masked(local / "config.json")}, "local model"
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(source, "config.json", revision=params.model.revision)
    except Exception:  # noqa: BLE001 - a malformed id is the base_model stage's error to report, not ours
        cached = None
    if not isinstance(cached, str):
        return None, "hub model not in the local cache"
    config = json.loads(Path(cached).read_text(encoding="utf-8"))
    return {"size": size_from_config(config), "masked": _masked(Path(cached))}, "hub cache"


def _masked(config_path: Path) -> bool:
    architectures = json.loads(config_path.read_text(encoding="utf-8")).get("architectures") or []
    return any(a.endswith("ForMaskedLM") for a in architectures)


def _memory(params: Params, size: ModelSize, lora_variants: list[str], machine: Machine,
            report: Report) -> None:
    """GPU memory: :mod:`biaslab.mitigation.lora.memory_estimate` (the one estimate; ``bench/preset_memory.py``
    and docs/presets.md print the same) for scoring one batch and one step of every enabled LoRA variant."""
    from biaslab.mitigation.lora.memory_estimate import estimate_lora, evaluate_memory, shape_of
    from biaslab.mitigation.lora.training_plan import Capabilities, plan_training

    config = transformers_config(size.config)
    tokens = params.scoring.max_batch_tokens if isinstance(params.scoring.max_batch_tokens, int) else 1024
    dtype_bytes = 4 if params.scoring.dtype == "float32" or not machine.bf16 and params.scoring.dtype == "auto" else 2
    report.memory_bytes["evaluate"] = evaluate_memory(shape_of(config), dtype_bytes, tokens).total
    caps = Capabilities(machine.cuda, machine.bf16, machine.bitsandbytes, machine.device_name)
    for name in lora_variants:
        cfg = params.lora_for(name)
        report.memory_bytes[f"LoRA {name}"] = estimate_lora(config, cfg, plan_training(cfg, caps)).total
    free = machine.gpu_free_bytes
    worst = max(report.memory_bytes, key=report.memory_bytes.get)
    need = report.memory_bytes[worst]
    if free is not None and need > free:
        fix = ("set lora.quantization: 4bit (or 8bit), lower lora.per_device_batch_size, or leave it out with "
               "-S profile=quick" if worst.startswith("LoRA") else
               "lower scoring.max_batch_tokens, or set model.device_map: auto to spread the model over GPUs")
        raise PreflightError(f"GPU memory: {worst} needs about {need / GIB:.1f} GiB (estimate, "
                             f"docs/gpu.md) but {free / GIB:.1f} GiB are free on "
                             f"{machine.device_name or 'the GPU'}: {fix}")


def full_copies(params: Params) -> int:
    """Full checkpoints the profile writes into ``models/``: the base, every enabled embedding edit stored as an
    edited checkpoint (``embedding_apply: checkpoint``; the default ``rows`` stores the edited rows alone) and
    every enabled gate control (docs/gate.md)."""
    from biaslab.pretrain.control_variant import no_planted_bias

    copies = 1
    for name in params.enabled_variants():
        variant = params.variant(name)
        if variant.method == "embedding":
            copies += variant.embedding_apply == "checkpoint"
        if variant.method == "control":  # the positive control needs the default model's planted bias
            copies += variant.control.recipe != "balanced_finetune" or no_planted_bias(params) is None
    return copies


def _disk(params: Params, shape: ModelSize, root: Path, report: Report) -> None:
    copies = full_copies(params) * STORE_COPIES
    need = shape.checkpoint_bytes * copies
    free = shutil.disk_usage(root).free
    report.disk_bytes, report.disk_free_bytes = float(need), int(free)
    if need > free:
        gib = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
        raise PreflightError(
            f"disk: the plan writes about {gib(need)} ({copies} copies of the {gib(shape.checkpoint_bytes)} checkpoint: "
            f"{copies // STORE_COPIES} in models/, each also in .dvc/cache and mlruns/) but {gib(free)} are free under "
            f"{root.resolve()}: free space, run fewer variants (-S profile=quick), or set the embedding variants' "
            f"embedding_apply: rows")


def as_json(report: Report) -> dict[str, Any]:
    """The plan's needs for ``runs/preflight.json``; not the machine's free memory and disk, which change from
    run to run (the file is a dependency of ``raw_data``: the same plan on the same machine, the same bytes)."""
    return {k: v for k, v in asdict(report).items() if k not in ("gpu_free_bytes", "disk_free_bytes")}



# --------------------------------------------------------------------------- the stage
def main(argv: list[str] | None = None) -> int:
    return stage_main("preflight", __doc__, lambda args: run(args.params), argv)


def run(params_path: str) -> None:
    params = load_params(params_path)
    report = check(params, probe_machine())
    run_file.write(paths.run_file("preflight"), **as_json(report))
    print(report.summary())


if __name__ == "__main__":
    sys.exit(main())
