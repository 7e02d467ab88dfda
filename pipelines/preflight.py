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

**The estimates** are rough, not measurements. The memory terms are ``bench/preset_memory.py``'s (weights,
one scoring batch, one LoRA step with gradient checkpointing, the CUDA context) computed from ``config.json``
fields instead of a ``meta``-device model (no model classes, no download), plus logit pairing's anchor pass
(full-vocabulary log-probabilities of ``ANCHOR_SEQUENCES`` short sequences) and PEFT's fp32 casts of a k-bit
base's other weights, which the bench table leaves out. Fragmentation is not modelled; the check fails only
when the estimate exceeds free memory. The disk estimate counts full checkpoint copies: ``models/base`` and
each full-copy embedding edit, each kept in ``models/``, DVC's cache and the MLflow store (the measured run of
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
CUDA_CONTEXT = 0.5 * GIB
NF4_BITS = 4 + 8 / 64 + 32 / (64 * 256)  # 4-bit codes + 8-bit block scale per 64 + fp32 scale per 256 blocks
ANCHOR_SEQUENCES = 256  # logit pairing's anchor pass: the base's answer log-odds of every anchored pair
ANCHOR_TOKENS = 64      # tokens per anchor sequence (a GBEM-UA QA prompt)
STORE_COPIES = 3        # each full checkpoint lives in models/, .dvc/cache and mlruns/
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


@dataclass(frozen=True)
class ModelShape:
    """What the estimates need of a model: sizes from its config, bytes from its weight files when known."""

    parameters: int
    checkpoint_bytes: int  # the weight files as stored (what every full copy costs on disk)
    hidden: int
    intermediate: int
    layers: int
    vocab: int
    kv_per_token: int  # key + value elements per token, all layers
    linear_in_layers: int  # parameters of the layers' linear weights (what k-bit quantisation shrinks)
    qkv_in_out: int  # sum over layers of (in + out) features of q, k, v: LoRA parameters = r x this

    def lora_parameters(self, r: int) -> int:
        return r * self.qkv_in_out


def shape_from_config(config: dict[str, Any], checkpoint_bytes: int | None = None) -> ModelShape:
    """A decoder (Llama, Mistral, Qwen2, Gemma-2) or encoder (BERT, XLM-R) from its ``config.json`` fields."""
    hidden = int(config["hidden_size"])
    layers = int(config["num_hidden_layers"])
    inter = int(config.get("intermediate_size") or 4 * hidden)
    vocab = int(config["vocab_size"])
    heads = int(config.get("num_attention_heads") or 1)
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    q, kv = heads * head_dim, kv_heads * head_dim
    gated = 3 if config.get("model_type") not in ("bert", "roberta", "xlm-roberta") else 2
    per_layer = hidden * (q + 2 * kv) + q * hidden + gated * hidden * inter
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", True) else 2)
    parameters = layers * per_layer + embeddings + (2 * layers + 1) * hidden
    dtype = DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or "float32"), 4)
    return ModelShape(parameters=parameters, checkpoint_bytes=checkpoint_bytes or parameters * dtype,
                      hidden=hidden, intermediate=inter, layers=layers, vocab=vocab,
                      kv_per_token=2 * layers * kv, linear_in_layers=layers * per_layer,
                      qkv_in_out=layers * (3 * hidden + q + 2 * kv))


def evaluate_bytes(shape: ModelShape, tokens: int, dtype_bytes: int = 2) -> float:
    """Scoring: weights in the scoring dtype + one batch of ``tokens`` (KV, widest activations, fp32 log-probs)."""
    batch = tokens * (shape.kv_per_token * dtype_bytes + 3 * shape.intermediate * dtype_bytes + shape.vocab * 4)
    return shape.parameters * dtype_bytes + batch + CUDA_CONTEXT


def lora_bytes(shape: ModelShape, *, quantization: str = "none", r: int = 16, batch: int = 2, seq: int = 256,
               anchor: bool = False) -> float:
    """One LoRA step (gradient checkpointing) on a bf16 / 8-bit / NF4 base; ``anchor``: + logit pairing's anchor pass."""
    tokens = batch * seq
    per_linear = {"none": 2.0, "8bit": 1.0 + 4 / 4096, "4bit": NF4_BITS / 8}[quantization]
    weights = shape.linear_in_layers * per_linear + (shape.parameters - shape.linear_in_layers) * 2
    if quantization != "none":  # PEFT's prepare_model_for_kbit_training casts the non-quantised weights to fp32
        weights += (shape.parameters - shape.linear_in_layers) * 2
    adapter = shape.lora_parameters(r) * (4 + 4 + 2)  # fp32 weight + gradient, 8-bit moments
    checkpointed = shape.layers * tokens * shape.hidden * 2
    one_layer = tokens * (10 * shape.hidden + 3 * shape.intermediate) * 2
    logits = tokens * shape.vocab * (2 + 4 + 4)
    anchor_pass = ANCHOR_SEQUENCES * ANCHOR_TOKENS * shape.vocab * (2 + 4) if anchor else 0
    return weights + adapter + checkpointed + one_layer + max(logits, anchor_pass) + CUDA_CONTEXT


