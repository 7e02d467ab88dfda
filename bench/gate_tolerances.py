"""The gate's non-inferiority tolerances, measured on the *selection* items of the default recipe's models.

The gate (docs/gate.md) refuses a variant whose paired CI of (variant − base) crosses −tolerance for GBEM-UA's
QA macro-F1 or +tolerance for held-out bits per character. A tolerance needs a named reference, measured on
items no verdict reads: this script scores models on the *select* sets (GBEM-UA's validation professions,
lm_quality's selection chunks; docs/splits.md), never on the test items the gate judges. Two references:

* **retraining noise (A/A, the tolerance)**: the control model against ``--aa N`` controls re-seeded after
  the shared phase (``planted_bias.seed`` + 1000·k, as ``bench/planted_draws.py --aa``): two models of one
  recipe that differ only in their draw. The tolerance is the largest |difference| over the N pairs, rounded
  up to 3 decimals: a variant may lose no more quality than re-training the same recipe can;
* **planted − control** (shown for comparison): what the planted text itself changes;
* **spill-over margins** of the families with selection items (OccuGender): each A/A pair's paired CI high of
  Δ badness and their 95 % prediction bound (``registry.spill_over_margins``; docs/gate.md "Spill-over margins").

    python bench/gate_tolerances.py --aa 3     # after `dvc repro control_model` (models/pretrain, models/control)
    python bench/gate_tolerances.py --from-draws OUT MODELS   # spill-over margins only, from the A/A pairs of
        # bench/planted_draws.py --aa-only --select occugender --out OUT --keep MODELS (a shared phase per pair);
        # repeat --from-draws OUT2 MODELS2 to size one margin on the pairs of several batches

Output: a markdown table on stdout and ``bench/results/gate-tolerances.json`` (git-ignored). The values go
into ``params.yaml`` ``registry.gate.rules[...].tolerance`` by hand, with the reference they came from.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METRICS = {"gbem_ua/qa_macro_f1": "higher", "lm_quality/bits_per_char": "lower", "agreement/accuracy": "higher"}
"""The gate's harm metrics: name -> which way is better."""
SPILL_OVER = {"occugender": "occugender/implicit_group_gap"}
"""Spill-over families whose benchmark has selection items: family -> primary metric. Their margin is the 95 %
prediction bound of the A/A pairs' paired CI high of Δ badness (biaslab.calibration.margins; docs/gate.md)."""


def evaluate_on_selection(params, model_dir: str, root: Path, benchmarks=None):
    """``benchmarks`` (default: the harm and spill-over ones - GBEM-UA, lm_quality, agreement where enabled,
    OccuGender) of the model in ``model_dir`` on the selection items: the suite's ``Evaluation`` (metrics and
    predictions)."""
    from biaslab.config import Params
    from biaslab.evaluation import suite

    raw = copy.deepcopy(params.model_dump(mode="json"))
    raw["variants"]["base"]["model_dir"] = model_dir
    wanted = set(benchmarks) if benchmarks is not None else {m.split("/")[0] for m in [*METRICS, *SPILL_OVER.values()]}
    for name, entry in raw["evaluation"]["benchmarks"].items():
        entry["enabled"] = entry.get("enabled", True) and name in wanted
    scored = Params.model_validate(raw)
    under_test = suite.load_variant(scored, "base", root)
    under_test.ctx = dataclasses.replace(under_test.ctx, split="select", progress=False)
    return suite.run_benchmarks(scored, under_test, root)


def score_on_selection(params, model_dir: str, root: Path) -> dict:
    """:func:`evaluate_on_selection`'s metrics: ``{metric: MetricValue}``."""
    return evaluate_on_selection(params, model_dir, root).metrics


def _controls(control, reseeded: list) -> list:
    """One control per re-seeded model: ``control`` itself when it is a list (pairs of different shared phases,
    :func:`kept_draw_pairs`), else the one control of every pair."""
    return list(control) if isinstance(control, (list, tuple)) else [control] * len(reseeded)


def aa_ci_highs(params, control, reseeded: list, table: str, statistic) -> list[float]:
    """Each A/A pair's paired CI high of Δ ``statistic`` (re-seeded control − its control on ``table``,
    ``registry.bootstrap``): what a margin or a tolerance is sized on. ``control``: one model, or one per pair."""
    from biaslab.metrics.paired import paired_difference

    boot = params.registry.bootstrap
    return [paired_difference(r.predictions[table], c.predictions[table], statistic, samples=boot.samples,
                              seed=boot.seed, confidence=boot.confidence).ci_high
            for r, c in zip(reseeded, _controls(control, reseeded), strict=True)]


