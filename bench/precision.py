"""Memory and disk of the precision path on a bf16 ~0.5 B model: snapshot -> edit_embeddings -> finetune -> register.

    python bench/precision.py                    # Llama-shaped, untied, 128k vocabulary (make bench-precision)
    python bench/precision.py --shape qwen2      # Qwen2-0.5B-shaped: 152k vocabulary, *tied* embeddings

What it does, in a scratch workspace (a temporary directory unless ``--work``):

1. builds a random model of the chosen shape in a child process and saves it in bfloat16 (the
   "checkpoint"; its bytes are the unit of every ratio), with a byte-level BPE tokenizer trained on the
   corpora (the model's vocabulary rows beyond the tokenizer are unused, as in padded hub vocabularies);
2. writes ``params.yaml`` = the repository's, with ``model.source`` = that checkpoint, the ``soft`` variant
   as a checkpoint copy, the ``hard`` variant in hook mode, and a one-step LoRA (``lora.max_steps: 1``, batch 1, no tuning);
3. runs ``prepare`` (not measured), then each measured stage's command from ``dvc.yaml`` in its own process:
   ``base_model`` (the snapshot), ``edit_embeddings@soft`` (full variant), ``edit_embeddings@hard`` (hook),
   ``finetune`` (the adapter; CPU training loads float32, not a target), ``register``. Peak RSS of each is
   the child's ``ru_maxrss`` from ``os.wait4`` (the process and anything it waited for);
4. measures what each stage stored: bytes on disk of every variant directory and of every registered
   artifact, and the dtype of every safetensors file in them (read from the headers).

Targets (issue 10): peak RSS of snapshot, edit_embeddings and register <= 1.5x the checkpoint's bytes;
a full variant on disk <= 1.05x; hook-mode and adapter variants <= 5 %. Results go to
``bench/results/precision-<shape>.json`` and ``.md``. This is a benchmark, not a test: nothing asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SHAPES = {
    # Llama-3-style: large vocabulary, grouped-query attention, untied head (~0.50 B parameters)
    "llama": dict(model_type="llama", vocab_size=128256, hidden_size=1024, intermediate_size=2816,
                  num_hidden_layers=20, num_attention_heads=16, num_key_value_heads=8, tie_word_embeddings=False),
    # Qwen2-0.5B's shape: 152k vocabulary, 2 KV heads, head tied to the embedding (~0.49 B parameters)
    "qwen2": dict(model_type="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864,
                  num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True),
}
TARGETS = {"rss_ratio": 1.5, "full_variant_ratio": 1.05, "overlay_ratio": 0.05}
MEASURED_RSS = ("base_model", "edit_embeddings@soft", "edit_embeddings@hard", "register")


# --------------------------------------------------------------------------- the checkpoint
def build_checkpoint(out: Path, shape: str, corpus_dir: Path, spec: dict | None = None) -> None:
    """Random bf16 model of ``shape`` (or of the config ``spec``) + a BPE tokenizer trained on the corpora."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from biaslab.pretrain.tokenizer import train_bpe_tokenizer

    texts = []
    for language in ("en", "uk", "ru"):
        with (corpus_dir / language / f"{language}_corpus.txt").open(encoding="utf-8") as fh:
            texts += fh.read(400_000).split("\n")
    tokenizer = train_bpe_tokenizer(texts, vocab_size=8192)
    spec = dict(spec or SHAPES[shape])
    config = AutoConfig.for_model(spec.pop("model_type"), **spec, bos_token_id=0, eos_token_id=1, pad_token_id=2,
                                  max_position_embeddings=2048)
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # initialise in bf16: never a float32 copy of the model
    try:
        model = AutoModelForCausalLM.from_config(config)
    finally:
        torch.set_default_dtype(default)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