def weight_files(model_dir: Path) -> list[Path]:
    """The weight files a loader reads: the index's shards when there is an index (never a stray
    ``consolidated.safetensors`` beside them), else every ``*.safetensors``, else ``*.bin``."""
    for index in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        if (model_dir / index).is_file():
            names = set(json.loads((model_dir / index).read_text(encoding="utf-8"))["weight_map"].values())
            return sorted(model_dir / n for n in names)
    return sorted(model_dir.glob("*.safetensors")) or sorted(model_dir.glob("*.bin"))


def local_shape(model_dir: Path) -> ModelShape | None:
    """The shape of the model saved in ``model_dir`` (``None`` without a ``config.json``)."""
    config = model_dir / "config.json"
    if not config.is_file():
        return None
    files = weight_files(model_dir)
    size = sum(f.stat().st_size for f in files if f.is_file()) or None
    return shape_from_config(json.loads(config.read_text(encoding="utf-8")), size)


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
    shape, where = model_shape(params, root)
    masked = shape is not None and shape.get("masked")
    if masked:
        report.notes.append("a masked LM: LoRA is skipped, not checked")
    for name in [] if masked else lora_variants:
        report.lora[name] = _lora_plan(params, name, machine)
    model = shape["shape"] if shape else None
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


def model_shape(params: Params, root: Path) -> tuple[dict[str, Any] | None, str]:
    """``({"shape": ModelShape, "masked": bool}, where)`` of the model the run starts from, or ``(None, why not)``.

    A local ``model.source`` is read in place; a hub id from the Hugging Face cache (no download); the default
    model (``source: null``) from ``model.pretrain``."""
    source = params.model.source
    if source is None:
        p = params.model.pretrain
        config = {"model_type": "llama", "hidden_size": p.hidden_size, "intermediate_size": p.intermediate_size,
                  "num_hidden_layers": p.num_hidden_layers, "num_attention_heads": p.num_attention_heads,
                  "num_key_value_heads": p.num_key_value_heads, "vocab_size": p.vocab_size,
                  "tie_word_embeddings": False, "torch_dtype": "float32"}
        return {"shape": shape_from_config(config), "masked": False}, "the default model"
    local = Path(source) if Path(source).is_absolute() else root / source
    if local.is_dir():
        shape = local_shape(local)
        if shape is None:
            return None, f"{source}: no config.json"
        return {"shape": shape, "masked": _masked(local / "config.json")}, "local model"
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(source, "config.json", revision=params.model.revision)
    except Exception:  # noqa: BLE001 - a malformed id is the base_model stage's error to report, not ours
        cached = None
    if not isinstance(cached, str):
        return None, "hub model not in the local cache"
    config = json.loads(Path(cached).read_text(encoding="utf-8"))
    return {"shape": shape_from_config(config), "masked": _masked(Path(cached))}, "hub cache"


def _masked(config_path: Path) -> bool:
    architectures = json.loads(config_path.read_text(encoding="utf-8")).get("architectures") or []
    return any(a.endswith("ForMaskedLM") for a in architectures)


def _memory(params: Params, shape: ModelShape, lora_variants: list[str], machine: Machine,
            report: Report) -> None:
    tokens = params.scoring.max_batch_tokens if isinstance(params.scoring.max_batch_tokens, int) else 1024
    report.memory_bytes["evaluate"] = evaluate_bytes(shape, tokens)
    for name in lora_variants:
        cfg = params.lora_for(name)
        report.memory_bytes[f"LoRA {name}"] = lora_bytes(
            shape, quantization=cfg.quantization, r=cfg.r, batch=cfg.per_device_batch_size, seq=cfg.max_length,
            anchor=cfg.objective == "logit_pairing" and cfg.pairing_anchor)
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
    """Full checkpoints the profile writes into ``models/``: the base and every enabled full-copy embedding edit."""
    edits = [n for n in params.enabled_variants()
             if params.variant(n).method == "embedding" and params.variant(n).embedding_apply == "checkpoint"]
    return 1 + len(edits)


def _disk(params: Params, shape: ModelShape, root: Path, report: Report) -> None:
    copies = full_copies(params) * STORE_COPIES
    need = shape.checkpoint_bytes * copies
    free = shutil.disk_usage(root).free
    report.disk_bytes, report.disk_free_bytes = float(need), int(free)
    if need > free:
        gib = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
        raise PreflightError(
            f"disk: the plan writes about {gib(need)} ({copies} copies of the {gib(shape.checkpoint_bytes)} checkpoint: "
            f"{full_copies(params)} in models/, each also in .dvc/cache and mlruns/) but {gib(free)} are free under "
            f"{root.resolve()}: free space, run fewer variants (-S profile=quick), or set the embedding variants' "
            f"embedding_apply: hook")


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
