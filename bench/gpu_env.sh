#!/usr/bin/env bash
# The device environment for a GPU lease, prepared in one call, then `bench/gpu_smoke.py` in it:
#
#   bash bench/gpu_env.sh                          # venv + lock + [gpu] extra + editable install, then the smoke
#   bash bench/gpu_env.sh --quantization none      # arguments after the script go to bench/gpu_smoke.py
#   GPU_ENV_ONLY=1 bash bench/gpu_env.sh           # prepare and check the environment, run nothing
#
# Why: on the last GPU lease three of four smoke calls were lost to the environment (a venv that did not see the
# image's torch; no editable install, so the model builder could not import biaslab; a package of the lock
# missing) - docs/notes/2026-11-28-draws-a-a-and-the-gpu-smoke.md. Here every step is checked before the smoke
# starts and a failure is one line naming the step.
#
# Steps:
#  1. a venv ($GPU_VENV, default .venv-gpu) made with --system-site-packages, so an image's CUDA torch is seen;
#  2. torch at the lock's version (requirements.lock: torch==X): kept when the venv already imports that
#     version with CUDA, else installed (the PyPI wheel of that version is the CUDA build on Linux);
#  3. the rest of the lock (torch excluded), then the editable install with the `gpu` extra
#     (bitsandbytes, pinned in pyproject.toml) under the lock as constraints;
#  4. a check: torch == the lock's version, CUDA visible, bitsandbytes and biaslab import, from this checkout.
#
# Offline hosts (no package index): put the wheels in a folder and set GPU_WHEELS=<folder>: pip then installs
# with --no-index --find-links from it. PYTHON picks the interpreter (default python3.11, the lock's).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3.11}"
VENV="${GPU_VENV:-.venv-gpu}"
LOCK="requirements.lock"
fail() { echo "gpu_env: FAILED at $1" >&2; exit 1; }

TORCH_VERSION="$(sed -n 's/^torch==\([^+ ]*\).*$/\1/p' "$LOCK")"
[ -n "$TORCH_VERSION" ] || fail "reading $LOCK: no torch==<version> line"
PIP_SOURCE=()
if [ -n "${GPU_WHEELS:-}" ]; then
  [ -d "$GPU_WHEELS" ] || fail "GPU_WHEELS=$GPU_WHEELS: not a folder"
  PIP_SOURCE=(--no-index --find-links "$GPU_WHEELS")
fi

echo "gpu_env: 1/4 venv $VENV ($PYTHON, --system-site-packages)"
if [ ! -x "$VENV/bin/python" ]; then
  command -v "$PYTHON" >/dev/null || fail "step 1: $PYTHON not found (set PYTHON=<a python 3.11>)"
  "$PYTHON" -m venv --system-site-packages "$VENV" || fail "step 1: python -m venv $VENV"
fi
PY="$VENV/bin/python"
pip_install() { "$PY" -m pip install -q --disable-pip-version-check "${PIP_SOURCE[@]}" "$@"; }

echo "gpu_env: 2/4 torch==$TORCH_VERSION (the lock's) with CUDA"
torch_ok() {
  "$PY" - "$TORCH_VERSION" <<'EOF'
import sys
try:
    import torch
except ImportError:
    sys.exit(1)
sys.exit(0 if torch.__version__.split("+")[0] == sys.argv[1] and torch.cuda.is_available() else 1)
EOF
}
if ! torch_ok; then
  # a torch of another version or a CPU build (2.13.0+cpu satisfies ==2.13.0 for pip) in the venv itself goes first;
  # an image's torch under --system-site-packages is only shadowed
  "$PY" -m pip uninstall -y -q torch >/dev/null 2>&1 || true
  pip_install "torch==$TORCH_VERSION" || fail "step 2: pip install torch==$TORCH_VERSION (offline? set GPU_WHEELS)"
  torch_ok || fail "step 2: torch==$TORCH_VERSION installed but torch.cuda.is_available() is False (driver? CPU wheel?)"
fi

echo "gpu_env: 3/4 the lock (torch excluded) and the editable install with the gpu extra"
CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
grep -v -E '^(torch==|#)' "$LOCK" > "$CONSTRAINTS"
pip_install -r "$CONSTRAINTS" || fail "step 3: pip install -r $LOCK (without torch)"
pip_install --no-build-isolation -c "$CONSTRAINTS" -e ".[gpu]" \
  || pip_install -c "$CONSTRAINTS" -e ".[gpu]" || fail "step 3: pip install -e '.[gpu]'"

echo "gpu_env: 4/4 check"
"$PY" - "$TORCH_VERSION" "$ROOT" <<'EOF' || fail "step 4: the environment check (above)"
import importlib.metadata as md
import pathlib
import sys

import torch

want, root = sys.argv[1], pathlib.Path(sys.argv[2]).resolve()
problems = []
if torch.__version__.split("+")[0] != want:
    problems.append(f"torch {torch.__version__}, the lock has {want}")
if not torch.cuda.is_available():
    problems.append("torch.cuda.is_available() is False")
try:
    import bitsandbytes  # noqa: F401
except Exception as exc:  # noqa: BLE001 - any import failure is the finding
    problems.append(f"bitsandbytes does not import: {type(exc).__name__}: {exc}")
import biaslab

if root not in pathlib.Path(biaslab.__file__).resolve().parents:
    problems.append(f"biaslab imports from {biaslab.__file__}, not from {root}")
versions = {n: md.version(n) for n in ("torch", "transformers", "peft", "trl", "bitsandbytes", "dvc", "mlflow")}
print("gpu_env: " + ", ".join(f"{k} {v}" for k, v in versions.items())
      + (f"; {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""))
for line in problems:
    print(f"gpu_env: {line}", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF

if [ -n "${GPU_ENV_ONLY:-}" ]; then
  echo "gpu_env: ready ($PY); GPU_ENV_ONLY set, the smoke not run"
  exit 0
fi
echo "gpu_env: ready; running bench/gpu_smoke.py $*"
exec "$PY" bench/gpu_smoke.py "$@"
