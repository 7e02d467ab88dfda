"""How often each benchmark family detects the planted bias, over several draws of the default model's recipe.

One `make run` is one draw of the recipe: the 2.9 M-parameter default model is chaotic enough that another
seed, thread count or CPU vendor trains another model (docs/planted_bias.md 5.1, 5.6), and whether a family's
CIs come apart differs from draw to draw. A recipe is judged on several draws; this script makes them:

    python bench/planted_draws.py --seeds 0 1 2 3                         # the params.yaml recipe, 4 draws
    python bench/planted_draws.py --seeds 0 1 2 3 --recipe committed \\
        --recipe strong:model.pretrain.planted_bias.strength=6 --device cuda --workers 6

For every seed (``model.pretrain.seed``: the initialization, the corpus split and order; the planted
sentences and their order follow ``planted_bias.seed``, which a recipe may set) it trains the shared phase once (``train_shared``), then for every recipe the planted model and its
counterbalanced control (``continue_training``), scores both on the enabled benchmarks
(``evaluation.run_benchmarks``, float32) and applies the calibrate stage's rule (``calibration.detect_all``),
with the stage's paired reading next to it (the primary metrics recomputed item by item from both models'
prediction tables, ``calibration.paired_differences``).
A recipe is a name and dotted ``key=value`` settings over params.yaml (values read as YAML); recipes may
change anything but the shared phase (``model.pretrain`` outside ``planted_bias``, and its ``from_step``),
so all recipes of a seed continue the same checkpoint.

``--device cuda`` trains and scores on a GPU: many draws in minutes (several workers share it). A GPU draw
is another draw like another CPU's, not the CPU's model. Held-out quality is read on the prepared
``lm_heldout`` text, which is seed 0's validation split: for other seeds part of it was trained on, so
compare its values across recipes of one seed, not across seeds.

Output (``--out``, default ``bench/results/planted-draws``, git-ignored): ``draws.jsonl`` (a line per
recipe and seed: the ``commit`` and ``params_hash`` it was drawn with - the calibrate stage counts only draws
whose hash is its own params' (``biaslab.calibration.draws.recipe_hash``) - and every configured family's
primary metric, planted and control with CIs, its status),
``models.jsonl`` (a line per trained model: its headline metrics and training summary) and
``summary.md`` / ``summary.json`` (per recipe and family: detected in k of K draws, by the paired reading
in how many, the mean effect). With ``--keep`` each model's prediction tables stay next to it
(``<model>/predictions/<benchmark>__<table>.parquet``, as ``data/predictions/<variant>/``).
Progress goes to stderr, a line per finished task.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import sys
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = "committed"  # the recipe of params.yaml itself
SHARED_FIELDS_OF_PLANTED = ("from_step",)  # the one planted_bias field the shared phase depends on
# the re-seeded control of an A/A pair: planted_bias.seed + AA_SEED_OFFSET (sentences, their order, lexicon); an
# A/A pair's recipe name: "<recipe>" + AA_SUFFIX. One convention with the calibrate stage that reads the draws.
if str(ROOT / "src") not in sys.path:  # run without install
    sys.path.insert(0, str(ROOT / "src"))
from biaslab.calibration.draws import AA_SEED_OFFSET, AA_SUFFIX  # noqa: E402


def parse_recipe(text: str) -> tuple[str, dict[str, Any]]:
    """``name`` or ``name:key=value,key=value`` -> ``(name, {dotted key: YAML value})``."""
    import yaml

    name, _, settings = text.partition(":")
    if not name:
        raise argparse.ArgumentTypeError(f"recipe {text!r}: a name is needed before ':'")
    overlay = {}
    for item in filter(None, settings.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"recipe {name!r}: {item!r} is not key=value")
        overlay[key.strip()] = yaml.safe_load(value)
    return name, overlay


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, default=ROOT, help="project root with params.yaml, data/prepared")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="model.pretrain.seed values")
    parser.add_argument("--recipe", type=parse_recipe, action="append", dest="recipes",
                        help=f"name[:key=value,...] over params.yaml; repeatable (default: {COMMITTED!r} alone)")
    parser.add_argument("--set", type=parse_recipe, default=("", {}), dest="common", metavar="_:KEY=VALUE,...",
                        help="settings applied to every recipe, shared phase included (e.g. _:model.pretrain.max_steps=60)")
    parser.add_argument("--corpus-dir", type=Path, default=None, help="model.pretrain.corpus_dir (default: params')")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--workers", type=int, default=1, help="processes at once (they share the device)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads per worker (default: cores / workers)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "planted-draws")
    parser.add_argument("--keep", type=Path, default=None, help="keep the trained models under this folder")
    parser.add_argument("--aa", action="store_true",
                        help="also an A/A pair per draw: the control against a second control whose continuation "
                             f"is re-seeded (planted_bias.seed + {AA_SEED_OFFSET}); its 'detections' are false positives")
    parser.add_argument("--aa-only", action="store_true",
                        help="only the A/A pairs (implies --aa): no planted model, a third less training")
    parser.add_argument("--select", nargs="+", default=[], metavar="FAMILY",
                        help="also score these families' benchmarks on their selection items (docs/splits.md; "
                             "e.g. occugender) and record each pair's paired reading there (a draw's 'select')")
    args = parser.parse_args(argv)
    args.aa = args.aa or args.aa_only
    args.recipes = args.recipes or [(COMMITTED, {})]
    names = [name for name, _ in args.recipes]
    if len(set(names)) != len(names):
        parser.error(f"recipe names must differ: {names}")
    return args


# --------------------------------------------------------------------------- params of a draw
@functools.cache
def _bench_module(name: str):
    """``bench/<name>.py`` loaded by path, once (bench/ on sys.path would shadow the requests package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def overlay_params(params: dict, overlay: Mapping[str, Any]) -> dict:
    """gpu_smoke's dotted-key overlay (sets each dotted key of ``overlay`` in ``params``)."""
    return _bench_module("gpu_smoke").overlay_params(params, dict(overlay))


def draw_params(workspace: Path, common: Mapping[str, Any], overlay: Mapping[str, Any], seed: int,
                corpus_dir: Path | None, device: str, threads: int) -> dict[str, Any]:
    """params.yaml with the common settings, the recipe, the seed and the scoring settings of a draw (raw dict)."""
    import yaml

    from biaslab.config import Params

    raw = yaml.safe_load((workspace / "params.yaml").read_text(encoding="utf-8"))
    settings = {**common, **overlay, "model.pretrain.seed": seed,
                "data.prepared_dir": str(workspace / "data" / "prepared"),
                "scoring.device": device, "scoring.dtype": "float32", "scoring.cache_dir": None,
                "scoring.num_threads": threads}
    if corpus_dir is not None:
        settings["model.pretrain.corpus_dir"] = str(corpus_dir.resolve())
    raw = overlay_params(raw, settings)
    Params.model_validate(raw)  # a misspelt key or a bad value fails here, before anything trains
    return raw


def shared_key(raw: Mapping[str, Any]) -> str:
    """What the shared phase depends on: ``model.pretrain`` without ``planted_bias`` (but its ``from_step``)."""
    pretrain = dict(raw["model"]["pretrain"])
    planted = pretrain.pop("planted_bias")
    pretrain["planted_bias"] = {k: planted[k] for k in SHARED_FIELDS_OF_PLANTED}
    return json.dumps(pretrain, sort_keys=True, default=str)


# --------------------------------------------------------------------------- tasks (run in worker processes)
def _init_worker(threads: int) -> None:
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS (train.deterministic)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    src = str(ROOT / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    import torch

    torch.set_num_threads(threads)


def shared_task(raw: dict, out_dir: str, device: str) -> dict:
    """The shared phase of one seed into ``out_dir``."""
    from biaslab.config import Params
    from biaslab.pretrain.phases import train_shared

    started = time.perf_counter()
    summary = train_shared(Params.model_validate(raw), out_dir, progress=False, device=device)
    return {"seconds": round(time.perf_counter() - started, 1), "val_ppl": summary["val_ppl"]}


def model_task(raw: dict, checkpoint_dir: str, direction: str, model_dir: str, device: str,
               tables: tuple[str, ...] = (), select: tuple[str, ...] = ()) -> dict:
    """Continue ``checkpoint_dir`` with planted text of ``direction``, save it, score it: its metrics, and the
    prediction ``tables`` (``<benchmark>__<table>``) the paired reading needs; every table is written under
    ``model_dir/predictions``. The benchmarks named in ``select`` are scored again on their selection items
    (``select_metrics``, ``select_predictions``; tables under ``model_dir/predictions/select``)."""
    from biaslab.evaluation import suite as evaluation
    from biaslab.config import Params
    from biaslab.pretrain.phases import continue_training, save_continued

    started = time.perf_counter()
    params = Params.model_validate(raw)
    run = continue_training(params, checkpoint_dir, direction, progress=False, device=device)
    save_continued(run, model_dir)
    trained = time.perf_counter() - started
    del run
    scored = Params.model_validate(overlay_params(copy.deepcopy(raw), {"variants.base.model_dir": model_dir}))
    under_test = evaluation.load_variant(scored, "base", Path(model_dir).parent)
    result = evaluation.run_benchmarks(scored, under_test, Path(model_dir).parent)
    (Path(model_dir) / "predictions").mkdir(exist_ok=True)
    for name, frame in result.predictions.items():
        frame.to_parquet(Path(model_dir) / "predictions" / f"{name}.parquet", index=False)
    summary = json.loads((Path(model_dir) / "training_summary.json").read_text(encoding="utf-8"))
    record = {"direction": direction, "train_seconds": round(trained, 1),
              "score_seconds": round(time.perf_counter() - started - trained, 1),
              "final_train_loss": summary["final_train_loss"], "val_bits_per_char": summary["val_bits_per_char"],
              "metrics": {name: mv.to_dict() for name, mv in result.metrics.items()},
              "predictions": {name: result.predictions[name] for name in tables if name in result.predictions}}
    if select:
        chosen = _bench_module("gate_tolerances").evaluate_on_selection(scored, model_dir, Path(model_dir).parent,
                                                                       benchmarks=select)
        (Path(model_dir) / "predictions" / "select").mkdir(exist_ok=True)
        for name, frame in chosen.predictions.items():
            frame.to_parquet(Path(model_dir) / "predictions" / "select" / f"{name}.parquet", index=False)
        record["select_metrics"] = {name: mv.to_dict() for name, mv in chosen.metrics.items()}
        record["select_predictions"] = {name: chosen.predictions[name] for name in tables
                                        if name in chosen.predictions}
    return record


# --------------------------------------------------------------------------- the verdicts
def metric_values(metrics: Mapping[str, dict]) -> dict:
    """``{name: MetricValue}`` from the ``MetricValue.to_dict()`` records a worker sends back."""
    from biaslab.metrics.values import MetricValue

    return {name: MetricValue(**record) for name, record in metrics.items()}


def _triple(mv: Any) -> list:
    return [mv.value, mv.ci_low, mv.ci_high] if mv is not None else [None] * 3


def verdicts(families: Mapping[str, Mapping[str, str]], planted: Mapping[str, dict], control: Mapping[str, dict],
             paired: Mapping[str, Any] | None = None) -> dict:
    """Per family: its primary metric, planted and control ``[value, low, high]``, the status and the effect,
    and the paired reading (``paired``: metric -> ``PairedDifference``) as ``[value, low, high]`` and its status."""
    from biaslab.calibration.families import detect_all

    out = {}
    for d in detect_all(families, metric_values(planted), metric_values(control), paired):
        if d.primary:
            out[d.family] = {"metric": d.metric, "status": d.status, "effect": d.effect, "needed": d.needed,
                             "planted": _triple(d.planted), "control": _triple(d.control),
                             "paired_status": d.paired_status,
                             "paired": [d.paired.value, d.paired.ci_low, d.paired.ci_high] if d.paired else [None] * 3}
    return out


def paired_statistics(raw: Mapping[str, Any], families: Mapping[str, Mapping[str, str]]) -> dict[str, tuple[str, Any]]:
    """``{primary metric: (benchmark, ItemStatistic)}``: what the calibrate stage pairs, for these params."""
    from biaslab.config import Params
    from pipelines.calibrate import item_statistics

    return item_statistics(Params.model_validate(raw), [next(iter(m)) for m in families.values() if m])


def paired_of(raw: Mapping[str, Any], statistics: Mapping[str, tuple[str, Any]], planted: dict, control: dict) -> dict:
    """The planted − control paired differences of one draw, with the evaluation's bootstrap settings."""
    from biaslab.calibration.families import paired_differences

    ev = raw.get("evaluation", {})
    return paired_differences(statistics, planted.get("predictions", {}), control.get("predictions", {}),
                              samples=int(ev.get("bootstrap_samples", 1000)), seed=int(ev.get("seed", 0)),
                              confidence=float(ev.get("confidence", 0.95)))


def tally(draws: list[dict], recipes: list[str], families: list[str]) -> dict:
    """Per recipe and family: detected in k of K draws and the mean effect; per recipe the families per draw."""
    out = {}
    for recipe in recipes:
        rows = [d for d in draws if d["recipe"] == recipe]
        per_family = {}
        for family in families:
            seen = [d["families"][family] for d in rows if family in d["families"]]
            effects = [s["effect"] for s in seen if s["effect"] is not None]
            per_family[family] = {"detected": sum(s["status"] == "detected" for s in seen), "draws": len(seen),
                                  "paired_detected": sum(s.get("paired_status") == "detected" for s in seen),
                                  "mean_effect": sum(effects) / len(effects) if effects else None}
        out[recipe] = {"draws": len(rows), "families": per_family,
                       "families_per_draw": {str(d["seed"]): d["detected"] for d in rows},
                       "families_per_draw_paired": {str(d["seed"]): d.get("detected_paired") for d in rows},
                       "planted_qa_macro_f1": {str(d["seed"]): d["planted_qa_macro_f1"] for d in rows}}
    return out


def markdown(result: dict) -> str:
    families = result["families"]
    layout = (f", {result['workers']} worker(s) x {result['threads']} thread(s)"
              if result.get("workers") and result.get("threads") else "")
    common = ", ".join(f"{k}={v}" for k, v in result.get("common", {}).items())
    lines = [f"# planted-draws: {result['device']}, seeds {result['seeds']}{layout}", "",
             *([f"Every recipe, the shared phase included (`--set`): {common}.", ""] if common else []),
             "Per recipe and family (primary metric): draws in which the planted model's 95 % CI is apart from the "
             "control's in the expected direction; *paired*: draws in which the paired CI of planted − control "
             "(the items resampled once for both models) is apart from 0 that way; the mean planted − control "
             "effect. A `<recipe>/A-A` row reads the control against a second control re-seeded after "
             "`from_step` as if it were the planted model: each of its detections is a false positive.", "",
             "| recipe | settings | " + " | ".join(families) + " | families per draw (paired) | planted QA macro-F1 |",
             "|---|---|" + "---|" * len(families) + "---|---|"]
    for recipe, entry in result["tally"].items():
        cells = []
        for family in families:
            f = entry["families"][family]
            mean = "n/a" if f["mean_effect"] is None else f"{f['mean_effect']:+.3f}"
            cells.append(f"{f['detected']} of {f['draws']}, paired {f.get('paired_detected', 0)} ({mean})")
        base_recipe = recipe.removesuffix(AA_SUFFIX)
        settings = ", ".join(f"{k}={v}" for k, v in result["recipes"][base_recipe].items()) or "params.yaml"
        if recipe != base_recipe:
            settings += "; A/A: control vs re-seeded control"
        paired = entry.get("families_per_draw_paired", {})
        per_draw = ", ".join(f"{v} ({paired.get(seed)})" for seed, v in entry["families_per_draw"].items())
        f1 = ", ".join(f"{v:.2f}" for v in entry["planted_qa_macro_f1"].values() if v is not None)
        lines.append(f"| {recipe} | {settings} | " + " | ".join(cells) + f" | {per_draw} | {f1} |")
    lines += ["", f"{result['seconds']:.0f} s in all; {result['failures']} failed task(s)."]
    return "\n".join(lines) + "\n"


def selection_benchmarks(families: Mapping[str, Mapping[str, str]], statistics: Mapping[str, tuple[str, Any]],
                         chosen: list[str]) -> tuple[str, ...]:
    """The benchmarks of the ``chosen`` families' primary metrics (what ``--select`` scores on selection items)."""
    out = []
    for family in chosen:
        if family not in families or not families[family]:
            raise SystemExit(f"planted-draws: --select {family}: not a calibrate family ({', '.join(families)})")
        metric = next(iter(families[family]))
        if metric not in statistics:
            raise SystemExit(f"planted-draws: --select {family}: {metric} has no item statistic to pair")
        out.append(statistics[metric][0])
    return tuple(dict.fromkeys(out))


# --------------------------------------------------------------------------- the run
def resolve_device(asked: str) -> str:
    import torch

    if asked == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if asked == "cuda" and not torch.cuda.is_available():
        raise SystemExit("planted-draws: --device cuda, but torch sees no CUDA device")
    return asked


def log(message: str) -> None:
    print(f"planted-draws {time.strftime('%H:%M:%S')}: {message}", file=sys.stderr, flush=True)


def model_roles(raw: Mapping[str, Any], aa: bool, planted: bool = True) -> dict[str, tuple[dict, str]]:
    """The models of one draw: ``{role: (params, direction)}``: ``planted`` (unless not ``planted``), ``balanced``
    (the control) and, with ``aa``, ``balanced-reseeded``: the control's recipe with ``planted_bias.seed`` moved by
    :data:`AA_SEED_OFFSET`, so it shares the control's first phase and differs only in the continuation's draw
    (which planted and counter-sentences, their order, the coded lexicon)."""
    roles = {"planted": (dict(raw), "planted")} if planted else {}
    roles["balanced"] = (dict(raw), "balanced")
    if aa:
        seed = raw["model"]["pretrain"]["planted_bias"]["seed"]
        roles["balanced-reseeded"] = (overlay_params(copy.deepcopy(dict(raw)),
                                                     {"model.pretrain.planted_bias.seed": seed + AA_SEED_OFFSET}),
                                      "balanced")
    return roles


PAIRS = {"": ("planted", "balanced"), AA_SUFFIX: ("balanced-reseeded", "balanced")}
"""Recipe-name suffix -> (treated role, control role): the planted pair and the A/A pair."""


def pairs_ready(models: Mapping[str, dict], finished: str) -> dict[str, tuple[dict, dict]]:
    """The pairs that ``finished`` completes: ``{suffix: (treated record, control record)}``."""
    return {suffix: (models[treated], models[control]) for suffix, (treated, control) in PAIRS.items()
            if finished in (treated, control) and treated in models and control in models}


def read_draw(raw: Mapping[str, Any], statistics: Mapping[str, tuple[str, Any]], families: Mapping[str, Mapping[str, str]],
              recipe: str, seed: int, treated: dict, control: dict) -> dict:
    """One pair read as the calibrate stage reads planted against control: per family CIs apart and paired.
    Where both models were also scored on selection items (``--select``), ``select`` holds those families'
    entries read the same way on those items (what a margin is sized on; docs/gate.md "Spill-over margins")."""
    paired = paired_of(raw, statistics, treated, control)
    found = verdicts(families, treated["metrics"], control["metrics"], paired)
    qa = treated["metrics"].get("gbem_ua/qa_macro_f1", {}).get("value")
    draw = {"recipe": recipe, "seed": seed, **recipe_stamp(raw), "families": found, "planted_qa_macro_f1": qa,
            "detected": sum(f["status"] == "detected" for f in found.values()),
            "detected_paired": sum(f["paired_status"] == "detected" for f in found.values())}
    if "select_metrics" in treated and "select_metrics" in control:
        chosen = {f: m for f, m in families.items() if m and next(iter(m)) in treated["select_metrics"]}
        on_select = paired_of(raw, statistics, {"predictions": treated["select_predictions"]},
                              {"predictions": control["select_predictions"]})
        draw["select"] = verdicts(chosen, treated["select_metrics"], control["select_metrics"], on_select)
    return draw


@functools.cache
def started_commit() -> str:
    """The commit (``-dirty`` with changes) of the code that runs: read once, at the start (:func:`main`), so a
    commit made while the draws run does not relabel the draws read after it."""
    from biaslab.tracking.git_commit import git_commit

    return git_commit(ROOT)


def recipe_stamp(raw: Mapping[str, Any]) -> dict[str, str]:
    """``commit`` (:func:`started_commit`) and ``params_hash`` (``biaslab.calibration.draws.recipe_hash``): what
    the calibrate stage matches against its own params before it counts a draw (another recipe is stale)."""
    from biaslab.calibration.draws import recipe_hash
    from biaslab.config import Params

    return {"commit": started_commit(), "params_hash": recipe_hash(Params.model_validate(dict(raw)).model_dump(mode="json"))}


def run_draws(pool: ProcessPoolExecutor, raws: Mapping[tuple[str, int], dict], shared_dirs: Mapping[str, str],
              work: Path, device: str, families: Mapping[str, Mapping[str, str]], out: Path,
              statistics: Mapping[str, tuple[str, Any]] | None = None, aa: bool = False, planted: bool = True,
              select: tuple[str, ...] = ()) -> tuple[list[dict], int]:
    """Every shared phase, then every planted (unless not ``planted``) and control model (and with ``aa`` the
    re-seeded control) as its checkpoint is ready, each also scored on the selection items of the ``select``
    benchmarks; the draws (each also appended to ``out/draws.jsonl``, each model to ``out/models.jsonl``; an A/A
    pair is a draw of recipe ``<recipe>/A-A``) and the number of failed tasks."""
    failures = 0
    models: dict[tuple[str, int], dict[str, dict]] = {}
    draws: list[dict] = []
    shared_jobs = {pool.submit(shared_task, raw, shared_dirs[shared_key(raw)], device): key
                   for key, raw in {shared_key(r): r for r in raws.values()}.items()}
    model_jobs = {}
    statistics = statistics or {}
    tables = tuple(sorted({f"{bench}__{stat.table}" for bench, stat in statistics.values()}))
    for job in as_completed(shared_jobs):
        key = shared_jobs[job]
        try:
            log(f"shared phase {Path(shared_dirs[key]).name} done {job.result()}")
        except Exception as exc:  # noqa: BLE001 - the draws of that seed fail, the others go on
            failures += 1
            log(f"shared phase {Path(shared_dirs[key]).name} FAILED: {type(exc).__name__}: {exc}")
            continue
        for (name, seed), raw in raws.items():
            if shared_key(raw) != key:
                continue
            for role, (model_raw, direction) in model_roles(raw, aa, planted).items():
                model_dir = str(work / f"{name}-seed{seed}" / role)
                model_jobs[pool.submit(model_task, model_raw, shared_dirs[key], direction, model_dir, device,
                                       tables, select)] = (name, seed, role)
    for job in as_completed(model_jobs):
        name, seed, role = model_jobs[job]
        try:
            record = job.result()
        except Exception as exc:  # noqa: BLE001 - one failed model loses one draw, not the run
            failures += 1
            log(f"{name} seed {seed} {role} FAILED: {type(exc).__name__}: {exc}")
            continue
        _append(out / "models.jsonl", {"recipe": name, "seed": seed, "role": role,
                                       **{k: v for k, v in record.items() if not k.endswith("predictions")}})
        log(f"{name} seed {seed} {role}: trained {record['train_seconds']} s, scored {record['score_seconds']} s")
        models.setdefault((name, seed), {})[role] = record
        pairs = pairs_ready(models[(name, seed)], role)
        for pair_name, (treated, control) in pairs.items():
            recipe = name + pair_name
            draw = read_draw(raws[(name, seed)], statistics, families, recipe, seed, treated, control)
            draws.append(draw)
            _append(out / "draws.jsonl", draw)
            log(f"{recipe} seed {seed}: {draw['detected']} of {len(draw['families'])} families detect "
                f"({', '.join(f for f, v in draw['families'].items() if v['status'] == 'detected') or 'none'}); "
                f"paired {draw['detected_paired']} "
                f"({', '.join(f for f, v in draw['families'].items() if v['paired_status'] == 'detected') or 'none'})")
        if len(models[(name, seed)]) == len(model_roles(raws[(name, seed)], aa, planted)):
            for record in models[(name, seed)].values():
                record.pop("predictions", None)  # every pair read: free the tables
                record.pop("select_predictions", None)
    return draws, failures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    here_dir = Path(__file__).resolve().parent  # bench/ first on sys.path could shadow an installed package
    # the library, and the root for the calibrate stage's item statistics (pipelines.calibrate)
    sys.path[:] = [str(ROOT / "src"), str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != here_dir]
    device = resolve_device(args.device)
    threads = args.threads or max(1, (os.cpu_count() or 1) // args.workers)
    workspace = args.workspace.resolve()
    work = Path(args.keep or tempfile.mkdtemp(prefix="biaslab-planted-draws-")).resolve()
    recipes = dict(args.recipes)
    raws = {(name, seed): draw_params(workspace, args.common[1], overlay, seed, args.corpus_dir, device, threads)
            for name, overlay in recipes.items() for seed in args.seeds}
    first = next(iter(raws.values()))
    families = {f: dict(m) for f, m in first["calibrate"]["families"].items()}
    shared_dirs: dict[str, str] = {}
    for (name, seed), raw in raws.items():
        key = shared_key(raw)
        shared_dirs.setdefault(key, str(work / f"shared-{len(shared_dirs)}-seed{seed}"))
    args.out.mkdir(parents=True, exist_ok=True)
    for name in ("draws.jsonl", "models.jsonl"):
        (args.out / name).write_text("", encoding="utf-8")
    started = time.perf_counter()
    started_commit()  # the code that runs now, whatever is committed before the last draw is read
    statistics = paired_statistics(first, families)
    select = selection_benchmarks(families, statistics, args.select)
    per_draw = len(model_roles(first, args.aa, not args.aa_only))
    log(f"{len(recipes)} recipe(s) x {len(args.seeds)} seed(s) on {device}, {args.workers} worker(s) x {threads} thread(s); "
        f"{len(shared_dirs)} shared phase(s), {per_draw * len(raws)} models"
        + (f"; selection items of {', '.join(select)}" if select else ""))
    with ProcessPoolExecutor(args.workers, mp_context=_spawn(), initializer=_init_worker, initargs=(threads,)) as pool:
        draws, failures = run_draws(pool, raws, shared_dirs, work, device, families, args.out, statistics,
                                    aa=args.aa, planted=not args.aa_only, select=select)
    result = {"device": device, "seeds": args.seeds, "common": args.common[1], "recipes": recipes,
              "families": list(families),
              "tally": tally(draws, ([] if args.aa_only else list(recipes))
                             + ([r + AA_SUFFIX for r in recipes] if args.aa else []), list(families)),
              "seconds": time.perf_counter() - started,
              "failures": failures, "threads": threads, "workers": args.workers}
    (args.out / "summary.json").write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    (args.out / "summary.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    if args.keep is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def _spawn():
    import multiprocessing

    return multiprocessing.get_context("spawn")  # CUDA cannot be used in forked children


def _append(path: Path, record: dict) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")


if __name__ == "__main__":
    sys.exit(main())
