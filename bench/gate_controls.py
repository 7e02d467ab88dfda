"""The controls' strengths: the positive control's steps and rate, the negative control's noise, chosen on the
*selection* items (docs/gate.md "Controls").

    python bench/gate_controls.py              # after `dvc repro base_model` (models/base, data/prepared)
    python bench/gate_controls.py --negative   # the negative control's noise scale

Builds ``positive_control`` candidates (:func:`biaslab.pretrain.gate_controls.positive_control`: the base
fine-tuned on the planted recipe's counterbalanced text mixed with corpus rows) for every (steps, rate) of the
grid, and scores the base and each candidate on the selection items only (GBEM-UA's validation professions,
OccuGender's selection jobs, lm_quality's selection chunks; docs/splits.md). The choice rule, fixed before
any candidate was scored: **the fewest steps, then the lowest rate, whose GBEM-UA QA log-odds gap on the
selection professions is at most a quarter of the base's (the gate asks half: room for the test items'
draw) and whose selection bits/char rise by less than half the gate's bits/char tolerance**; none -> the
largest reduction, reported as such. The chosen values go into ``params.yaml``
``variants.positive_control.control`` by hand.

``--negative``: ``negative_control`` candidates (the base's input embeddings plus noise of ``scale`` × their sd,
:func:`biaslab.pretrain.gate_controls.negative_control`) for every scale of :data:`NEGATIVE_SCALES` and each
noise seed of :data:`NEGATIVE_SEEDS`, scored on the same selection items. A negative control exists to show that
the harm rules see harm, so its harm must be beyond doubt, not a nudge the test items' draw may hide. The rule,
fixed before any candidate was scored: **the smallest scale whose selection bits/char rise by at least twice the
gate's bits/char tolerance for every noise seed**; none -> the largest scale, reported as such. The chosen scale
goes into ``variants.negative_control.control.scale`` (seed 0) by hand.

Output: a markdown table on stdout and ``bench/results/gate-controls.json`` (git-ignored); the candidates'
models in ``bench/results/gate-controls-models/`` (reused when present).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GAP, F1, BPC, OCC = ("gbem_ua/qa_logodds_gap_fem", "gbem_ua/qa_macro_f1", "lm_quality/bits_per_char",
                     "occugender/implicit_group_gap")
GRID = [(30, 1e-3), (30, 3e-3), (60, 1e-3), (60, 3e-3), (120, 3e-3)]
"""(steps, rate) in the rule's order of preference: the first that meets the rule is the choice (the sweep stops)."""
NEGATIVE_SCALES = [0.5, 1.0, 1.5, 2.0, 3.0, 4.0]
"""Noise sd / embedding sd, in the rule's order of preference (smallest harm first)."""
NEGATIVE_SEEDS = (0, 1, 2)
"""Noise draws per scale: the harm must hold for each, not for a lucky draw."""
NEGATIVE_FACTOR = 2.0
"""The selection bits/char rise a negative control must reach, in units of the gate's bits/char tolerance."""


def score_on_selection(params, model_dir: str, root: Path) -> dict:
    """GBEM-UA, OccuGender and lm_quality of the model in ``model_dir`` on the selection items: ``{metric: value}``."""
    from biaslab.config import Params
    from biaslab.evaluation import suite

    raw = copy.deepcopy(params.model_dump(mode="json"))
    raw["variants"]["base"]["model_dir"] = model_dir
    for name, entry in raw["evaluation"]["benchmarks"].items():
        entry["enabled"] = name in {"gbem_ua", "lm_quality", "occugender"}
    scored = Params.model_validate(raw)
    under_test = suite.load_variant(scored, "base", root)
    under_test.ctx = dataclasses.replace(under_test.ctx, split="select", progress=False)
    metrics = suite.run_benchmarks(scored, under_test, root).metrics
    return {m: metrics[m].value for m in (GAP, F1, BPC, OCC) if m in metrics}


def choose(base: dict, candidates: list[dict], bpc_tolerance: float) -> dict:
    """The rule of the module docstring; the chosen candidate with ``rule_met``."""
    ok = [c for c in candidates if abs(c["scores"][GAP]) <= abs(base[GAP]) / 4
          and c["scores"][BPC] - base[BPC] < bpc_tolerance / 2]
    if ok:
        return {**min(ok, key=lambda c: (c["steps"], c["learning_rate"])), "rule_met": True}
    return {**min(candidates, key=lambda c: abs(c["scores"][GAP])), "rule_met": False}


def choose_negative(base: dict, candidates: list[dict], bpc_tolerance: float) -> dict:
    """The ``--negative`` rule of the module docstring over ``[{"scale", "seeds": [{"seed", "scores"}]}]``: the
    chosen candidate with ``rule_met``."""
    ok = [c for c in candidates
          if c["seeds"] and all(s["scores"][BPC] - base[BPC] >= NEGATIVE_FACTOR * bpc_tolerance for s in c["seeds"])]
    if ok:
        return {**min(ok, key=lambda c: c["scale"]), "rule_met": True}
    return {**max(candidates, key=lambda c: c["scale"]), "rule_met": False}


