"""scoring.cpu_arithmetic: ``portable`` caps PyTorch and MKL at AVX2 in strict reproducible mode, before any
torch computation; ``native`` leaves the machine's kernels; a user's own setting wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from biaslab import cpu_arithmetic

ROOT = Path(__file__).resolve().parents[2]
KNOBS = tuple(cpu_arithmetic.PORTABLE_ENV)


def _child(code: str, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter whose environment holds none of the knobs but ``env``."""
    clean = {k: v for k, v in os.environ.items() if k not in KNOBS}
    done = subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


PIN_THEN_TORCH = """
import json, sys
from biaslab.cpu_arithmetic import pin, in_effect
applied = pin(sys.argv[1] if len(sys.argv) > 1 else "{setting}")
import torch
torch.ones(4) @ torch.ones(4)
print(json.dumps({{"applied": applied, **in_effect()}}))
"""


def _supports_avx2() -> bool:
    return "avx2" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False


@pytest.mark.skipif(not _supports_avx2(), reason="the cap is AVX2: a CPU without it computes below the cap")
def test_portable_caps_aten_at_avx2_and_turns_on_mkl_strict_reproducibility():
    record = _child(PIN_THEN_TORCH.format(setting="portable"))
    assert record["applied"] == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT"}
    assert record["aten_cpu_capability"] == "AVX2"
    assert record["mkl_cbwr"] == "AVX2,STRICT"


def test_native_sets_nothing_and_a_users_own_setting_wins():
    native = _child(PIN_THEN_TORCH.format(setting="native"))
    assert native["applied"] == {} and native["mkl_cbwr"] == "off"
    chosen = _child(PIN_THEN_TORCH.format(setting="portable"), ATEN_CPU_CAPABILITY="default")
    assert chosen["applied"] == {"MKL_CBWR": "AVX2,STRICT"}  # the user's ATen choice is kept


def test_an_unknown_setting_is_an_error_naming_the_key():
    with pytest.raises(ValueError, match="scoring.cpu_arithmetic: 'fast'"):
        cpu_arithmetic.pin("fast")


def test_every_stage_pins_before_it_runs(tmp_path, monkeypatch):
    """stage_main reads scoring.cpu_arithmetic from --params and pins it before the stage body runs."""
    import yaml

    from pipelines.stage.entry import stage_main

    for knob in KNOBS:
        monkeypatch.delenv(knob, raising=False)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"scoring": {"cpu_arithmetic": "portable"}}), encoding="utf-8")
    seen = {}
    assert stage_main("demo", None, lambda args: seen.update({k: os.environ.get(k) for k in KNOBS}),
                      ["--params", str(params)]) == 0
    assert seen == cpu_arithmetic.PORTABLE_ENV
    for knob in KNOBS:
        monkeypatch.delenv(knob, raising=False)
    params.write_text(yaml.safe_dump({"scoring": {"cpu_arithmetic": "native"}}), encoding="utf-8")
    seen.clear()
    assert stage_main("demo", None, lambda args: seen.update({k: os.environ.get(k) for k in KNOBS}),
                      ["--params", str(params)]) == 0
    assert seen == {k: None for k in KNOBS}
