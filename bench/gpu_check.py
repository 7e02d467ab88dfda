"""The GPU code paths in one short device lease, without DVC or MLflow: ``python bench/gpu_check.py``.

``make gpu-smoke`` runs the whole pipeline through DVC and MLflow on CUDA. A borrowed accelerator often has
a short lease and a Python without DVC/MLflow; this check makes the same library calls the ``evaluate`` and
``finetune`` stages make, on the workspace's built ``models/base`` and ``data/prepared`` (run ``make run``
first, or copy them in), and compares the devices:

1. ``models/base`` evaluated on every enabled benchmark three times - CPU float32 (the reference), CUDA
   float32, CUDA bfloat16 (``scoring.dtype: auto`` on a GPU) - and every metric compared with the reference:
   CUDA float32 must agree to ``--fp32-tolerance`` (the same arithmetic on another device), CUDA bf16 is
   reported against the reference's 95 % CI (the precision change next to the sampling uncertainty);
2. the bf16 checkpoint path (what a hub model in bf16 gives): ``models/base`` saved in bfloat16, evaluated
   on CUDA bf16 and compared with step 1's bf16 evaluation;
3. a LoRA fine-tune on CUDA with the GPU plan (``lora.quantization`` 4bit QLoRA when bitsandbytes is
   importable, else none; mixed precision, gradient checkpointing and optimizer ``auto``, which on a GPU is
   GBEM-UA's paged 8-bit AdamW where bitsandbytes imports and ``adamw_torch_fused`` without it; the tune's
   best_params.json when the workspace has one), the resolved plan checked (cuda, bf16/fp16, quantization
   as asked), the adapter evaluated on CUDA bf16; a failed 4-bit run is a problem, then it trains without;
4. peak CUDA memory and seconds of each step.

The summary goes to stdout, ``<out>/gpu-check.json`` and ``<out>/gpu-check.md`` (default ``bench/results``).
Exit 1 when a check fails. Without CUDA it prints SKIPPED and exits 0; ``--cpu`` runs steps 1 and 3 on the
CPU only (float32, no quantisation), to check the script on a machine without a GPU.

    python bench/gpu_check.py                     # on a CUDA host, in a workspace after `make run`
    python bench/gpu_check.py --cpu --lora-steps 2   # the plumbing, on the CPU
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SKIP_MESSAGE = ("gpu-check: SKIPPED - torch sees no CUDA device, so nothing ran "
                "(`python bench/gpu_check.py --cpu` checks the script on this machine).")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, default=ROOT, help="project root with models/base, data/prepared")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--cpu", action="store_true", help="CPU only: the plumbing, no GPU comparison")
    parser.add_argument("--lora-steps", type=int, default=20, help="optimizer steps of the LoRA fine-tune")
    parser.add_argument("--lora-variant", default="lora",
                        help="the variant whose resolved lora settings are trained (lora_clp: the logit-pairing loss)")
    parser.add_argument("--quantization", choices=("auto", "none", "4bit", "8bit"), default="auto",
                        help="auto = 4bit when bitsandbytes imports, else none")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (scoring.num_threads; default all)")
    parser.add_argument("--only-lora", action="store_true",
                        help="step 3 alone (the fine-tune and its adapter's evaluation), for a short lease")
    parser.add_argument("--fp32-tolerance", type=float, default=0.01,
                        help="largest |CUDA float32 - CPU float32| allowed for a metric value")
    return parser.parse_args(argv)


def workspace_copy(source: Path, work: Path) -> None:
    """``work`` holds copies of params.yaml, data/prepared, models/base and the tune's best_params.json."""
    shutil.copy2(source / "params.yaml", work / "params.yaml")
    shutil.copytree(source / "models" / "base", work / "models" / "base")
    shutil.copytree(source / "data" / "prepared", work / "data" / "prepared")
    tuned = source / "models" / "tune" / "best_params.json"
    if tuned.is_file():
        (work / "models" / "tune").mkdir(parents=True)
        shutil.copy2(tuned, work / "models" / "tune" / "best_params.json")


def params_with(work: Path, overlay: dict[str, Any]):
    """The workspace's params with each dotted key of ``overlay`` set (gpu_smoke's overlay), validated."""
    import yaml

    from bench.gpu_smoke import overlay_params
    from biaslab.config import Params

    raw = yaml.safe_load((work / "params.yaml").read_text(encoding="utf-8"))
    return Params.model_validate(overlay_params(raw, overlay))