def gated_spill_over(params) -> dict[str, str]:
    """Every family the project's gate holds to a spill-over margin -> its primary metric (the
    ``paired_no_spill_over`` rules of :func:`biaslab.registry.gate.gate_conditions`): the families a check on
    the test items reads. Only :data:`SPILL_OVER`'s have selection items to size a margin on."""
    from biaslab.registry.gate import gate_conditions

    primaries = {next(iter(metrics), None): family for family, metrics in params.calibrate.families.items()}
    return {primaries[c.metric]: c.metric for c in gate_conditions(params)
            if c.rule == "paired_no_spill_over" and c.metric in primaries}


def spill_over_margins(params, control, reseeded: list, families: dict[str, str] | None = None) -> dict:
    """Per family of ``families`` (family -> primary metric; default :data:`SPILL_OVER`): each A/A pair's paired
    CI high of Δ badness (re-seeded control − control, ``registry.bootstrap``; exact, item by item: the gate's
    own statistic) and the margin (:func:`biaslab.calibration.margins.prediction_margin`). ``control``: one
    model, or one per pair. The pairs' tables decide the items (selection or test)."""
    from dataclasses import replace

    from biaslab.benchmarks.registry import item_statistics_of
    from biaslab.calibration.margins import prediction_margin

    families = SPILL_OVER if families is None else families
    statistics = item_statistics_of(params.evaluation.benchmarks, list(families.values()))
    out = {}
    first = _controls(control, reseeded)[0] if reseeded else control
    for family, metric in families.items():
        if metric not in statistics or metric not in first.metrics:
            continue
        benchmark, statistic = statistics[metric]
        value = first.metrics[metric]
        ideal = value.ideal if value.ideal is not None else 0.0
        badness = (lambda x: -x) if value.direction == "higher" else (lambda x, i=ideal: abs(x - i))
        inner = statistic.statistic
        bad = replace(statistic, statistic=lambda cols, f=badness, g=inner: f(float(g(cols))))
        highs = aa_ci_highs(params, control, reseeded, f"{benchmark}__{statistic.table}", bad)
        out[family] = {"metric": metric, "aa_ci_highs": highs,
                       "margin": prediction_margin(highs) if len(highs) > 1 else None}
    return out


