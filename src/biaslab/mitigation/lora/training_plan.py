"""How LoRA trains on this machine: device, load dtype, mixed precision, checkpointing, k-bit base, optimizer.

``params.yaml`` ``lora:`` says what is wanted; :func:`plan_training` turns it into what runs, given the
machine's :class:`Capabilities` (probed with :func:`probe_capabilities`, or injected by tests)::

    option                        auto on a CUDA GPU                       auto on the CPU
    lora.mixed_precision          bf16 if the GPU supports it, else fp16   none (float32)
    lora.gradient_checkpointing   on                                       off
    lora.optimizer                paged_adamw_8bit (GBEM-UA's) when        adamw_torch_fused (transformers')
                                  bitsandbytes imports, else
                                  adamw_torch_fused
    lora.quantization             none | 4bit | 8bit (bitsandbytes)        none only

``auto`` never picks an optimizer whose package is absent; an explicit bitsandbytes optimizer or a k-bit
base without bitsandbytes is an error naming the key and the fix. :func:`required_packages` says which
packages a plan needs (the preflight check calls it before any heavy work).

The base is loaded on the training device for every quantization (``device_map`` = the current CUDA
device on a GPU), so the study's baseline and every trial are scored where training runs, and
:func:`load_for_training` refuses a base that landed elsewhere. It is loaded in the mixed-precision dtype on
a GPU (bf16 / fp16: half the memory of float32) and in float32 on the CPU (CPU bf16 is slow, and float32 is what every CPU test compares against); the
checkpoint on disk is never changed - the adapter is the only thing training writes. With
``quantization: 4bit`` the base is loaded as NF4 with double quantisation and the mixed-precision
compute dtype (QLoRA), with ``8bit`` as LLM.int8 (the GBEM-UA authors' 8-bit model), and is prepared
with PEFT's ``prepare_model_for_kbit_training`` (frozen base, norms in float32, input gradients for
checkpointing).

A wish the machine cannot honour is a :class:`TrainingHardwareError` naming the option and the fix,
raised before anything loads: k-bit quantisation and bitsandbytes optimizers need a CUDA GPU and the
``bitsandbytes`` package (:data:`GPU_EXTRA_HINT`); fp16/bf16 need a GPU that has them.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import asdict, dataclass
from typing import Any

from biaslab.config import LoraConfig
from biaslab.errors import BiaslabError

DTYPE_OF = {"bf16": "bfloat16", "fp16": "float16", "none": "float32"}
GPU_EXTRA_HINT = "pip install -e '.[gpu]' (bitsandbytes), or `make run` on a CUDA host"
BITSANDBYTES = "bitsandbytes"


class TrainingHardwareError(BiaslabError, RuntimeError):
    """The LoRA options ask for something this machine cannot run (no CUDA, no bitsandbytes, no bf16)."""


@dataclass(frozen=True)
class Capabilities:
    """What the machine offers LoRA training."""

    cuda: bool
    bf16: bool  # the CUDA device computes in bfloat16
    bitsandbytes: str | None  # installed version, or None
    device_name: str | None = None


def probe_capabilities() -> Capabilities:
    """This machine's :class:`Capabilities` (bitsandbytes is looked up with ``importlib.util.find_spec``, not
    imported: importing it loads CUDA libraries)."""
    import torch

    cuda = torch.cuda.is_available()
    bnb = None
    if importlib.util.find_spec(BITSANDBYTES) is not None:
        try:
            bnb = importlib.metadata.version(BITSANDBYTES)
        except importlib.metadata.PackageNotFoundError:
            bnb = "unknown"
    return Capabilities(cuda=cuda, bf16=bool(cuda and torch.cuda.is_bf16_supported()), bitsandbytes=bnb,
                        device_name=torch.cuda.get_device_name(0) if cuda else None)


def bitsandbytes_optimizers() -> frozenset[str]:
    """Optimizer names transformers builds from bitsandbytes (paged / 8-bit AdamW, Lion, RMSprop, AdEMAMix)."""
    from transformers.trainer_optimizer import _BITSANDBYTES_OPTIMIZERS

    return frozenset(str(getattr(o, "value", o)) for o in _BITSANDBYTES_OPTIMIZERS)


def _known_optimizers() -> list[str]:
    from transformers.training_args import OptimizerNames

    return [o.value for o in OptimizerNames]


def checkpointing_argument() -> str:
    """``TrainingArguments``' name for activation checkpointing: ``activation_checkpointing`` where the
    installed transformers has it (5.2x; ``gradient_checkpointing`` is then a deprecated alias that warns
    and goes in v6), else ``gradient_checkpointing`` (older 5.x, e.g. on a borrowed GPU machine)."""
    from dataclasses import fields

    from transformers import TrainingArguments

    names = {field.name for field in fields(TrainingArguments)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


@dataclass(frozen=True)
class TrainingPlan:
    """The resolved LoRA training setup (recorded in ``variant.json`` and the MLflow run)."""

    device: str  # cuda | cpu
    load_dtype: str  # dtype the base is loaded in for training (non-quantised modules)
    mixed_precision: str  # bf16 | fp16 | none
    gradient_checkpointing: bool
    quantization: str  # none | 4bit | 8bit
    optimizer: str

    def describe(self) -> dict[str, Any]:
        return asdict(self)

    def sft_arguments(self) -> dict[str, Any]:
        """The ``SFTConfig`` fields this plan sets (checkpointing under the installed transformers' name)."""
        name = checkpointing_argument()
        return {
            "bf16": self.mixed_precision == "bf16",
            "fp16": self.mixed_precision == "fp16",
            name: self.gradient_checkpointing,
            f"{name}_kwargs": {"use_reentrant": False} if self.gradient_checkpointing else None,
            "optim": self.optimizer,
        }

    def load_arguments(self) -> dict[str, Any]:
        """``from_pretrained`` keyword arguments: dtype, and the bitsandbytes config on one GPU."""
        import torch

        kwargs: dict[str, Any] = {"dtype": getattr(torch, self.load_dtype)}
        if self.device == "cuda":  # every quantization: loaded straight onto the GPU it trains and is scored on
            kwargs["device_map"] = {"": torch.cuda.current_device()}
        if self.quantization != "none":
            from transformers import BitsAndBytesConfig

            compute = getattr(torch, self.load_dtype)
            kwargs["quantization_config"] = (
                BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                   bnb_4bit_compute_dtype=compute)
                if self.quantization == "4bit" else BitsAndBytesConfig(load_in_8bit=True)
            )
        return kwargs


