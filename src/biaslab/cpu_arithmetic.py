"""The same bytes from the same recipe on any x86 CPU: ``scoring.cpu_arithmetic`` (``portable`` | ``native``).

PyTorch and MKL pick their CPU kernels by instruction set: on an AVX-512 machine they take other code paths
than on an AVX2-only one, the float sums come out in another order, and the chaotic default model trains
to other weights (issue 36: a fresh clone on an AVX2 AMD EPYC trained another model and the gate judged
another story). ``portable`` caps both dispatchers at what every x86-64 machine of the last decade has:

* ``ATEN_CPU_CAPABILITY=avx2`` - PyTorch's own vectorised kernels (read once, at the first dispatch);
* ``MKL_CBWR=AVX2,STRICT`` - MKL's conditional numerical reproducibility: AVX2 code paths, and in strict
  mode GEMM results that do not depend on the number of threads (read when MKL initialises).

Both are environment variables read at first use, so :func:`pin` must run before the process computes
anything with torch (the stages call it first, :mod:`pipelines.stage.entry`); a variable the user set
already is left alone, so a user can still choose. ``native`` leaves the machine's best kernels.
What it costs and what it buys: ``python bench/cpu_reproducibility.py`` (docs/reproducibility.md).
"""

from __future__ import annotations

import os
from typing import Literal

CpuArithmetic = Literal["portable", "native"]

PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT"}
"""The environment of ``portable``: both kernel dispatchers capped at AVX2, MKL in strict CNR mode."""


def pin(setting: CpuArithmetic) -> dict[str, str]:
    """Set the environment of ``setting`` for this process and its children; returns what it set.

    A variable already in the environment is kept (the user's choice wins). Called after torch computed
    something, kernels already chosen keep their instruction set in this process (its children follow the
    setting): the stages call it before anything imports torch.
    """
    if setting == "native":
        return {}
    if setting != "portable":
        raise ValueError(f"scoring.cpu_arithmetic: {setting!r} is not portable or native")
    applied = {key: value for key, value in PORTABLE_ENV.items() if key not in os.environ}
    os.environ.update(applied)
    return applied


def in_effect() -> dict[str, str]:
    """What this process computes with: ATen's CPU capability and MKL's reproducibility mode (for the record)."""
    import torch

    return {"aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "mkl_cbwr": os.environ.get("MKL_CBWR", "off")}