# --------------------------------------------------------------------------- the workspace
def write_params(work: Path, checkpoint: Path, mirror: Path) -> None:
    import yaml

    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["data"]["mirror_dir"] = str(mirror)
    params["model"]["source"] = str(checkpoint)
    params["variants"]["soft"]["embedding_apply"] = "checkpoint"  # the full variant this bench measures
    params["variants"]["hard"]["embedding_apply"] = "hook"
    params["lora"].update(max_steps=1, per_device_batch_size=1, gradient_accumulation_steps=1, max_length=64,
                          eval_steps=0, save_steps=1000, use_tuned=False)
    (work / "params.yaml").write_text(yaml.safe_dump(params, allow_unicode=True, sort_keys=False), encoding="utf-8")


def stage_commands() -> dict[str, str]:
    """``{stage@item: cmd}`` from dvc.yaml (foreach stages expanded), so the bench runs what DVC runs."""
    import yaml

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    commands = {}
    for name, stage in stages.items():
        if "foreach" in stage:
            items = stage["foreach"]
            for item in items if isinstance(items, list) else []:
                commands[f"{name}@{item}"] = stage["do"]["cmd"].replace("${item}", str(item))
        else:
            commands[name] = stage["cmd"]
    return commands


def run_measured(cmd: str, cwd: Path, env: dict[str, str], log: Path) -> dict[str, float]:
    """Run ``cmd`` in its own process; its exit code, wall seconds and peak RSS (bytes, via ``os.wait4``)."""
    started = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, shell=True, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"exit_code": proc.returncode, "seconds": round(time.perf_counter() - started, 1),
            "peak_rss_bytes": usage.ru_maxrss * 1024}  # Linux reports kilobytes


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def safetensors_dtypes(path: Path) -> dict[str, str]:
    """``{relative file: storage dtype}`` of every safetensors file under ``path`` (from its header)."""
    from biaslab.models.weights.convert import dtype_name
    from biaslab.models.weights.index import file_entries

    out = {}
    for file in sorted(path.rglob("*.safetensors")):
        floats: dict[str, int] = {}
        for entry in file_entries(file):
            if entry.dtype.is_floating_point:
                floats[dtype_name(entry.dtype)] = floats.get(dtype_name(entry.dtype), 0) + entry.nbytes
        out[str(file.relative_to(path))] = max(floats, key=floats.get) if floats else "none"
    return out


def registered_artifacts(work: Path) -> dict[str, Path]:
    """variant -> the local directory of its registered artifacts (the run artifact the version points at)."""
    register = json.loads((work / "runs" / "register.json").read_text(encoding="utf-8"))
    out = {}
    for variant, detail in register.get("details", {}).items():
        source = detail.get("source", "")
        path = Path(source.removeprefix("file://")) if source.startswith(("file:", "/")) else work / source
        out[variant] = path
    return out