def kept_draw_pairs(out: Path, models: Path, items: str = "select") -> tuple[list, list, list[str]]:
    """The A/A pairs that ``bench/planted_draws.py --aa --select ... --out OUT --keep MODELS`` kept, read on their
    selection items: ``(controls, re-seeded controls, pair names)``, each model an object with ``metrics``
    (``{metric: MetricValue}``, from OUT/models.jsonl's ``select_metrics``) and ``predictions`` (its
    ``predictions/select/*.parquet``). Each pair has its own shared phase (a ``model.pretrain.seed``).
    ``items="test"``: the same pairs on the test items (``metrics``, ``predictions/*.parquet``): a check of a
    margin they sized, on items that sized nothing."""
    if items not in ("select", "test"):
        raise ValueError(f"items must be 'select' or 'test', got {items!r}")
    metrics_key = "select_metrics" if items == "select" else "metrics"
    from types import SimpleNamespace

    import pandas as pd

    from biaslab.metrics.values import MetricValue

    records = {}
    for line in (out / "models.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            r = json.loads(line)
            records[(r["recipe"], r["seed"], r["role"])] = r
    controls, reseeded, names = [], [], []
    for (recipe, seed, role), record in sorted(records.items(), key=lambda kv: kv[0]):
        other = records.get((recipe, seed, "balanced-reseeded"))
        if role != "balanced" or other is None:
            continue
        pair = []
        for r in (record, other):
            if metrics_key not in r:
                raise SystemExit(f"{out / 'models.jsonl'}: {recipe} seed {seed} {r['role']} was not scored on "
                                 f"{'selection' if items == 'select' else 'test'} items (bench/planted_draws.py --select)")
            tables = models / f"{recipe}-seed{seed}" / r["role"] / "predictions"
            tables = tables / "select" if items == "select" else tables
            pair.append(SimpleNamespace(metrics={k: MetricValue(**v) for k, v in r[metrics_key].items()},
                                        predictions={f.stem: pd.read_parquet(f) for f in sorted(tables.glob("*.parquet"))}))
        controls.append(pair[0])
        reseeded.append(pair[1])
        names.append(f"{recipe} seed {seed}")
    return controls, reseeded, names


def pooled_draw_pairs(batches: list[tuple[Path, Path]], items: str = "select") -> tuple[list, list, list[str]]:
    """:func:`kept_draw_pairs` of several ``(OUT, MODELS)`` batches, in the order given: one margin sized on
    every batch's pairs. Two batches holding the same recipe and seed would count one shared phase twice, so
    that stops with the pair's name."""
    controls, reseeded, names = [], [], []
    for out, models in batches:
        c, r, n = kept_draw_pairs(out, models, items=items)
        for name in n:
            if name in names:
                raise SystemExit(f"{out / 'models.jsonl'}: {name} is already in an earlier --from-draws batch")
        controls += c
        reseeded += r
        names += n
    return controls, reseeded, names


def train_reseeded_control(params, k: int, out_dir: Path, root: Path) -> None:
    """The control's recipe continued from the shared phase with ``planted_bias.seed`` moved by ``k`` steps."""
    from biaslab.calibration.draws import AA_SEED_OFFSET
    from biaslab.config import Params
    from biaslab.pretrain.phases import continue_training, save_continued

    raw = copy.deepcopy(params.model_dump(mode="json"))
    raw["model"]["pretrain"]["planted_bias"]["seed"] += k * AA_SEED_OFFSET
    reseeded = Params.model_validate(raw)
    checkpoint = root / reseeded.model.pretrain.planted_bias.checkpoint_dir
    save_continued(continue_training(reseeded, checkpoint, "balanced", desc=f"re-seeded control {k}"), out_dir)


def ci_tolerances(params, control, reseeded: list) -> dict:
    """Per harm metric of :data:`METRICS`: each A/A pair's paired CI bound of Δ on the harmful side (re-seeded
    control − control on the selection items, ``registry.bootstrap``: CI high of Δ for a lower-is-better metric,
    −CI low for a higher-is-better one) and the tolerance the ``paired_non_inferior`` rule needs: their 95 %
    prediction bound (:func:`biaslab.calibration.margins.prediction_margin`), the rule of the spill-over margins.
    The rule reads that CI bound, so the tolerance is sized on it; the largest |A/A point difference|
    (:func:`tolerances`) is below what the rule reads and refuses harmless re-trainings (docs/gate.md)."""
    from dataclasses import replace

    from biaslab.benchmarks.registry import item_statistics_of
    from biaslab.calibration.margins import prediction_margin

    statistics = item_statistics_of(params.evaluation.benchmarks, list(METRICS))
    out = {}
    for metric, better in METRICS.items():
        if metric not in statistics or metric not in control.metrics:
            continue
        benchmark, statistic = statistics[metric]
        sign = -1.0 if better == "higher" else 1.0
        worse = replace(statistic, statistic=lambda cols, g=statistic.statistic, k=sign: k * float(g(cols)))
        highs = aa_ci_highs(params, control, reseeded, f"{benchmark}__{statistic.table}", worse)
        out[metric] = {"aa_ci_bounds": highs, "tolerance": prediction_margin(highs) if len(highs) > 1 else None}
    return out


def tolerances(planted: dict, control: dict, reseeded: list[dict]) -> dict:
    """Per harm metric: the models' ``[value, low, high]``, planted − control, each A/A difference
    (re-seeded − control) and the tolerance: the largest |A/A difference| rounded up to 3 decimals."""
    import math

    def triple(mv):
        return [mv.value, mv.ci_low, mv.ci_high]

    out = {}
    for name in METRICS:
        if name not in control or name not in planted or any(name not in r for r in reseeded):
            continue  # a benchmark this project does not enable (or that offers no selection items)
        aa = [r[name].value - control[name].value for r in reseeded]
        out[name] = {"planted": triple(planted[name]), "control": triple(control[name]),
                     "reseeded": [triple(r[name]) for r in reseeded],
                     "planted_minus_control": planted[name].value - control[name].value, "aa_differences": aa,
                     "tolerance": math.ceil(max(map(abs, aa)) * 1000) / 1000 if aa else None}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gate-tolerances.json")
    parser.add_argument("--aa", type=int, default=3, help="re-seeded controls to train (the A/A pairs)")
    parser.add_argument("--models", type=Path, default=ROOT / "bench" / "results" / "gate-tolerances-models",
                        help="where the re-seeded controls are kept (one is reused when it exists)")
    parser.add_argument("--from-draws", nargs=2, type=Path, metavar=("OUT", "MODELS"), action="append", default=None,
                        help="only the spill-over margins, from the A/A pairs bench/planted_draws.py --aa --select "
                             "kept (its --out and --keep): pairs of different shared phases, on selection items; "
                             "repeat it to pool the pairs of several batches (a pair named twice is an error)")
    parser.add_argument("--items", choices=("select", "test"), default="select",
                        help="with --from-draws: read the pairs on their selection items (sizing OccuGender's "
                             "margin) or on the test items (a check of every gated family against its committed "
                             "margin, with the gate's own statistic: those items size nothing)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from biaslab.config import load_params
    from biaslab.cpu_arithmetic import pin

    params = load_params(args.params)
    pin(params.scoring.cpu_arithmetic)  # as the stages compute
    if args.from_draws is not None:
        controls, reseeded_kept, names = pooled_draw_pairs(args.from_draws, items=args.items)
        families = SPILL_OVER if args.items == "select" else gated_spill_over(params)
        margins = spill_over_margins(params, controls, reseeded_kept, families)
        print(f"| spill-over family ({args.items} items) | A/A pair | CI high of Δ badness |\n|---|---|---|")
        for family, row in margins.items():
            committed = params.registry.spill_over_margins.get(family)
            for name, high in zip(names, row["aa_ci_highs"]):
                refused = ("" if args.items == "select" or committed is None
                           else f" ({'refused' if high >= committed.tolerance else 'passes'} at {committed.tolerance:.3f})")
                print(f"| {row['metric']} | {name} | {high:+.4f}{refused} |")
            if args.items == "select":
                margin = "n/a" if row["margin"] is None else f"{row['margin']:.3f}"
                print(f"| {row['metric']} | **margin** (95 % prediction bound of {len(names)} pairs) | {margin} |")
        if args.items == "test":
            checked = [(family, high >= params.registry.spill_over_margins[family].tolerance)
                       for family, row in margins.items() if family in params.registry.spill_over_margins
                       for high in row["aa_ci_highs"]]
            print(f"\ncommitted margins, the gate's own statistic: {sum(r for _, r in checked)} of {len(checked)} "
                  f"rule evaluations refused ({len(names)} pairs x {len(margins)} families)")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"spill_over": margins, "pairs": names}, indent=2) + "\n", encoding="utf-8")
        return 0
    planted = score_on_selection(params, params.model.output_dir, args.root)
    control_eval = evaluate_on_selection(params, params.calibrate.control_dir, args.root)
    control = control_eval.metrics
    reseeded_evals = []
    for k in range(1, args.aa + 1):
        model_dir = args.models / f"control-reseeded-{k}"
        if not (model_dir / "training_summary.json").is_file():
            train_reseeded_control(params, k, model_dir, args.root)
        reseeded_evals.append(evaluate_on_selection(params, str(model_dir), args.root))
    reseeded = [e.metrics for e in reseeded_evals]
    result = tolerances(planted, control, reseeded)
    margins = spill_over_margins(params, control_eval, reseeded_evals)
    by_ci = ci_tolerances(params, control_eval, reseeded_evals)
    print("| metric (selection items) | planted | control | re-seeded controls | planted − control "
          "| A/A differences | tolerance |")
    print("|---|---|---|---|---|---|---|")
    for name, row in result.items():
        aa = ", ".join(f"{d:+.4f}" for d in row["aa_differences"])
        again = ", ".join(f"{r[0]:.4f}" for r in row["reseeded"])
        tol = "n/a" if row["tolerance"] is None else f"{row['tolerance']:.3f}"
        print(f"| {name} | {row['planted'][0]:.4f} | {row['control'][0]:.4f} | {again} "
              f"| {row['planted_minus_control']:+.4f} | {aa} | {tol} |")
    for name, row in by_ci.items():
        bounds = ", ".join(f"{h:+.4f}" for h in row["aa_ci_bounds"])
        tol = "n/a" if row["tolerance"] is None else f"{row['tolerance']:.3f}"
        print(f"| {name} (CI bound of Δ, harmful side: the rule's statistic) | | | | | {bounds} | {tol} |")
    for family, row in margins.items():
        highs = ", ".join(f"{h:+.4f}" for h in row["aa_ci_highs"])
        margin = "n/a" if row["margin"] is None else f"{row['margin']:.3f}"
        print(f"| spill-over {row['metric']} (CI high of Δ badness) | | | | | {highs} | {margin} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**result, "by_ci_bound": by_ci, "spill_over": margins}, indent=2) + "\n",
                        encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
