"""Does the default model train to the same bytes on another x86 CPU? The first training phase under CPU settings.

On an AVX-512 machine the AVX2-only machine is emulated by capping both kernel dispatchers -
``ATEN_CPU_CAPABILITY=avx2`` (PyTorch's own vectorised kernels) and ``MKL_ENABLE_INSTRUCTIONS=AVX2`` (MKL's
BLAS) - which is what they choose by themselves on a CPU without AVX-512. Each setting trains the shared
phase of the default recipe (``model.pretrain.planted_bias.from_step`` steps, the real corpora and model)
in its own process and prints the md5 of the weights and the seconds it took:

* ``native``        - this machine as it is (what ``make run`` does today);
* ``avx2-machine``  - the emulated AVX2 machine, as it is;
* ``pinned``        - candidate settings for every machine: ATen capped at AVX2, MKL's conditional numerical
  reproducibility ``MKL_CBWR=AVX2,STRICT`` and oneDNN off for training;
* ``pinned-avx2``   - the same candidate settings on the emulated AVX2 machine;
* ``onednn-on``, ``onednn-on-avx2`` - the candidate without "oneDNN off" (ATen + MKL_CBWR only): what the
  stages' ``cpu_arithmetic: portable`` sets (:mod:`biaslab.cpu_arithmetic`), on both instruction sets.

The candidate makes training machine-independent (for these two instruction sets) when ``pinned`` and
``pinned-avx2`` print the same md5 while ``native`` and ``avx2-machine`` differ; the seconds say what it costs.

    python bench/cpu_reproducibility.py                     # all four, 2 threads
    python bench/cpu_reproducibility.py --only native pinned --threads 1
    python bench/cpu_reproducibility.py --full --only onednn-on-avx2   # the whole model on the emulated AVX2
                                                                       # machine, next to models/base
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:  # run without install
    sys.path.insert(0, str(ROOT / "src"))
from biaslab.cpu_arithmetic import PORTABLE_ENV  # noqa: E402 - light: no torch

AVX2_MACHINE = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
# the stages' scoring.cpu_arithmetic: portable, plus oneDNN off (the candidate that was measured first)
PINNED = {**PORTABLE_ENV, "BIASLAB_BENCH_ONEDNN": "0"}
KNOBS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "BIASLAB_BENCH_ONEDNN")
SETTINGS = {
    "native": {},
    "avx2-machine": AVX2_MACHINE,
    "pinned": PINNED,
    "pinned-avx2": {**PINNED, **AVX2_MACHINE},
    "onednn-on": {k: v for k, v in PINNED.items() if k != "BIASLAB_BENCH_ONEDNN"},
    "onednn-on-avx2": {**{k: v for k, v in PINNED.items() if k != "BIASLAB_BENCH_ONEDNN"}, **AVX2_MACHINE},
}

CHILD = """
import hashlib, json, os, sys, time
import torch
from biaslab.config import load_params
from biaslab.pretrain.phases import train_shared

torch.set_num_threads(int(sys.argv[3]))
if os.environ.get("BIASLAB_BENCH_ONEDNN") == "0":
    torch.backends.mkldnn.enabled = False
params = load_params(sys.argv[1])
started = time.monotonic()
if len(sys.argv) > 4 and sys.argv[4] == "full":  # both phases, as the base_model stage trains models/base
    from pathlib import Path
    from biaslab.pretrain.build import build_base_model
    pb = params.model.pretrain.planted_bias
    params = params.model_copy(update={"model": params.model.model_copy(update={"pretrain": params.model.pretrain.model_copy(
        update={"planted_bias": pb.model_copy(update={"checkpoint_dir": os.path.join(sys.argv[2], "pretrain")})})})})
    build_base_model(params, Path(sys.argv[2]), Path("."), progress=False)
else:
    train_shared(params, sys.argv[2], progress=False)
seconds = time.monotonic() - started
weights = open(os.path.join(sys.argv[2], "model.safetensors"), "rb").read()
print(json.dumps({"md5": hashlib.md5(weights).hexdigest(), "seconds": round(seconds, 1),
                  "capability": torch.backends.cpu.get_cpu_capability()}))
"""


def run(name: str, env: dict[str, str], params: str, threads: int, full: bool = False) -> dict:
    """Train the shared phase (``full``: the whole default model) under ``env`` in a fresh process; its md5,
    seconds and ATen capability."""
    with tempfile.TemporaryDirectory() as tmp:
        inherited = {k: v for k, v in os.environ.items() if k not in KNOBS}  # only this setting's knobs apply
        full_env = {**inherited, **env, "PYTHONPATH": os.pathsep.join((str(ROOT / "src"), str(ROOT)))}
        proc = subprocess.run([sys.executable, "-c", CHILD, params, str(Path(tmp) / "shared"), str(threads),
                               "full" if full else "shared"],
                              cwd=ROOT, env=full_env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"{name}: training failed:\n{proc.stderr[-3000:]}")
        return {"setting": name, **json.loads(proc.stdout.strip().splitlines()[-1]), "env": env}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", nargs="+", choices=sorted(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--full", action="store_true",
                        help="train the whole default model (both phases, about 5 min each on 2 cores) and compare "
                             "it with models/base/model.safetensors when that exists")
    args = parser.parse_args(argv)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "unknown CPU")
    flags = Path("/proc/cpuinfo").read_text()
    print(f"# {cpu}; avx512f: {'avx512f' in flags}; threads {args.threads}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    rows = [run(name, SETTINGS[name], args.params, args.threads, args.full) for name in args.only]
    committed = ROOT / "models" / "base" / "model.safetensors"
    if args.full and committed.is_file():
        import hashlib

        print(f"models/base (this workspace's base_model stage)  md5 {hashlib.md5(committed.read_bytes()).hexdigest()[:12]}")
    for row in rows:
        print(f"{row['setting']:>13}  md5 {row['md5'][:12]}  {row['seconds']:7.1f} s  ATen {row['capability']:>7}  "
              f"{' '.join(f'{k}={v}' for k, v in row['env'].items()) or '(as is)'}")
    by = {r["setting"]: r["md5"] for r in rows}
    if {"pinned", "pinned-avx2"} <= set(by):
        same = by["pinned"] == by["pinned-avx2"]
        print(f"pinned settings give {'the SAME' if same else 'DIFFERENT'} weights on both instruction sets")
    if {"native", "avx2-machine"} <= set(by):
        print(f"as is, the two instruction sets give {'the same' if by['native'] == by['avx2-machine'] else 'different'}"
              " weights")
    return 0


if __name__ == "__main__":
    sys.exit(main())