def required_packages(plan: TrainingPlan) -> dict[str, str]:
    """The packages beyond the CPU lock that ``plan`` needs: ``{package: the params key that needs it}``.

    Pure (nothing is probed or imported), for the preflight check: it compares these with what is installed
    and fails in seconds, before anything heavy runs. Today the only such package is bitsandbytes (a k-bit
    base, a bitsandbytes optimizer), installed by :data:`GPU_EXTRA_HINT`.
    """
    needs: dict[str, str] = {}
    if plan.quantization != "none":
        needs[BITSANDBYTES] = f"lora.quantization: {plan.quantization}"
    elif plan.optimizer in bitsandbytes_optimizers():
        needs[BITSANDBYTES] = f"lora.optimizer: {plan.optimizer}"
    return needs


def missing_packages(plan: TrainingPlan, find_spec: Any = None) -> list[str]:
    """One line per package of :func:`required_packages` that ``find_spec`` (default
    ``importlib.util.find_spec``, looked up at call time) cannot find, naming key and fix."""
    find_spec = find_spec or importlib.util.find_spec
    return [f"params.yaml {key} needs the {package} package, which is not installed. Install it with "
            f"{GPU_EXTRA_HINT}" for package, key in required_packages(plan).items() if find_spec(package) is None]


def _fail(option: str, value: Any, why: str, fix: str) -> TrainingHardwareError:
    return TrainingHardwareError(f"params.yaml lora.{option}: {value} {why}. {fix}")


