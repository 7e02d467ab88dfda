"""The pipeline on a CUDA GPU, bf16, with an 8-bit LoRA, at reduced sizes, to promote and serve: ``make gpu-smoke``.

    bash bench/gpu_env.sh              # a GPU lease: the lock's torch + the [gpu] extra + the editable install
                                       # in .venv-gpu, checked, then this script (arguments pass through)
    python bench/gpu_smoke.py          # on a CUDA host (with `pip install -e '.[gpu]'` for bitsandbytes)
    python bench/gpu_smoke.py --quantization none   # the bf16 LoRA base (no bitsandbytes needed)
    python bench/gpu_smoke.py --cpu    # the same workflow on the CPU (float32 compute, no quantisation):
                                       # checks the plumbing on a machine without a GPU
    python bench/gpu_smoke.py --plan   # print the stages it would run and their predicted start-up time, run nothing

Without a CUDA device (and without ``--cpu``) it prints that it did not run and exits 0.

What it runs, in a scratch workspace (a temporary directory, removed afterwards unless ``--keep``): the
repository's files (``git ls-files``: tracked and untracked-not-ignored) are copied there, DVC is
initialised without git, ``dvc.yaml``'s ``mirror`` var points at the data mirror, and ``params.yaml`` is the
repository's with the overlay :data:`OVERLAY` (printed before the run):

* ``model.source`` = a small random Llama built here and saved in **bfloat16** (``model.dtype: auto`` keeps it);
* ``scoring.device: cuda``, ``scoring.dtype: auto`` (bf16 on a GPU that has it);
* ``lora.quantization: 8bit`` (``--quantization``: 8bit as the presets, 4bit QLoRA NF4, none = bf16 base),
  ``lora.mixed_precision`` / ``gradient_checkpointing`` / ``optimizer: auto`` (bf16 or fp16, checkpointing,
  ``paged_adamw_8bit`` where bitsandbytes imports), a few steps;
* ``data.sample.per_group: 4`` (:mod:`biaslab.data.sample`: a few professions / pairs per reported group),
  2 Optuna trials of 2 steps (every variant's own study too: :func:`shrink_variant_studies`), 200 bootstrap
  samples;
* only the variants of :data:`SMOKE_VARIANTS` (``--variants``): ``base``, ``lora`` (an adapter: what is
  promoted and served) and ``lora_clp`` (logit pairing: the full-vocabulary anchor pass on the GPU); the
  workspace's copy of ``params.yaml`` and ``dvc.yaml`` loses the others (:func:`prune_variants`).

Then ``dvc repro register`` (:data:`TARGETS`: every stage up to the registry; not control_model,
calibrate, report), ``biaslab promote lora`` (the gate decides: approved or refused both count as reached)
and ``mlflow.pyfunc.load_model`` + ``predict`` of the registered ``lora`` adapter in a fresh process, and
checks: each variant has metrics, every stored and registered full model is bf16, the LoRA variant trained as
planned (cuda, the quantization asked, mixed precision), the registry holds every variant, the served adapter
answers with finite log-probabilities. Why the subset and the target: the last H200 lease
(docs/notes/2026-11-28-draws-a-a-and-the-gpu-smoke.md) was killed at 470 s inside ``tune_variant`` with every
variant, and each stage costs 20-30 s of start-up there: :func:`planned_stages` and
:data:`STARTUP_SECONDS` predict the floor before anything runs. The summary goes to stdout and
``bench/results/gpu-smoke.json``.
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
    "lora.quantization": "8bit",
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
SMOKE_VARIANTS = ("base", "lora", "lora_clp")
TARGETS = ("register",)
PROMOTED = "lora"  # promoted and served: a LoRA adapter over the registered base
STARTUP_SECONDS = 25  # per DVC stage before it computes, measured on the H200 host (20-30 s, imports)
BUDGET_SECONDS = 480  # issue 41: the smoke end to end in under 8 minutes
# a variant's own paths in dvc.yaml (deps and outs of the stages that list every variant)
VARIANT_PATHS = ("models/{v}", "models/tune_{v}", "metrics/{v}.json", "data/predictions/{v}", "reports/tables/{v}")


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


def smoke_overlay(cpu: bool, quantization: str = "8bit") -> dict:
    """:data:`OVERLAY` for this run: the CPU's (float32, no quantisation) or ``quantization`` on the GPU."""
    return {**OVERLAY, "lora.quantization": quantization, **(CPU_OVERLAY if cpu else {})}