def timed_evaluation(params, variant: str, work: Path) -> tuple[dict, float, dict]:
    """``({metric: MetricValue}, seconds, memory)`` of one variant's evaluation (no MLflow)."""
    import torch

    from biaslab.evaluation import suite as evaluation

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    under_test = evaluation.load_variant(params, variant, work)
    result = evaluation.run_benchmarks(params, under_test, work)
    seconds = time.perf_counter() - start
    model = under_test.loaded.model
    memory = {"dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
              "device": str(next(model.parameters()).device)}
    if torch.cuda.is_available():
        memory["peak_cuda_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
    del under_test, model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return result.metrics, seconds, memory


def _undefined(value: float | None) -> bool:
    return value is None or math.isnan(value)


def compare(reference: dict, other: dict, tolerance: float | None) -> dict:
    """Every metric of ``reference`` against ``other``: largest difference, those beyond ``tolerance``,
    those outside the reference's CI."""
    diffs, beyond, outside, missing = {}, [], [], []
    for name, ref in reference.items():
        if name not in other:
            missing.append(name)
            continue
        a, b = ref.value, other[name].value
        if _undefined(a) or _undefined(b):
            if not (_undefined(a) and _undefined(b)):  # undefined on both devices agrees
                missing.append(name)
            continue
        diffs[name] = abs(a - b)
        if tolerance is not None and diffs[name] > tolerance:
            beyond.append(f"{name}: {a:.4f} vs {b:.4f}")
        if ref.ci_low is not None and ref.ci_high is not None and not ref.ci_low - 1e-9 <= b <= ref.ci_high + 1e-9:
            outside.append(f"{name}: {b:.4f} outside [{ref.ci_low:.4f}, {ref.ci_high:.4f}]")
    worst = max(diffs, key=diffs.get) if diffs else None
    return {"metrics": len(diffs), "max_abs_diff": round(diffs[worst], 6) if worst else None, "worst": worst,
            "mean_abs_diff": round(sum(diffs.values()) / len(diffs), 6) if diffs else None,
            "beyond_tolerance": beyond, "outside_reference_ci": outside, "missing": missing}


def save_bf16_base(work: Path) -> Path:
    """``models/base`` re-saved in bfloat16 (the checkpoint a hub model in bf16 gives): ``models/base_bf16``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = work / "models" / "base_bf16"
    model = AutoModelForCausalLM.from_pretrained(work / "models" / "base", dtype=torch.bfloat16)
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(work / "models" / "base").save_pretrained(target)
    return target


def resolve_quantization(asked: str, cpu: bool) -> str:
    """``none`` on the CPU; ``auto``: 4bit where the training plan's probe finds bitsandbytes, else none."""
    if cpu:
        return "none"
    if asked != "auto":
        return asked
    from biaslab.mitigation.lora.training_plan import probe_capabilities

    return "4bit" if probe_capabilities().bitsandbytes else "none"


def resolve_optimizer(cpu: bool) -> str:
    """``auto``, the stage's default, on either device: the training plan's ``auto`` takes GBEM-UA's
    ``paged_adamw_8bit`` only where bitsandbytes imports, else ``adamw_torch_fused`` (it used to stop a GPU
    without bitsandbytes: found on an H200), so the check no longer has to pick for it."""
    return "auto"


def lora_settings(params, work: Path, variant: str, steps: int, quantization: str, optimizer: str = "auto"):
    """``variant``'s resolved lora section as the ``finetune`` stage resolves it, cut to ``steps`` steps.

    The best trial of the variant's study applies where its ``use_tuned`` says so: the tune section's study
    (``lora``, ``lora_cda``) or the variant's own (``tune_overrides``: ``lora_clp``, with the logit-pairing
    objective); ``params.tune_for`` says which.
    """
    from biaslab.mitigation.lora.train import tuned_overrides, with_overrides

    cfg = params.lora_for(variant)
    tuned = work / params.tune_for(variant).output_dir / "best_params.json"
    overrides = tuned_overrides(tuned) if cfg.use_tuned and tuned.is_file() else {}
    return with_overrides(cfg, {**overrides, "max_steps": steps, "quantization": quantization, "optimizer": optimizer,
                                "checkpoint_dir": str(work / "models" / "lora_check_checkpoints"),
                                "save_steps": max(steps, 1), "eval_steps": 0})


def lora_step(params, work: Path, steps: int, quantization: str, variant: str = "lora",
              optimizer: str = "auto") -> tuple[dict, float]:
    """A LoRA fine-tune of models/base with ``variant``'s settings and the machine's plan -> models/lora_check."""
    import torch

    from biaslab.evaluation.suite import set_threads
    from biaslab.mitigation.lora.train import finetune
    from pipelines.stage.inputs import mitigation_frame

    cfg = lora_settings(params, work, variant, steps, quantization, optimizer)
    frame = mitigation_frame(params)  # the train and select professions, as the finetune stage reads them
    set_threads(params.scoring.num_threads)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    result = finetune(work / "models" / "base", frame, cfg, work / "models" / "lora_check", base_ref="models/base",
                      add_bos=params.scoring.add_bos, prompt_format=params.evaluation.prompt_format)
    seconds = time.perf_counter() - start
    record = {"global_step": result.global_step, "train_loss": result.train_loss,
              "seconds_per_step": result.seconds_per_step, "training": result.training,
              "hyperparameters": result.hyperparameters}
    if torch.cuda.is_available():
        record["peak_cuda_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
    return record, seconds


def headline(metrics: dict, names: int = 8) -> dict:
    return {k: round(v.value, 4) for k, v in list(metrics.items())[:names] if v.value is not None}


def markdown(summary: dict) -> str:
    lines = [f"# gpu-check ({summary['mode']})", "", f"device: {summary.get('device', 'cpu')}; "
             f"torch {summary['torch']}, transformers {summary['transformers']}, peft {summary['peft']}, "
             f"trl {summary['trl']}, bitsandbytes {summary.get('bitsandbytes')}", "",
             "| step | seconds | detail |", "| --- | --- | --- |"]
    for step, entry in summary["steps"].items():
        detail = {k: v for k, v in entry.items() if k not in ("seconds", "headline", "hyperparameters")}
        lines.append(f"| {step} | {entry.get('seconds')} | `{json.dumps(detail, ensure_ascii=False)[:600]}` |")
    lines += ["", "problems: " + ("; ".join(summary["problems"]) or "none")]
    return "\n".join(lines) + "\n"


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("torch", "transformers", "peft", "trl", "accelerate", "bitsandbytes"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def guarded(summary: dict, step: str, call: Callable[[], Any]) -> Any:
    """``call()``; an exception is a problem of ``step`` (traceback printed) and gives ``None``: later steps run."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - reported with the step's name, the check goes on
        import traceback

        traceback.print_exc()
        summary["problems"].append(f"{step}: {type(exc).__name__}: {exc}")
        return None


def evaluate_base(args: argparse.Namespace, work: Path, summary: dict, evaluate: Callable[..., dict]) -> None:
    """Steps 1 and 2: models/base on CPU float32, CUDA float32, CUDA bf16 and stored in bf16, compared."""
    steps = summary["steps"]
    reference = evaluate("evaluate base cpu float32", "cpu", "float32")
    if not args.cpu:
        cuda32 = guarded(summary, "cuda float32", lambda: evaluate("evaluate base cuda float32", "cuda", "float32"))
        if cuda32 is not None:
            steps["evaluate base cuda float32"]["vs_cpu_float32"] = agreement = compare(reference, cuda32,
                                                                                        args.fp32_tolerance)
            summary["problems"] += [f"cuda float32 vs cpu float32 beyond {args.fp32_tolerance}: {m}"
                                    for m in agreement["beyond_tolerance"] + agreement["missing"]]
        bf16 = guarded(summary, "cuda bf16", lambda: evaluate("evaluate base cuda bf16", "cuda", "auto"))
        if bf16 is not None:
            steps["evaluate base cuda bf16"]["vs_cpu_float32"] = compare(reference, bf16, None)
            if steps["evaluate base cuda bf16"]["dtype"] != "bfloat16":
                summary["problems"].append("scoring.dtype auto on the GPU did not give bfloat16")

        def stored_bf16() -> dict:
            save_bf16_base(work)
            (work / "models" / "base").rename(work / "models" / "base_float32")
            (work / "models" / "base_bf16").rename(work / "models" / "base")
            return evaluate("evaluate bf16-stored checkpoint cuda bf16", "cuda", "auto")

        stored = guarded(summary, "bf16-stored checkpoint", stored_bf16)
        if stored is not None and bf16 is not None:
            steps["evaluate bf16-stored checkpoint cuda bf16"]["vs_cuda_bf16"] = compare(bf16, stored, None)


def run_checks(args: argparse.Namespace, work: Path, quantization: str, summary: dict) -> None:
    """The steps of the module docstring, each guarded; results and problems go into ``summary``."""
    steps = summary["steps"]

    def scoring(device: str, dtype: str) -> dict[str, Any]:
        return {"scoring.device": device, "scoring.dtype": dtype, "scoring.cache_dir": None,
                "scoring.num_threads": args.threads}

    def evaluate(name: str, device: str, dtype: str, variant: str = "base", **overlay: Any) -> dict:
        params = params_with(work, {**scoring(device, dtype), **overlay})
        print(f"gpu-check: {name} ...", flush=True)
        metrics, seconds, memory = timed_evaluation(params, variant, work)
        steps[name] = {"seconds": round(seconds, 1), **memory, "metrics": len(metrics), "headline": headline(metrics)}
        print(f"gpu-check: {name}: {len(metrics)} metrics in {seconds:.1f} s {memory}", flush=True)
        return metrics

    if not args.only_lora:
        evaluate_base(args, work, summary, evaluate)
    params = params_with(work, scoring("cpu" if args.cpu else "cuda", "auto"))
    tried = [quantization] + (["none"] if quantization != "none" else [])
    for quant in tried:  # a failed 4-bit fine-tune (bitsandbytes) is a problem; the bf16 LoRA still runs
        name = f"lora fine-tune ({args.lora_variant}) quantization {quant}"
        print(f"gpu-check: {name} ({args.lora_steps} steps) ...", flush=True)
        done = guarded(summary, name, lambda: lora_step(params, work, args.lora_steps, quant, args.lora_variant,
                                                        resolve_optimizer(args.cpu)))
        if done is None:
            continue
        record, seconds = done
        steps[name] = {"seconds": round(seconds, 1), **record}
        training = record["training"]
        want = {"device": "cpu" if args.cpu else "cuda", "quantization": quant}
        summary["problems"] += [f"lora trained with {k}={training.get(k)!r}, expected {v!r}"
                                for k, v in want.items() if training.get(k) != v]
        if not args.cpu and training.get("mixed_precision") not in ("bf16", "fp16"):
            summary["problems"].append(f"lora mixed precision {training.get('mixed_precision')!r} on a GPU")
        if record["train_loss"] is None or not math.isfinite(record["train_loss"]):
            summary["problems"].append(f"lora train loss {record['train_loss']!r}")
        if record["global_step"] != args.lora_steps:
            summary["problems"].append(f"lora trained {record['global_step']} steps, asked {args.lora_steps}")
        guarded(summary, "evaluate lora", lambda: evaluate(
            f"evaluate lora ({quant}) {'cpu' if args.cpu else 'cuda bf16'}", "cpu" if args.cpu else "cuda", "auto",
            "lora", **{"variants.lora.model_dir": "models/lora_check"}))
        break


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    here_dir = Path(__file__).resolve().parent  # bench/ holds requests.py: never shadow the requests package
    sys.path[:] = [str(ROOT / "src"), str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != here_dir]
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print(SKIP_MESSAGE)
        return 0
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    summary: dict = {"mode": "cpu" if args.cpu else "cuda", **versions(), "steps": {}, "problems": []}
    if not args.cpu:
        summary["device"] = torch.cuda.get_device_name(0)
    quantization = resolve_quantization(args.quantization, args.cpu)
    work = Path(tempfile.mkdtemp(prefix="biaslab-gpu-check-"))
    here = Path.cwd()
    try:
        workspace_copy(args.workspace.resolve(), work)
        os.chdir(work)  # variant manifests name their base relative to the project root
        run_checks(args, work, quantization, summary)
    finally:
        os.chdir(here)
        shutil.rmtree(work, ignore_errors=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu-check.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n",
                                             encoding="utf-8")
    (args.out / "gpu-check.md").write_text(markdown(summary), encoding="utf-8")
    print(json.dumps(summary, indent=2, ensure_ascii=False, default=str))
    verdict = "FAILED - " + "; ".join(summary["problems"]) if summary["problems"] else "PASSED"
    print(f"gpu-check: {verdict} ({summary['mode']})")
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