def plan_training(cfg: LoraConfig, caps: Capabilities | None = None) -> TrainingPlan:
    """Resolve ``cfg``'s precision options on ``caps`` (default: this machine); raise if they cannot run."""
    caps = caps or probe_capabilities()
    device = "cuda" if caps.cuda else "cpu"
    on_cpu = "(dvc exp run -S lora.{0}={1}), or run on a CUDA host"

    mixed = cfg.mixed_precision
    if mixed == "auto":
        mixed = ("bf16" if caps.bf16 else "fp16") if caps.cuda else "none"
    elif mixed in ("bf16", "fp16") and not caps.cuda:
        raise _fail("mixed_precision", mixed, "needs a CUDA GPU and torch sees none",
                    "Use mixed_precision: auto or none here " + on_cpu.format("mixed_precision", "auto"))
    elif mixed == "bf16" and not caps.bf16:
        raise _fail("mixed_precision", mixed, f"needs a GPU with bfloat16; {caps.device_name or 'this GPU'} has none",
                    "Use mixed_precision: fp16 (or auto, which picks fp16 here)")

    checkpointing = caps.cuda if cfg.gradient_checkpointing == "auto" else bool(cfg.gradient_checkpointing)

    if cfg.quantization != "none":
        if not caps.cuda:
            raise _fail("quantization", cfg.quantization, "needs a CUDA GPU (bitsandbytes k-bit layers) and torch "
                        "sees none", "Use quantization: none here " + on_cpu.format("quantization", "none"))
        if caps.bitsandbytes is None:
            raise _fail("quantization", cfg.quantization, "needs the bitsandbytes package, which is not installed",
                        f"Install it with {GPU_EXTRA_HINT}, or use quantization: none")

    optimizer = cfg.optimizer
    if optimizer == "auto":  # never a package that is absent: GBEM-UA's paged 8-bit AdamW only with bitsandbytes
        optimizer = "paged_adamw_8bit" if caps.cuda and caps.bitsandbytes is not None else "adamw_torch_fused"
    known = _known_optimizers()
    if optimizer not in known:
        raise _fail("optimizer", optimizer, "is not a transformers optimizer name",
                    f"Use auto or one of: {', '.join(known[:12])}, ...")
    if optimizer in bitsandbytes_optimizers():
        if not caps.cuda:
            raise _fail("optimizer", optimizer, "is a bitsandbytes optimizer and needs a CUDA GPU; torch sees none",
                        "Use optimizer: auto (adamw_torch_fused on the CPU) " + on_cpu.format("optimizer", "auto"))
        if caps.bitsandbytes is None:
            raise _fail("optimizer", optimizer, "needs the bitsandbytes package, which is not installed",
                        f"Install it with {GPU_EXTRA_HINT}, or use optimizer: adamw_torch_fused")

    return TrainingPlan(device=device, load_dtype=DTYPE_OF[mixed], mixed_precision=mixed,
                        gradient_checkpointing=checkpointing, quantization=cfg.quantization, optimizer=optimizer)


def load_for_training(base_dir: Any, plan: TrainingPlan) -> Any:
    """Load ``base_dir`` (model + tokenizer, a :class:`~biaslab.models.load.LoadedModel`) as ``plan`` says.

    On the plan's device for every quantization (a base left on the CPU would be scored there, at CPU speed,
    by the study's baseline); a base whose weights landed on another device is a :class:`TrainingHardwareError`.
    A k-bit base is made trainable with ``peft.prepare_model_for_kbit_training``.
    """
    from biaslab.models.load import load_model

    kwargs = plan.load_arguments()
    loaded = load_model(base_dir, dtype=str(kwargs.pop("dtype")).removeprefix("torch."), **kwargs)
    if plan.quantization != "none":
        from peft import prepare_model_for_kbit_training

        loaded.model = prepare_model_for_kbit_training(
            loaded.model, use_gradient_checkpointing=plan.gradient_checkpointing,
            gradient_checkpointing_kwargs={"use_reentrant": False})
    elsewhere = sorted({p.device.type for p in loaded.model.parameters()} - {plan.device})
    if elsewhere:
        raise TrainingHardwareError(f"{base_dir}: the base's weights loaded on {', '.join(elsewhere)}, but LoRA trains "
                                    f"and scores on {plan.device} (lora.* training plan); check model.device_map")
    return loaded


def free_memory(device: str) -> None:
    """Free what a trial left behind (after the caller dropped its references): Python garbage and, on
    a GPU, the allocator's cached blocks."""
    import gc

    gc.collect()
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()