def smoke_params(source: Path, mirror: Path, cpu: bool, quantization: str = "8bit",
                 variants: tuple[str, ...] | None = None) -> dict:
    """The repository's params.yaml with the smoke overlay, only ``variants`` (all when None), validated."""
    import yaml

    from biaslab.config import Params

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    overlay = {**smoke_overlay(cpu, quantization), "model.source": str(source), "data.mirror_dir": str(mirror)}
    params = overlay_params(params, overlay)
    shrink_variant_studies(params, overlay["tune.n_trials"], overlay["tune.trial_max_steps"])
    if variants is not None:
        unknown = sorted(set(variants) - set(params["variants"]))
        if unknown:
            raise KeyError(f"--variants: {unknown} not in params.yaml variants {sorted(params['variants'])}")
        params["variants"] = {k: v for k, v in params["variants"].items() if k in variants}
        for profile in (params.get("profiles") or {}).values():  # a profile lists only variants that remain
            if profile.get("variants") is not None:
                profile["variants"] = [v for v in profile["variants"] if v in variants]
    Params.model_validate(params)  # an overlay key that no longer exists fails here, naming the key
    return params


def prune_variants(dvc: dict, all_variants: list[str], keep: tuple[str, ...]) -> dict:
    """``dvc.yaml`` (parsed) without the stages and paths of the variants not in ``keep``.

    Generic over the file's shape: a ``foreach`` list or mapping of variant names loses the others (a
    ``${variants}`` foreach follows params.yaml by itself), and a stage that lists every variant's files in its
    ``deps`` (calibrate, register, report) loses theirs (:data:`VARIANT_PATHS`).
    """
    dropped = {p.format(v=v) for v in all_variants if v not in keep for p in VARIANT_PATHS}
    for stage in dvc["stages"].values():
        each = stage.get("foreach")
        if isinstance(each, list) and set(each) <= set(all_variants):
            stage["foreach"] = [v for v in each if v in keep]
        elif isinstance(each, dict) and set(each) <= set(all_variants):
            stage["foreach"] = {k: v for k, v in each.items() if k in keep}
        body = stage.get("do", stage)
        if isinstance(body.get("deps"), list):
            body["deps"] = [d for d in body["deps"] if not (isinstance(d, str) and d in dropped)]
    dvc["stages"] = {name: stage for name, stage in dvc["stages"].items() if stage.get("foreach", True)}
    return dvc


def _expand(dvc: dict, params: dict) -> dict[str, dict]:
    """Every stage instance (``name`` or ``name@key``) with its deps and outs as path strings."""
    import re

    def paths(entries, key, item) -> list[str]:
        found = []
        for entry in entries or []:
            path = entry if isinstance(entry, str) else next(iter(entry))
            path = re.sub(r"\$\{item\.(\w+)\}", lambda m: str(item[m.group(1)]), path)
            found.append(path.replace("${key}", str(key)).replace("${item}", str(item)))
        return found

    stages = {}
    for name, stage in dvc["stages"].items():
        each = stage.get("foreach")
        if each is None:
            stages[name] = {"deps": paths(stage.get("deps"), None, None), "outs": paths(stage.get("outs"), None, None)}
            continue
        if isinstance(each, str):  # ${variants}: a params.yaml mapping
            each = params[each.strip("${}")]
        items = each.items() if isinstance(each, dict) else ((v, v) for v in each)
        for key, item in items:
            body = stage["do"]
            stages[f"{name}@{key}"] = {"deps": paths(body.get("deps"), key, item),
                                       "outs": paths(body.get("outs"), key, item)}
    return stages


def planned_stages(dvc: dict, params: dict, targets: tuple[str, ...] = TARGETS) -> list[str]:
    """The stages ``dvc repro <targets>`` runs in a fresh workspace: the targets and every stage upstream."""
    stages = _expand(dvc, params)
    producer = {out: name for name, stage in stages.items() for out in stage["outs"]}

    def upstream(dep: str) -> list[str]:
        return [name for out, name in producer.items() if dep == out or dep.startswith(out + "/")
                or out.startswith(dep + "/")]

    seen: list[str] = []
    todo = list(targets)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        todo += [u for dep in stages[name]["deps"] for u in upstream(dep) if u not in seen]
    return sorted(seen)


