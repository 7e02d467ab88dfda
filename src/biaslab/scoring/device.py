"""Where and in which precision the scoring engine runs: ``scoring.device`` and ``scoring.dtype``.

``auto`` means: a CUDA GPU when one is present, in bfloat16 when it supports it (fast, and its 8-bit
exponent keeps log-probabilities finite); otherwise the CPU in float32 - bfloat16 matmuls are slow on
most CPUs and would change the numbers every test compares against a float32 naive loop. The engine
itself is device-agnostic: it builds batches on the CPU and moves them to the model's device, and
brings per-token results back to the CPU for the float64 sums.
"""

from __future__ import annotations

import torch

from biaslab.errors import BiaslabError


class DeviceError(BiaslabError, ValueError):
    """``scoring.device`` asks for a device this machine does not have."""


def resolve_placement(device: str = "auto", dtype: str = "auto") -> tuple[str, str]:
    """``(device, dtype)`` to load and score with, from the params' ``scoring.device`` / ``scoring.dtype``."""
    cuda = torch.cuda.is_available()
    if device == "auto":
        device = "cuda" if cuda else "cpu"
    elif device == "cuda" and not cuda:
        raise DeviceError("params.yaml scoring.device: cuda, but torch sees no CUDA device; use auto or cpu")
    if dtype == "auto":
        dtype = "bfloat16" if device == "cuda" and torch.cuda.is_bf16_supported() else "float32"
    return device, dtype


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's first parameter."""
    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def input_device(model: torch.nn.Module) -> torch.device:
    """Where the model's input ids must go: the device of its input embeddings.

    For a model loaded with ``model.device_map`` (accelerate) that is the first device of the map;
    accelerate's hooks move activations between devices from there on, and outputs stay wherever the
    last module ran (the engine reads logits on their own device).
    """
    embeddings = getattr(model, "get_input_embeddings", lambda: None)()
    weight = getattr(embeddings, "weight", None)
    return weight.device if isinstance(weight, torch.Tensor) else model_device(model)


def model_devices(model: torch.nn.Module) -> list[torch.device]:
    """Every device holding a parameter of the model (one for a plain model, several with a device map)."""
    return list(dict.fromkeys(p.device for p in model.parameters())) or [torch.device("cpu")]


def free_memory_bytes(device: torch.device) -> int:
    """Free memory on ``device``: the GPU's own free memory on CUDA, available RAM otherwise.

    On a GPU the scorer's batches live in device memory, so CPU RAM (what ``psutil`` reports) says
    nothing about how large a batch fits; ``torch.cuda.mem_get_info`` does.
    """
    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    import psutil

    return int(psutil.virtual_memory().available)