# --------------------------------------------------------------------------- report
def report_markdown(result: dict) -> str:
    ck = result["checkpoint_bytes"]
    lines = [f"# Precision bench: {result['shape']} ({result['n_parameters'] / 1e9:.3f} B parameters, "
             f"bf16 checkpoint {ck / 1e9:.3f} GB)", "",
             f"Command: `{result['command']}` ({result['date']}, {result['machine']}).", "",
             "| stage | peak RSS | x checkpoint | target | wall s |", "|---|---:|---:|---:|---:|"]
    for stage, m in result["stages"].items():
        target = f"<= {TARGETS['rss_ratio']}" if stage in MEASURED_RSS else "-"
        lines.append(f"| {stage} | {m['peak_rss_bytes'] / 1e9:.3f} GB | {m['peak_rss_bytes'] / ck:.2f} | {target} | "
                     f"{m['seconds']} |")
    lines += ["", "| stored | bytes | x checkpoint | target | dtype(s) |", "|---|---:|---:|---:|---|"]
    for name, m in result["stored"].items():
        target = {"full": f"<= {TARGETS['full_variant_ratio']}", "overlay": f"<= {TARGETS['overlay_ratio']}"}.get(
            m["kind"], "-")
        lines.append(f"| {name} | {m['bytes']:,} | {m['bytes'] / ck:.4f} | {target} | "
                     f"{', '.join(sorted(set(m['dtypes'].values()))) or '-'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llama")
    parser.add_argument("--work", type=Path, help="workspace directory (default: a temporary one, removed after)")
    parser.add_argument("--mirror", type=Path, default=Path(os.environ.get("BIASLAB_DATA_DIR", ROOT.parent / "shared" /
                                                                             "datasets")))
    parser.add_argument("--build-checkpoint", nargs=2, metavar=("OUT", "SHAPE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_checkpoint:
        build_checkpoint(Path(args.build_checkpoint[0]), args.build_checkpoint[1], args.mirror / "corpora")
        return 0

    work = args.work or Path(tempfile.mkdtemp(prefix="biaslab-precision-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    if (ROOT / "pipelines").is_dir() and not (work / "pipelines").exists():
        (work / "pipelines").symlink_to(ROOT / "pipelines")  # dvc.yaml's commands are relative to the root
    checkpoint = work / "checkpoint"
    try:
        if not checkpoint.is_dir():
            subprocess.run([sys.executable, __file__, "--build-checkpoint", str(checkpoint), args.shape,
                            "--mirror", str(args.mirror)], check=True, env=env)
        write_params(work, checkpoint, args.mirror.resolve())
        commands = stage_commands()
        argv = ["<workspace>" if args.work and a == str(args.work) else a for a in sys.argv[1:]]
        command = " ".join(["python", "bench/precision.py", *argv])  # a reused workspace skips build + prepare
        result: dict = {"shape": args.shape, "command": command,
                        "date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} CPU, no GPU",
                        "stages": {}, "stored": {}}
        from biaslab.models.weights.index import SafetensorsIndex

        index = SafetensorsIndex(checkpoint)
        result["checkpoint_bytes"], result["n_parameters"] = index.total_bytes, index.n_parameters
        result["checkpoint_file_bytes"] = tree_bytes(checkpoint)
        if not (work / "data" / "prepared").is_dir():
            prepare = run_measured(commands["prepare"], work, env, work / "prepare.log")
            if prepare["exit_code"]:
                raise SystemExit(f"prepare failed: see {work / 'prepare.log'}")
        for stage in ("base_model", "edit_embeddings@soft", "edit_embeddings@hard", "finetune", "register"):
            print(f"bench/precision: {stage} ...", flush=True)
            measured = run_measured(commands[stage], work, env, work / f"{stage}.log")
            if measured["exit_code"]:
                raise SystemExit(f"{stage} failed (exit {measured['exit_code']}): see {work / (stage + '.log')}")
            result["stages"][stage] = measured
        for name, kind in (("base", "full"), ("soft", "full"), ("hard", "overlay"), ("lora", "overlay")):
            path = work / "models" / name
            result["stored"][f"models/{name}"] = {"kind": kind, "bytes": tree_bytes(path),
                                                  "dtypes": safetensors_dtypes(path)}
        for variant, path in registered_artifacts(work).items():
            kind = {"base": "full", "soft": "full"}.get(variant, "overlay")
            result["stored"][f"registry: {variant}"] = {"kind": kind, "bytes": tree_bytes(path),
                                                        "dtypes": safetensors_dtypes(path)}
        ck = result["checkpoint_bytes"]
        result["ratios"] = {
            "peak_rss": {s: round(result["stages"][s]["peak_rss_bytes"] / ck, 3) for s in MEASURED_RSS},
            "stored": {n: round(m["bytes"] / ck, 4) for n, m in result["stored"].items()},
        }
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"precision-{args.shape}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        (RESULTS / f"precision-{args.shape}.md").write_text(report_markdown(result), encoding="utf-8")
        print(report_markdown(result))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