def sweep_negative(params, args, base: dict, bpc_tolerance: float) -> dict:
    """Build and score the negative candidates in the rule's order; stop at the first that meets the rule."""
    from biaslab.config import GateControl
    from biaslab.pretrain.gate_controls import negative_control

    candidates = []
    for scale in NEGATIVE_SCALES:
        seeds = []
        for seed in NEGATIVE_SEEDS:
            model_dir = args.models / f"negative-{scale:g}-seed{seed}"
            if not (model_dir / "config.json").is_file():
                control = GateControl(role="negative", recipe="noised_embeddings", scale=scale, seed=seed)
                negative_control(control, args.root / params.model.output_dir, model_dir)
            seeds.append({"seed": seed, "scores": score_on_selection(params, str(model_dir), args.root)})
            print(f"scale {scale:g}, seed {seed}: {json.dumps(seeds[-1]['scores'])}", flush=True)
        candidates.append({"scale": scale, "seeds": seeds})
        if choose_negative(base, candidates, bpc_tolerance)["rule_met"] and not args.all:
            break
    chosen = choose_negative(base, candidates, bpc_tolerance)
    print(f"\n| candidate (selection items) | seed | Δ {BPC} (x tolerance {bpc_tolerance:g}) | {F1} | {GAP} |"
          "\n|---|---|---|---|---|")
    print(f"| base | | {base[BPC]:.4f} | {base[F1]:.4f} | {base[GAP]:+.4f} |")
    for c in candidates:
        for s in c["seeds"]:
            rise = s["scores"][BPC] - base[BPC]
            print(f"| scale {c['scale']:g} | {s['seed']} | {rise:+.4f} ({rise / bpc_tolerance:.1f}x) "
                  f"| {s['scores'][F1]:.4f} | {s['scores'][GAP]:+.4f} |")
    print(f"\nchosen: scale {chosen['scale']:g} (rule met: {chosen['rule_met']})")
    return {"base": base, "bpc_tolerance": bpc_tolerance, "factor": NEGATIVE_FACTOR, "candidates": candidates,
            "chosen": chosen}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gate-controls.json")
    parser.add_argument("--all", action="store_true", help="score every candidate (default: stop at the choice)")
    parser.add_argument("--models", type=Path, default=ROOT / "bench" / "results" / "gate-controls-models")
    parser.add_argument("--negative", action="store_true", help="choose the negative control's noise scale instead")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from biaslab.config import GateControl, load_params
    from biaslab.cpu_arithmetic import pin
    from biaslab.pretrain.gate_controls import positive_control

    params = load_params(args.params)
    pin(params.scoring.cpu_arithmetic)  # as the stages compute
    bpc_tolerance = next(c.tolerance for c in params.registry.gate if c.metric == BPC)
    base = score_on_selection(params, params.model.output_dir, args.root)
    print(f"base (selection items): {json.dumps(base)}", flush=True)
    if args.negative:
        out = args.out.with_name(args.out.stem + "-negative.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(sweep_negative(params, args, base, bpc_tolerance), indent=2) + "\n",
                       encoding="utf-8")
        return 0
    candidates, data = [], None
    for steps, rate in GRID:
        model_dir = args.models / f"positive-{steps}-{rate:g}"
        if not (model_dir / "training_summary.json").is_file():
            if data is None:
                from transformers import AutoTokenizer

                from biaslab.pretrain.blocks import prepare_data
                from biaslab.pretrain.phases import _splits

                tokenizer = AutoTokenizer.from_pretrained(args.root / params.model.output_dir)
                data = prepare_data(_splits(params), params.model.pretrain, tokenizer=tokenizer)
            control = GateControl(role="positive", recipe="balanced_finetune", steps=steps, learning_rate=rate)
            positive_control(params, control, args.root / params.model.output_dir, model_dir, progress=False,
                             data=data)
        scores = score_on_selection(params, str(model_dir), args.root)
        candidates.append({"steps": steps, "learning_rate": rate, "scores": scores})
        print(f"steps {steps}, rate {rate:g}: {json.dumps(scores)}", flush=True)
        if choose(base, candidates, bpc_tolerance)["rule_met"] and not args.all:
            break  # the grid is in the rule's order: the first candidate that meets it is the choice
    chosen = choose(base, candidates, bpc_tolerance)
    print(f"\n| candidate (selection items) | {GAP} | {F1} | {OCC} | {BPC} |\n|---|---|---|---|---|")
    for c in [{"steps": 0, "learning_rate": 0.0, "scores": base}, *candidates]:
        s = c["scores"]
        name = "base" if not c["steps"] else f"{c['steps']} steps, rate {c['learning_rate']:g}"
        print(f"| {name} | {s[GAP]:+.4f} | {s[F1]:.4f} | {s.get(OCC, float('nan')):+.4f} | {s[BPC]:.4f} |")
    print(f"\nchosen: {chosen['steps']} steps, rate {chosen['learning_rate']:g} (rule met: {chosen['rule_met']})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"base": base, "candidates": candidates, "chosen": chosen}, indent=2) + "\n",
                        encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