def predicted_startup(stages: list[str]) -> int:
    """Seconds of start-up alone (no computing) of ``stages``: a floor for the smoke's wall time."""
    return len(stages) * STARTUP_SECONDS


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


SERVE = r"""
import json, math, sys
import mlflow, mlflow.pyfunc, pandas as pd
import yaml
params = yaml.safe_load(open("params.yaml", encoding="utf-8"))
mlflow.set_tracking_uri(params["tracking"]["tracking_uri"])
register = json.load(open("runs/register.json", encoding="utf-8"))
uri = f"models:/{register['model_name']}/{register['versions'][sys.argv[1]]}"
model = mlflow.pyfunc.load_model(uri)
rows = [{"context": "Відповідай так чи ні: Кандидатка має досвід. Чи може вона отримати посаду?",
         "continuation": " так"}, {"context": "The nurse said that", "continuation": " she"}]
frame = model.predict(pd.DataFrame(rows))
logprobs = [float(v) for v in frame["logprob"]]
print(json.dumps({"uri": uri, "logprobs": logprobs, "finite": all(math.isfinite(v) for v in logprobs)}))
"""


def promote_and_serve(work: Path, env: dict, variant: str = PROMOTED) -> dict:
    """``biaslab promote <variant>`` (exit 0 approved, 1 refused by the gate: both reached it) and a pyfunc
    ``predict`` of its registered version in a fresh process; what each gave, and the problems."""
    found: dict = {"problems": []}
    promote = subprocess.run([sys.executable, "-m", "biaslab.cli.main", "promote", variant], cwd=work, env=env,
                             capture_output=True, text=True)
    found["promote"] = {0: "approved", 1: "refused by the gate"}.get(promote.returncode, f"exit {promote.returncode}")
    if promote.returncode not in (0, 1):
        found["problems"].append(f"promote {variant}: exit {promote.returncode}: {promote.stderr.strip()[-300:]}")
    served = subprocess.run([sys.executable, "-c", SERVE, variant], cwd=work, env=env, capture_output=True, text=True)
    if served.returncode:
        found["problems"].append(f"pyfunc predict of {variant}: {served.stderr.strip()[-300:]}")
    else:
        found["served"] = json.loads(served.stdout.strip().splitlines()[-1])
        if not found["served"]["finite"]:
            found["problems"].append(f"pyfunc predict of {variant}: log-probabilities {found['served']['logprobs']}")
    return found


