"""The whole pipeline on a CUDA GPU, bf16, with a 4-bit LoRA, at reduced benchmark sizes: ``make gpu-smoke``.

    python bench/gpu_smoke.py          # on a CUDA host (with `pip install -e '.[gpu]'` for bitsandbytes)
    python bench/gpu_smoke.py --cpu    # the same workflow on the CPU (float32 compute, no quantisation):
                                       # checks the plumbing on a machine without a GPU

Without a CUDA device (and without ``--cpu``) it prints that it did not run and exits 0.

What it runs, in a scratch workspace (a temporary directory, removed afterwards unless ``--keep``): the
repository's files (``git ls-files``: tracked and untracked-not-ignored) are copied there, DVC is
initialised without git, ``dvc.yaml``'s ``mirror`` var points at the data mirror, and ``params.yaml`` is the
repository's with the overlay :data:`OVERLAY` (printed before the run):

* ``model.source`` = a small random Llama built here and saved in **bfloat16** (``model.dtype: auto`` keeps it);
* ``scoring.device: cuda``, ``scoring.dtype: auto`` (bf16 on a GPU that has it);
* ``lora.quantization: 4bit`` (QLoRA NF4), ``lora.mixed_precision`` / ``gradient_checkpointing`` /
  ``optimizer: auto`` (bf16 or fp16, checkpointing, ``paged_adamw_8bit``), a few steps;
* ``data.sample.per_group: 4`` (:mod:`biaslab.data.sample`: a few professions / pairs per reported group),
  2 Optuna trials of 2 steps (every variant's own study too: :func:`shrink_variant_studies`), 200 bootstrap
  samples.

Then ``dvc repro`` of every stage, and checks: each variant has metrics, every stored and registered full
model is bf16, the LoRA variant trained as planned (cuda, 4bit, mixed precision), the registry holds every
variant. The summary goes to stdout and ``bench/results/gpu-smoke.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SKIP_MESSAGE = ("gpu-smoke: SKIPPED - torch sees no CUDA device (torch.cuda.is_available() is False), so nothing "
                "ran. Run `make gpu-smoke` on a CUDA host (pip install -e '.[gpu]' for bitsandbytes), or "
                "`python bench/gpu_smoke.py --cpu` to check the workflow on this machine.")
SMOKE_SHAPE = dict(model_type="llama", vocab_size=8192, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                   num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=False)
OVERLAY = {  # dotted params.yaml key -> value (model.source is added at run time)
    "data.sample": {"per_group": 4, "seed": 0},
    "model.dtype": "auto",
    "scoring.device": "cuda",
    "scoring.dtype": "auto",
    "evaluation.bootstrap_samples": 200,
    "lora.quantization": "4bit",
    "lora.mixed_precision": "auto",
    "lora.gradient_checkpointing": "auto",
    "lora.optimizer": "auto",
    "lora.max_steps": 4,
    "lora.save_steps": 2,
    "lora.eval_steps": 2,
    "lora.logging_steps": 1,
    "tune.n_trials": 2,
    "tune.trial_max_steps": 2,
}
CPU_OVERLAY = {"scoring.device": "cpu", "lora.quantization": "none"}


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def overlay_params(params: dict, overlay: dict) -> dict:
    """``params`` with each dotted key of ``overlay`` set (intermediate sections must exist)."""
    for dotted, value in overlay.items():
        node = params
        *path, last = dotted.split(".")
        for key in path:
            node = node[key]
        node[last] = value
    return params


def smoke_params(source: Path, mirror: Path, cpu: bool) -> dict:
    """The repository's params.yaml with the smoke overlay (validated by :func:`biaslab.config`)."""
    import yaml

    from biaslab.config import Params

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    overlay = {**OVERLAY, **(CPU_OVERLAY if cpu else {}), "model.source": str(source),
               "data.mirror_dir": str(mirror)}
    params = overlay_params(params, overlay)
    shrink_variant_studies(params, overlay["tune.n_trials"], overlay["tune.trial_max_steps"])
    Params.model_validate(params)  # an overlay key that no longer exists fails here, naming the key
    return params


def shrink_variant_studies(params: dict, n_trials: int, trial_max_steps: int) -> None:
    """A variant with its own study (``tune_overrides``) gets the smoke's trial budget too: its own
    ``n_trials``/``trial_max_steps`` and a ``max_steps`` search list would otherwise run the full study
    (the first H200 run spent its whole lease in ``tune_variant@lora_clp``'s 90-step trials)."""
    for variant in params.get("variants", {}).values():
        overrides = variant.get("tune_overrides") or {}
        if not overrides:
            continue
        overrides["n_trials"], overrides["trial_max_steps"] = n_trials, trial_max_steps
        space = overrides.get("search_space") or {}
        if isinstance(space.get("max_steps"), list):
            space["max_steps"] = [trial_max_steps]


