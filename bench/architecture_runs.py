"""Random-weight models of real architecture shapes through every stage of a profile, each stage measured.

    python bench/architecture_runs.py --shape mistral --size small          # one run (~10 M parameters)
    python bench/architecture_runs.py --shape llama3 qwen2 gemma2 mistral --size small large
    python bench/architecture_runs.py --fit bench/results/architecture-*.json  # the cost model from stored runs

Issue 41 item 4: what a user's own Hugging Face model costs stage by stage, measured on a CPU with models of
the shapes users bring (:data:`SHAPES`): Llama-3-like (tied embeddings, llama3 rope scaling, grouped-query
attention), Qwen2-like (no BOS token: the tokenizer's ``bos_token`` is removed), Gemma-2-like (logit
soft-capping, a sliding window, a head_dim of its own) and Mistral-like (sharded files with a stray
``consolidated.safetensors`` beside them, as Mistral-7B-v0.3 ships). Weights are random (seed 0), the
tokenizer is the default model's (``--tokenizer``, default ``models/base``), the checkpoint is saved in
float32 in at least two shards with an index (``max_shard_size`` a third of the model).

Per run, in a scratch workspace (the repository's files, ``git init`` + ``dvc init``): ``params.yaml`` gets
``model.source`` = the checkpoint and ``profile`` = ``--profile`` (default ``quick``), plus ``data.sample``
(``--sample``, default 4 per reported group; 0 = the whole data) so a CPU run takes minutes - exactly what
``dvc exp run -S model.source=<dir> -S profile=quick -S data.sample=...`` sets. Then every stage of
``dvc repro --dry``'s order runs as ``dvc repro --single-item <stage>`` in a child process, measured:

* wall seconds and peak RSS (``os.wait4``: the largest process of the stage's tree, DVC included; the
  checkpoint is built in a child process because a child's peak RSS starts at its parent's size);
* bytes written and bytes read by the stage's process tree (``wchar``/``rchar`` of ``/proc/self/io``: the
  kernel adds a reaped child's counters to its parent's, so the bench's own counters before and after a
  stage bracket it). Read bytes include every file the stage opens (Python modules, data, the checkpoint);
  weights are read to be loaded or hashed, so ``read / checkpoint`` is an upper bound on the full passes
  over the checkpoint (loads + hashes) a stage makes;
* what it left on disk: safetensors bytes under ``models/``, ``mlruns/`` and ``.dvc/cache``.

Afterwards ``dvc exp run -S model.source=<dir> -S profile=<profile>`` runs (the done-when command of issue
41: it must complete, and with everything already reproduced only the always-run stages run) and the
checks of that issue are made: no ``consolidated*`` file (by name or by content) anywhere in the workspace,
and at most three full copies of the checkpoint in ``models/`` + ``mlruns/``. Results go to
``bench/results/architecture-<shape>-<size>.json`` and ``.md``.

``--fit`` reads stored runs of one shape at two sizes and fits each stage's wall time as
``a + b * parameters`` (the data, steps and items are the same at both sizes, so ``b`` carries the tokens;
``a`` is start-up and everything that does not grow with the model) and each stage's checkpoint passes (bytes
read and written, and loads, against the checkpoint's size). It prints the fit and a *prediction* for an 8 B
model on one H100 - fixed part, compute, checkpoint bytes at two rates - stated with its assumptions
(:func:`predict_h100`): never a measurement. Fit runs of the whole data (``--sample 0``): on sampled data the
part that grows with the model is lost in start-up.
This is a benchmark, not a test: nothing asserts; a failed stage stops the run and is reported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"

# Two sizes per shape with the default tokenizer's vocabulary (~8 k rows): "small" ~10-13 M, "large" ~40-50 M.
_SIZES = {"small": dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=6, num_attention_heads=6),
          "large": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=10, num_attention_heads=8)}
SHAPES = {
    "llama3": dict(model_type="llama", num_key_value_heads=2, tie_word_embeddings=True, rope_theta=500000.0,
                   rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 1024}),
    "qwen2": dict(model_type="qwen2", num_key_value_heads=2, tie_word_embeddings=True),
    "gemma2": dict(model_type="gemma2", num_key_value_heads=2, head_dim=64, sliding_window=64,
                   final_logit_softcapping=30.0, attn_logit_softcapping=50.0, query_pre_attn_scalar=64),
    "mistral": dict(model_type="mistral", num_key_value_heads=2, tie_word_embeddings=False, sliding_window=None),
}
STRAY = "consolidated.safetensors"
COPY_LIMIT = 3  # issue 41: at most three full copies of the checkpoint in models/ and mlruns/


# --------------------------------------------------------------------------- the checkpoint
def build_checkpoint(out: Path, shape: str, size: str, tokenizer_dir: Path) -> dict:
    """A random float32 model of ``shape``/``size`` + the default tokenizer in ``out`` (sharded, indexed);
    Mistral-like also gets the stray single-file copy. Returns its parameter count and bytes."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    if shape == "qwen2":  # Qwen2's tokenizer has no BOS token and adds none
        tokenizer.bos_token = None
    spec = {**SHAPES[shape], **_SIZES[size]}
    config = AutoConfig.for_model(spec.pop("model_type"), **spec, vocab_size=len(tokenizer),
                                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                  pad_token_id=tokenizer.pad_token_id, max_position_embeddings=2048)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(torch.float32)
    n_parameters = sum(p.numel() for p in model.parameters())
    checkpoint_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, max_shard_size=max(1, checkpoint_bytes // 3))
    tokenizer.save_pretrained(out)
    if shape == "mistral":  # the hub folder of Mistral-7B-v0.3: consolidated weights beside the shards
        save_file({k: v.contiguous().clone() for k, v in model.state_dict().items()}, str(out / STRAY))
    return {"n_parameters": n_parameters, "checkpoint_bytes": checkpoint_bytes,
            "shards": sorted(p.name for p in out.glob("model-*.safetensors"))}


# --------------------------------------------------------------------------- the workspace
def prepare_workspace(work: Path, source: Path, mirror: Path, profile: str, sample: int) -> dict[str, str]:
    """The repository's files in ``work`` as a git + DVC repository, its params set as ``dvc exp run -S``
    would set them; the environment the stages run in."""
    import yaml

    from bench.gpu_smoke import copy_workspace, overlay_params

    copy_workspace(work, mirror)
    params = yaml.safe_load((work / "params.yaml").read_text(encoding="utf-8"))
    overlay = {"model.source": str(source), "profile": profile, "data.mirror_dir": str(mirror),
               "data.sample": {"per_group": sample, "seed": 0} if sample else None}
    (work / "params.yaml").write_text(yaml.safe_dump(overlay_params(params, overlay), allow_unicode=True,
                                                     sort_keys=False), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join((str(work / "src"), str(work))),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for name in ("MLFLOW_TRACKING_URI", "BIASLAB_DATA_DIR"):
        env.pop(name, None)
    git = ["git", "-c", "user.email=bench@biaslab", "-c", "user.name=bench"]
    dvc_init = [] if (work / ".dvc" / "config").exists() else [["dvc", "init", "-q"]]  # the repository's .dvc came along
    for cmd in (["git", "init", "-q"], *dvc_init, [*git, "add", "-A"], [*git, "commit", "-qm", "bench"]):
        subprocess.run(cmd, cwd=work, env=env, check=True, capture_output=True)
    return env


ORDER = ("import networkx as nx; from dvc.repo import Repo; "
         "print('\\n'.join(s.addressing for s in reversed(list(nx.topological_sort(Repo('.').index.graph)))))")


def stage_order(work: Path, env: dict[str, str]) -> list[str]:
    """Every stage of the pipeline, each after the stages it depends on (DVC's own graph: its edges point from
    a stage to the stages it needs; ``dvc repro --dry`` cannot list them before the first outputs exist)."""
    out = subprocess.run([sys.executable, "-c", ORDER], cwd=work, env=env, check=True, capture_output=True, text=True)
    return out.stdout.split()


def io_counters() -> dict[str, int]:
    """``rchar``/``wchar`` of this process, reaped children included (``/proc/self/io``)."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return {"read": int(fields["rchar"]), "written": int(fields["wchar"])}


def safetensors_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*.safetensors")) if path.exists() else 0


def dvc_cache_bytes(work: Path, minimum: int) -> int:
    """Bytes of DVC cache files at least ``minimum`` large (weight files; the cache has no file names)."""
    cache = work / ".dvc" / "cache"
    return sum(p.stat().st_size for p in cache.rglob("*") if p.is_file() and p.stat().st_size >= minimum) \
        if cache.exists() else 0


def run_stage(work: Path, env: dict[str, str], stage: str, log: Path) -> dict:
    """``dvc repro --single-item <stage>`` measured: exit code, wall s, peak RSS, bytes read and written."""
    before, started = io_counters(), time.perf_counter()
    with log.open("a") as out:
        out.write(f"\n===== {stage}\n")
        out.flush()
        proc = subprocess.Popen(["dvc", "repro", "--single-item", stage], cwd=work, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    after = io_counters()
    return {"exit_code": os.waitstatus_to_exitcode(status), "seconds": round(time.perf_counter() - started, 1),
            "peak_rss_bytes": usage.ru_maxrss * 1024, "read_bytes": after["read"] - before["read"],
            "written_bytes": after["written"] - before["written"]}


def md5_of(path: Path) -> str:
    digest = hashlib.md5()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def stray_copies(work: Path, stray_md5: str | None) -> list[str]:
    """Every file in the workspace named ``consolidated*`` or holding the stray file's bytes (DVC's cache
    names files by their MD5)."""
    found = [str(p.relative_to(work)) for p in work.rglob("consolidated*")]
    if stray_md5:
        cached = work / ".dvc" / "cache" / "files" / "md5" / stray_md5[:2] / stray_md5[2:]
        found += [str(cached.relative_to(work))] if cached.exists() else []
    return found


def measure(shape: str, size: str, args: argparse.Namespace) -> dict:
    """One shape and size through every stage of the profile; the result record (also written to RESULTS)."""
    scratch = Path(args.work or tempfile.mkdtemp(prefix=f"biaslab-arch-{shape}-{size}-"))
    source, work = scratch / "checkpoint", scratch / "work"
    work.mkdir(parents=True, exist_ok=True)
    # in a child process: a forked child's peak RSS counts the parent's memory, so this process stays small
    built = json.loads(subprocess.run([sys.executable, __file__, "--build", str(source), shape, size, str(args.tokenizer)],
                                      check=True, capture_output=True, text=True).stdout.splitlines()[-1])
    stray = source / STRAY
    env = prepare_workspace(work, source, args.mirror.resolve(), args.profile, args.sample)
    record = {"shape": shape, "size": size, **built, "profile": args.profile, "sample_per_group": args.sample,
              "date": time.strftime("%Y-%m-%d"), "machine": machine(),
              "command": f"python bench/architecture_runs.py --shape {shape} --size {size} --profile {args.profile} "
                         f"--sample {args.sample}", "stages": {}}
    log = scratch / "stages.log"
    for stage in stage_order(work, env):
        m = run_stage(work, env, stage, log)
        m.update(models_bytes=safetensors_bytes(work / "models"), mlruns_bytes=safetensors_bytes(work / "mlruns"),
                 dvc_cache_bytes=dvc_cache_bytes(work, built["checkpoint_bytes"] // 8))
        record["stages"][stage] = m
        print(f"{shape}/{size} {stage}: {m['seconds']} s, peak RSS {m['peak_rss_bytes'] / 2**20:.0f} MiB, "
              f"read {m['read_bytes'] / built['checkpoint_bytes']:.1f} x ckpt, written "
              f"{m['written_bytes'] / built['checkpoint_bytes']:.1f} x ckpt", flush=True)
        if m["exit_code"]:
            record["failed"] = f"{stage} exited {m['exit_code']}: see {log}"
            break
    if "failed" not in record:
        exp = subprocess.run(["dvc", "exp", "run", "-S", f"model.source={source}", "-S", f"profile={args.profile}"],
                             cwd=work, env=env, capture_output=True, text=True)
        ran = [line.split("'")[1] for line in exp.stdout.splitlines() if line.startswith("Running stage '")]
        record["exp_run"] = {"exit_code": exp.returncode, "stages_run": ran}
    ck = built["checkpoint_bytes"]
    record["checks"] = {
        "stray_copies": stray_copies(work, md5_of(stray) if stray.exists() else None),
        "full_copies_models_mlruns": round((safetensors_bytes(work / "models") + safetensors_bytes(work / "mlruns"))
                                           / ck, 2),
        "copy_limit": COPY_LIMIT}
    record["workspace"] = str(scratch) if args.work or args.keep else None
    if not (args.work or args.keep):
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"architecture-{shape}-{size}"
    stem.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    stem.with_suffix(".md").write_text(markdown(record), encoding="utf-8")
    return record


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "?")
    avx512 = "avx512f" in Path("/proc/cpuinfo").read_text()
    return f"{model}, {os.cpu_count()} cores, {'AVX-512' if avx512 else 'AVX2 only'}, no GPU"


def markdown(record: dict) -> str:
    ck = record["checkpoint_bytes"]
    lines = [f"### {record['shape']} / {record['size']}: {record['n_parameters'] / 1e6:.1f} M parameters, "
             f"float32 checkpoint {ck / 1e6:.0f} MB", "",
             f"`{record['command']}` ({record['date']}, {record['machine']})", "",
             "| stage | wall s | peak RSS MiB | read x ckpt | written x ckpt | models/ | mlruns/ | .dvc/cache |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for stage, m in record["stages"].items():
        lines.append(f"| {stage} | {m['seconds']} | {m['peak_rss_bytes'] / 2**20:.0f} | {m['read_bytes'] / ck:.1f} | "
                     f"{m['written_bytes'] / ck:.1f} | {m['models_bytes'] / ck:.2f} | {m['mlruns_bytes'] / ck:.2f} | "
                     f"{m['dvc_cache_bytes'] / ck:.2f} |")
    total = sum(m["seconds"] for m in record["stages"].values())
    checks = record["checks"]
    lines += ["", f"Total {total:.0f} s over {len(record['stages'])} stages. "
              f"{'FAILED: ' + record['failed'] if 'failed' in record else 'Every stage completed.'} "
              f"`dvc exp run` afterwards: {record.get('exp_run', 'not run')}. Stray `consolidated*` copies: "
              f"{checks['stray_copies'] or 'none'}. Full copies in models/ + mlruns/: "
              f"{checks['full_copies_models_mlruns']} (limit {checks['copy_limit']}).", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- the cost model
H100_BF16_FLOPS = 989e12  # dense bf16 peak of an H100 SXM
H100_UTILISATION = 0.35   # assumed share of peak a batch-scoring / LoRA step reaches: an assumption, not measured
CHECKPOINT_8B = 16.07e9   # Llama-3.1-8B's bf16 safetensors (docs/bytes.md: C)
BYTE_RATES = {"270 MB/s (SHA-256 on this CPU: every byte read hashed at its rate)": 270e6,
              "1.5 GB/s (an NVMe disk; hashing with SHA extensions)": 1.5e9}
LOADS_RSS = 0.5  # a stage whose peak RSS grows by >= half the checkpoint's growth holds the model: one load of it


def fit(records: list[dict]) -> dict[str, dict[str, float]]:
    """Per stage, through the two sizes of one shape (same data, same steps):

    * ``seconds = a + b * parameters``: ``b`` carries the tokens (the same at both sizes), ``a`` is start-up and
      everything that does not grow with the model;
    * ``read`` / ``written``: checkpoint passes, the slope of the stage's bytes read / written against the
      checkpoint's bytes (what grows with the model; Python's modules and the data cancel out). A model
      loaded through ``mmap`` is not in these counters (page faults are not ``read`` calls): ``loads`` (1 when the
      stage's peak RSS grows by at least :data:`LOADS_RSS` of the checkpoint's growth) counts it."""
    small, large = sorted(records, key=lambda r: r["n_parameters"])
    p1, p2 = small["n_parameters"], large["n_parameters"]
    c1, c2 = small["checkpoint_bytes"], large["checkpoint_bytes"]
    out = {}
    for stage in small["stages"]:
        if stage not in large["stages"]:
            continue
        s, l = small["stages"][stage], large["stages"][stage]
        b = max(0.0, (l["seconds"] - s["seconds"]) / (p2 - p1))
        passes = {key: max(0.0, round((l[f"{key}_bytes"] - s[f"{key}_bytes"]) / (c2 - c1), 1))
                  for key in ("read", "written")}
        loads = float((l["peak_rss_bytes"] - s["peak_rss_bytes"]) / (c2 - c1) >= LOADS_RSS)
        out[stage] = {"a": max(0.0, s["seconds"] - b * p1), "b": b, **passes, "loads": loads}
    return out


def predict_h100(model: dict[str, dict[str, float]], cpu_flops: float, parameters: float = 8.0e9,
                 data_scale: float = 1.0, startup_seconds: float = 25.0, checkpoint_bytes: float = CHECKPOINT_8B,
                 byte_rate: float = 1.5e9) -> dict[str, dict[str, float]]:
    """A *prediction* per stage for ``parameters`` on one H100, in three parts (seconds):

    * ``fixed``: the stage's ``a`` measured here (start-up, data, bootstrap, logging: none of it grows with the
      model); a stage that loads the model pays at least ``startup_seconds`` (measured on an H200 host:
      ``bench/gpu_smoke.py`` STARTUP_SECONDS, imports and CUDA set-up);
    * ``compute``: the part that grows with the model (``b * P``, CPU seconds per parameter at the measured data
      size) scaled by ``data_scale`` (whole data / sampled data; 1 for ``--sample 0``) and by the ratio of this
      CPU's measured FLOP/s to the H100's assumed effective FLOP/s (:data:`H100_BF16_FLOPS` x
      :data:`H100_UTILISATION`);
    * ``bytes``: the checkpoint passes the stage made here (``read`` + ``written`` + ``loads``) over a
      ``checkpoint_bytes`` checkpoint at ``byte_rate`` (:data:`BYTE_RATES`: an assumption, given as a range)."""
    speedup = H100_BF16_FLOPS * H100_UTILISATION / cpu_flops
    out = {}
    for stage, c in model.items():
        fixed = max(c["a"], startup_seconds) if c.get("loads") else c["a"]
        passes = c.get("read", 0.0) + c.get("written", 0.0) + c.get("loads", 0.0)
        out[stage] = {"fixed": fixed, "compute": c["b"] * parameters * data_scale / speedup,
                      "bytes": passes * checkpoint_bytes / byte_rate}
    return out


def cpu_matmul_flops() -> float:
    """This machine's float32 matmul FLOP/s (``bench/run.py``'s measurement, all threads)."""
    import torch

    from bench.run import matmul_peak_flops

    return matmul_peak_flops(torch.get_num_threads())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", nargs="+", choices=sorted(SHAPES), default=["mistral"])
    parser.add_argument("--size", nargs="+", choices=sorted(_SIZES), default=["small"])
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--sample", type=int, default=4, help="data.sample.per_group (0 = the whole data)")
    parser.add_argument("--tokenizer", type=Path, default=ROOT / "models" / "base")
    parser.add_argument("--mirror", type=Path, default=Path(os.environ.get("BIASLAB_DATA_DIR", ROOT.parent / "shared" /
                                                                             "datasets")))
    parser.add_argument("--work", type=Path, help="scratch directory (kept); default a temporary one, removed")
    parser.add_argument("--keep", action="store_true", help="keep the temporary scratch directory")
    parser.add_argument("--fit", nargs="+", type=Path, metavar="JSON", help="fit the cost model from stored runs")
    parser.add_argument("--data-scale", type=float, default=1.0, help="whole data / sampled data, for --fit")
    parser.add_argument("--build", nargs=4, metavar=("OUT", "SHAPE", "SIZE", "TOKENIZER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        out, shape, size, tokenizer = args.build
        print(json.dumps(build_checkpoint(Path(out), shape, size, Path(tokenizer))))
        return 0
    if args.fit:
        records = [json.loads(p.read_text(encoding="utf-8")) for p in args.fit]
        flops = cpu_matmul_flops()
        for shape in sorted({r["shape"] for r in records}):
            runs = [r for r in records if r["shape"] == shape and "failed" not in r]
            if len(runs) != 2:
                print(f"{shape}: needs two completed sizes, has {len(runs)}")
                continue
            model = fit(runs)
            print(f"{shape}: CPU {flops / 1e9:.0f} GFLOP/s measured; PREDICTED 8 B on one H100 (assumptions in "
                  f"predict_h100), data scale {args.data_scale:g}:")
            for label, rate in BYTE_RATES.items():
                predicted = predict_h100(model, flops, data_scale=args.data_scale, byte_rate=rate)
                parts = {part: sum(p[part] for p in predicted.values()) / 60 for part in ("fixed", "compute", "bytes")}
                print(f"  checkpoint bytes at {label}: {sum(parts.values()):.0f} min "
                      f"(fixed {parts['fixed']:.1f} + compute {parts['compute']:.1f} + bytes {parts['bytes']:.1f})")
            print(f"  per stage (checkpoint bytes at {label}):")  # the last rate's prediction, from the loop
            for stage, c in model.items():
                p = predicted[stage]
                print(f"  {stage}: a {c['a']:.1f} s + b {c['b'] * 1e6:.3f} s/M params; checkpoint passes read "
                      f"{c['read']:.1f}, written {c['written']:.1f}, loads {c['loads']:.0f} -> fixed {p['fixed']:.0f} s "
                      f"+ compute {p['compute']:.0f} s + bytes {p['bytes']:.0f} s")
        return 0
    if not (args.tokenizer / "tokenizer.json").exists():
        parser.error(f"--tokenizer {args.tokenizer}: no tokenizer.json (run the base_model stage, or name a folder)")
    for shape in args.shape:
        for size in args.size:
            record = measure(shape, size, args)
            print(markdown(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