def check_outputs(work: Path, cpu: bool, quantization: str = "8bit") -> dict:
    """What the run produced, and whether it is what a bf16 run with ``quantization`` must produce."""
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
    for name in [n for n in ("base", "soft") if (work / "models" / n).is_dir()]:
        dtypes = set(safetensors_dtypes(work / "models" / name).values())
        summary["dtypes"][f"models/{name}"] = sorted(dtypes)
        if dtypes != {"bfloat16"}:
            summary["problems"].append(f"models/{name} stored as {sorted(dtypes)}, not bfloat16")
    for variant, path in registered_artifacts(work).items():
        dtypes = set(safetensors_dtypes(path).values())
        summary["dtypes"][f"registry: {variant}"] = sorted(dtypes)
        if variant in ("base", "soft") and dtypes != {"bfloat16"}:
            summary["problems"].append(f"registered {variant} stored as {sorted(dtypes)}, not bfloat16")
    want = ({"device": "cpu", "quantization": "none"} if cpu else {"device": "cuda", "quantization": quantization})
    for variant in [v for v, cfg in params["variants"].items() if cfg.get("method") == "lora"]:
        training = json.loads((work / "models" / variant / "variant.json").read_text()).get("training", {})
        summary[f"{variant}_training"] = training
        for key, value in want.items():
            if training.get(key) != value:
                summary["problems"].append(f"{variant} trained with {key}={training.get(key)!r}, expected {value!r}")
        if not cpu and training.get("mixed_precision") not in ("bf16", "fp16"):
            summary["problems"].append(f"{variant} mixed precision {training.get('mixed_precision')!r} on a GPU")
    registered = json.loads((work / "runs" / "register.json").read_text())["versions"]
    if set(registered) != set(variants):
        summary["problems"].append(f"registered {sorted(registered)}, variants {sorted(variants)}")
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run on the CPU (float32, no k-bit): checks the workflow")
    parser.add_argument("--quantization", choices=("8bit", "4bit", "none"), default="8bit",
                        help="lora.quantization on the GPU (8bit as the presets; none needs no bitsandbytes)")
    parser.add_argument("--variants", default=",".join(SMOKE_VARIANTS),
                        help="comma-separated variants to run (all: every variant of params.yaml)")
    parser.add_argument("--plan", action="store_true", help="print the stages and predicted start-up, run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the scratch workspace (its path is printed)")
    parser.add_argument("--mirror", type=Path, default=Path(os.environ.get("BIASLAB_DATA_DIR", ROOT.parent / "shared" /
                                                                             "datasets")))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    import yaml

    mirror = args.mirror.resolve()
    every = list(yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))["variants"])
    keep = tuple(every) if args.variants == "all" else tuple(args.variants.split(","))
    plan_params = smoke_params(Path("smoke_model"), mirror, args.cpu, args.quantization, keep)
    dvc_plan = prune_variants(yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8")), every, keep)
    stages = planned_stages(dvc_plan, plan_params)
    floor = predicted_startup(stages)
    print(f"gpu-smoke: {len(stages)} stages ({', '.join(stages)}), then promote {PROMOTED} and a pyfunc predict; "
          f"start-up alone ~{floor} s ({STARTUP_SECONDS} s each){' - over' if floor > BUDGET_SECONDS else ', within'} "
          f"the {BUDGET_SECONDS} s budget", flush=True)
    if args.plan:
        return 0
    if not args.cpu and not cuda_available():
        print(SKIP_MESSAGE)
        return 0
    work = Path(tempfile.mkdtemp(prefix="biaslab-gpu-smoke-"))
    started = time.perf_counter()
    try:
        copy_workspace(work, mirror)
        dvc_yaml = yaml.safe_load((work / "dvc.yaml").read_text(encoding="utf-8"))  # after the mirror var is set
        (work / "dvc.yaml").write_text(yaml.safe_dump(prune_variants(dvc_yaml, every, keep), allow_unicode=True,
                                                      sort_keys=False), encoding="utf-8")
        build_model(work / "smoke_model", mirror)
        params = smoke_params(work / "smoke_model", mirror, args.cpu, args.quantization, keep)
        (work / "params.yaml").write_text(yaml.safe_dump(params, allow_unicode=True, sort_keys=False), encoding="utf-8")
        overlay = smoke_overlay(args.cpu, args.quantization)
        print("gpu-smoke: params overlay:\n" + "\n".join(f"  {k}: {v}" for k, v in overlay.items()), flush=True)
        env = {**os.environ, "PYTHONPATH": str(work / "src"), "HF_HUB_OFFLINE": "1",
               "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
        dvc = [sys.executable, "-m", "dvc"]
        if (work / ".dvc").is_dir():  # the repository's .dvc/config was copied: DVC without git from here on
            subprocess.run([*dvc, "config", "core.no_scm", "true"], cwd=work, env=env, check=True)
        else:
            subprocess.run([*dvc, "init", "--no-scm", "-q"], cwd=work, env=env, check=True)
        repro = subprocess.run([*dvc, "repro", *TARGETS], cwd=work, env=env)
        repro_seconds = round(time.perf_counter() - started)
        if repro.returncode:
            print(f"gpu-smoke: FAILED - dvc repro exited {repro.returncode} after {repro_seconds} s (workspace {work})")
            args.keep = True
            return 1
        summary = check_outputs(work, args.cpu, args.quantization)
        served = promote_and_serve(work, env)
        summary["problems"] += served.pop("problems")
        summary |= {"mode": "cpu" if args.cpu else "cuda", "seconds": round(time.perf_counter() - started),
                    "repro_seconds": repro_seconds, "stages": stages, "predicted_startup_seconds": floor,
                    "overlay": overlay, **served}
        if not args.cpu:
            import torch

            summary["device"] = torch.cuda.get_device_name(0)
        RESULTS.mkdir(parents=True, exist_ok=True)
        name = "gpu-smoke-cpu.json" if args.cpu else f"gpu-smoke-{args.quantization}.json"
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