def copy_workspace(work: Path, mirror: Path) -> None:
    """The repository's files (tracked + untracked, not ignored) in ``work``; dvc.yaml's mirror var set."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file() and not rel.startswith(("dvc.lock", "metrics/values/")):
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / rel)
    dvc_yaml = work / "dvc.yaml"
    text = re.sub(r"(?m)^(\s*-\s*mirror:\s*).*$", lambda m: m.group(1) + str(mirror), dvc_yaml.read_text())
    dvc_yaml.write_text(text, encoding="utf-8")


def build_model(out: Path, mirror: Path) -> None:
    """A small random Llama + the corpora-trained BPE tokenizer, saved in bfloat16 (in a child process)."""
    code = ("import sys; sys.path.insert(0, sys.argv[3]); from bench.precision import build_checkpoint; "
            "build_checkpoint(__import__('pathlib').Path(sys.argv[1]), 'llama', "
            "__import__('pathlib').Path(sys.argv[2]), spec=" + repr(SMOKE_SHAPE) + ")")
    subprocess.run([sys.executable, "-c", code, str(out), str(mirror / "corpora"), str(ROOT)], check=True)


def check_outputs(work: Path, cpu: bool) -> dict:
    """What the run produced, and whether it is what a bf16 / 4-bit run must produce."""
    import yaml

    sys.path.insert(0, str(ROOT))
    from bench.precision import registered_artifacts, safetensors_dtypes

    params = yaml.safe_load((work / "params.yaml").read_text(encoding="utf-8"))
    variants = list(params["variants"])
    summary: dict = {"metrics": {}, "dtypes": {}, "problems": []}
    for variant in variants:
        path = work / "metrics" / f"{variant}.json"
        if not path.is_file():
            summary["problems"].append(f"no metrics/{variant}.json")
            continue
        metrics = json.loads(path.read_text())["metrics"]
        summary["metrics"][variant] = {k: m["value"] for k, m in list(metrics.items())[:4]}
    for name in ("base", "soft"):
        dtypes = set(safetensors_dtypes(work / "models" / name).values())
        summary["dtypes"][f"models/{name}"] = sorted(dtypes)
        if dtypes != {"bfloat16"}:
            summary["problems"].append(f"models/{name} stored as {sorted(dtypes)}, not bfloat16")
    for variant, path in registered_artifacts(work).items():
        dtypes = set(safetensors_dtypes(path).values())
        summary["dtypes"][f"registry: {variant}"] = sorted(dtypes)
        if variant in ("base", "soft") and dtypes != {"bfloat16"}:
            summary["problems"].append(f"registered {variant} stored as {sorted(dtypes)}, not bfloat16")
    training = json.loads((work / "models" / "lora" / "variant.json").read_text()).get("training", {})
    summary["lora_training"] = training
    want = ({"device": "cpu", "quantization": "none"} if cpu else {"device": "cuda", "quantization": "4bit"})
    for key, value in want.items():
        if training.get(key) != value:
            summary["problems"].append(f"lora trained with {key}={training.get(key)!r}, expected {value!r}")
    if not cpu and training.get("mixed_precision") not in ("bf16", "fp16"):
        summary["problems"].append(f"lora mixed precision {training.get('mixed_precision')!r} on a GPU")
    registered = json.loads((work / "runs" / "register.json").read_text())["versions"]
    if set(registered) != set(variants):
        summary["problems"].append(f"registered {sorted(registered)}, variants {sorted(variants)}")
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run on the CPU (float32, no 4-bit): checks the workflow")
    parser.add_argument("--keep", action="store_true", help="keep the scratch workspace (its path is printed)")
    parser.add_argument("--mirror", type=Path, default=Path(os.environ.get("BIASLAB_DATA_DIR", ROOT.parent / "shared" /
                                                                             "datasets")))
    args = parser.parse_args()
    if not args.cpu and not cuda_available():
        print(SKIP_MESSAGE)
        return 0
    sys.path.insert(0, str(ROOT / "src"))
    import yaml

    mirror = args.mirror.resolve()
    work = Path(tempfile.mkdtemp(prefix="biaslab-gpu-smoke-"))
    started = time.perf_counter()
    try:
        copy_workspace(work, mirror)
        build_model(work / "smoke_model", mirror)
        params = smoke_params(work / "smoke_model", mirror, args.cpu)
        (work / "params.yaml").write_text(yaml.safe_dump(params, allow_unicode=True, sort_keys=False), encoding="utf-8")
        overlay = {**OVERLAY, **(CPU_OVERLAY if args.cpu else {})}
        print("gpu-smoke: params overlay:\n" + "\n".join(f"  {k}: {v}" for k, v in overlay.items()), flush=True)
        env = {**os.environ, "PYTHONPATH": str(work / "src"), "HF_HUB_OFFLINE": "1",
               "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        dvc = [sys.executable, "-m", "dvc"]
        if (work / ".dvc").is_dir():  # the repository's .dvc/config was copied: DVC without git from here on
            subprocess.run([*dvc, "config", "core.no_scm", "true"], cwd=work, env=env, check=True)
        else:
            subprocess.run([*dvc, "init", "--no-scm", "-q"], cwd=work, env=env, check=True)
        repro = subprocess.run([*dvc, "repro"], cwd=work, env=env)
        if repro.returncode:
            print(f"gpu-smoke: FAILED - dvc repro exited {repro.returncode} (workspace {work})")
            args.keep = True
            return 1
        summary = check_outputs(work, args.cpu)
        summary |= {"mode": "cpu" if args.cpu else "cuda", "seconds": round(time.perf_counter() - started),
                    "overlay": overlay}
        if not args.cpu:
            import torch

            summary["device"] = torch.cuda.get_device_name(0)
        RESULTS.mkdir(parents=True, exist_ok=True)
        name = "gpu-smoke-cpu.json" if args.cpu else "gpu-smoke.json"
        (RESULTS / name).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(json.dumps(summary, indent=2, ensure_ascii=False))
        if summary["problems"]:
            print("gpu-smoke: FAILED - " + "; ".join(summary["problems"]))
            return 1
        print(f"gpu-smoke: PASSED ({summary['mode']}, {summary['seconds']} s)")
        return 0
    finally:
        if args.keep:
            print(f"gpu-smoke: workspace kept at {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
