"""The gate's error rates: false refusals on A/A pairs, false approvals on known harm (docs/gate.md "Error rates").

    python bench/gate_error_rates.py                       # A/A part only: calibrate.margins_draws (the sizing pairs)
    python bench/gate_error_rates.py --root <workspace>    # + spike-ins on its base's stored predictions and
                                                           #   the gate's verdict on its negative controls
    python bench/gate_error_rates.py --root <workspace> --aa-models bench/results/gate-tolerances-models
                                                           # + the whole gate's harm rules on re-seeded controls
    python bench/gate_error_rates.py --draws <planted_draws.py --aa-only --select occugender output>
                                                           # + the margin those pairs size on the selection items

**False refusal (A/A).** Two models of one recipe that differ only in their draw (the control and a control
re-seeded after the shared phase; ``bench/planted_draws.py --aa``) are harmless to each other: a harm rule
that refuses one as a variant of the other is a false refusal. The committed draws file stores, for each A/A
pair, every family's primary metric of both models with CIs and their paired difference (CI); from it this
script evaluates the spill-over rule (``paired_no_spill_over``, non-inferiority of Δ badness against the
family's margin ``registry.spill_over_margins``), re-seeded control as the variant, the control as the base:

exact where both models lie on the same side of the metric's ideal, else an upper bound
(:mod:`biaslab.calibration.margins`; a refusal counted on a bound may not be one, never the other way round).

Two readings: against the committed margins (``params.yaml``; in-sample where a margin was sized on these
pairs, out of sample where it was sized on selection items - OccuGender's), and
**leave one out**: each pair against the margin the sizing rule (the ``--level`` prediction bound,
:func:`biaslab.calibration.margins.prediction_margin`) gives on the *other* pairs - a pair never judges the
margin it sized. The draws hold no QA answers,
macro-F1 or bits/char of both models: the other harm rules' A/A refusals need the models' predictions.

**False refusal of every harm rule (``--aa-models``).** The re-seeded controls that ``bench/gate_tolerances.py``
trained and kept (``control-reseeded-<k>/``) are evaluated on the **test** items in a scratch workspace
(``--scratch``; the workspace's ``data/prepared`` linked, its calibrate stage's ``control`` outputs copied) and
judged by the project's gate with the control as the base: every harm rule (non-inferiority, the answer floor,
spill-over; the bias rule is not a harm rule and a re-seeded control is not expected to pass it) that refuses
is a false refusal. These pairs sized the macro-F1, bits/char and agreement tolerances and OccuGender's margin
on the *selection* items; here they are read on the test items, which sized nothing.

**False approval (known harm).** (1) Spike-ins: each spill-over family's stored predictions of the base with
δ nats added to every stereotype-consistent option (the benchmark's ``spike``, docs/spike_in.md), judged by
the project's spill-over rule against the unspiked base; a spike whose point Δ badness exceeds the margin is
harm beyond the margin by construction, and an approval of one is a false approval. (2) Every built
``method: control`` variant of the workspace, judged by the project's gate: a negative control approved, or
refused by no harm rule, is a false approval of harm; a positive control refused is a false refusal.

Output: markdown tables on stdout and ``bench/results/gate-error-rates.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

IDEALS = {  # primary metric -> ideal as each benchmark declares it (target metrics); a workspace's metrics file wins
    "occugender/implicit_group_gap": 0.0,
    "rubia/pro_share/gender": 0.5,
    "crows_pairs/pct_stereotype_gender": 0.5,
    "cloze_gender/genderlex/lm_hb_logodds_gap": 0.0,
}
def control_verdicts(params, root: Path) -> list[dict]:
    """The project's gate on every built control of the workspace, checked as calibrate checks it
    (:func:`pipelines.calibrate.gate_control_checks`): a negative control refused by no harm rule is a false
    approval of harm (``harm_caught`` false) even though the run goes on."""
    from biaslab.registry.evidence import LocalEvidence
    from biaslab.registry.gate import evaluate_gate_for
    from pipelines.calibrate import gate_control_checks

    out = []
    for check in gate_control_checks(params, root):
        verdict = evaluate_gate_for(params, LocalEvidence(root), check.variant)
        out.append({"variant": check.variant, "role": check.role, "approved": check.approved,
                    "wrong": not check.ok or check.harm_caught is False, "harm_caught": check.harm_caught,
                    "decided_by": list(check.deciding),
                    "rows": [{"rule": r.rule, "metric": r.metric, "passed": r.passed, "reason": r.reason}
                             for r in verdict.rows]})
    return out


def aa_harm_refusals(params, root: Path, models: list[Path], scratch: Path) -> dict:
    """Each model of ``models`` evaluated on the test items as variant ``aa_<k>`` in ``scratch`` and judged by the
    project's harm rules against the workspace's ``control`` (module docstring): ``{"rows", "refused",
    "evaluations", "refused_pairs", "pairs"}``."""
    import shutil

    from biaslab.calibration.controls import HARM_RULES
    from biaslab.config import VariantConfig
    from biaslab.outputs import paths
    from biaslab.pretrain.control_variant import CONTROL
    from biaslab.registry.evidence import LocalEvidence
    from biaslab.registry.gate import evaluate_gate_for
    from pipelines.evaluate import evaluate_variant

    for needed in (paths.metrics_file(CONTROL), paths.predictions_dir(CONTROL)):
        if not (root / needed).exists():
            raise SystemExit(f"{root / needed}: missing - run the calibrate stage there first (it evaluates "
                             "the control)")
    (scratch / "data").mkdir(parents=True, exist_ok=True)
    prepared = scratch / params.data.prepared_dir
    if not prepared.exists():
        prepared.symlink_to((root / params.data.prepared_dir).resolve(), target_is_directory=True)
    (scratch / "metrics").mkdir(exist_ok=True)
    shutil.copy(root / paths.metrics_file(CONTROL), scratch / paths.metrics_file(CONTROL))
    shutil.copytree(root / paths.predictions_dir(CONTROL), scratch / paths.predictions_dir(CONTROL), dirs_exist_ok=True)
    names = {f"aa_{k}": model for k, model in enumerate(models, start=1)}
    extra = {name: VariantConfig(method="none", model_dir=str(model.resolve()),
                                 description="re-seeded control (A/A pair of the control): bench/gate_error_rates.py")
             for name, model in names.items()}
    scored = params.model_copy(update={"variants": {**params.variants, **extra}})
    rows = []
    for name, model in names.items():
        if not (scratch / paths.metrics_file(name)).is_file():
            evaluate_variant(scored, name, scratch)
        verdict = evaluate_gate_for(scored, LocalEvidence(scratch), name, base=CONTROL)
        rows += [{"pair": f"{model.name} vs control", "rule": r.rule, "metric": r.metric, "refused": not r.passed,
                  "reason": r.reason} for r in verdict.rows if r.rule in HARM_RULES]
    refused_pairs = {r["pair"] for r in rows if r["refused"]}
    return {"rows": rows, "refused": sum(r["refused"] for r in rows), "evaluations": len(rows),
            "refused_pairs": len(refused_pairs), "pairs": len(names)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument("--draws", type=Path, default=None,
                        help="A/A pairs to judge (default: calibrate.margins_draws, the draws the margins were sized on)")
    parser.add_argument("--root", type=Path, default=None, help="a workspace with evaluate outputs (base, controls)")
    parser.add_argument("--deltas", type=float, nargs="+", default=[0.0, 0.1, 0.25, 0.5, 1.0])
    parser.add_argument("--level", type=float, default=0.95, help="the margin rule's prediction level")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gate-error-rates.json")
    parser.add_argument("--aa-models", type=Path, default=None,
                        help="bench/gate_tolerances.py's kept re-seeded controls (needs --root)")
    parser.add_argument("--scratch", type=Path, default=ROOT / "bench" / "results" / "gate-error-rates-aa",
                        help="where --aa-models are evaluated (a scratch workspace)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from biaslab.config import load_params
    from biaslab.registry.error_rates import aa_false_refusals, spike_in_approvals, spill_over_families

    params = load_params(args.params)
    sizing = ROOT / params.calibrate.margins_draws if params.calibrate.margins_draws else None  # sized the margins
    if args.draws is None:
        if sizing is None:
            parser.error("--draws: params.yaml names no calibrate.margins_draws to default to")
        args.draws = sizing
    margins = {f: m.tolerance for f, m in params.registry.spill_over_margins.items()}
    ideals = dict(IDEALS)
    if args.root is not None and (args.root / "metrics" / "base.json").is_file():
        from biaslab.outputs import metrics_file

        base = metrics_file.read(args.root / "metrics" / "base.json", "base").metrics
        ideals |= {m: v.ideal for m, v in base.items() if v.direction == "target" and v.ideal is not None}
    families = spill_over_families(params, ideals)
    draws = [json.loads(line) for line in args.draws.read_text(encoding="utf-8").splitlines() if line.strip()]
    result = {"aa": aa_false_refusals(draws, margins, families, args.level)}
    aa = result["aa"]
    print(f"## False refusals: spill-over on the {aa['pairs']} A/A pairs of {args.draws.name}\n")
    print("| A/A pair | family | CI high of Δ badness | committed margin | refused | leave-one-out margin "
          "| refused | old rule (largest \\|A/A Δ\\|), leave one out | refused |")
    print("|---|---|---|---:|---|---:|---|---:|---|")
    for r in aa["rows"]:
        loo = "n/a" if r["loo_margin"] is None else f"{r['loo_margin']:.3f}"
        print(f"| {r['pair']} | {r['family']} | {r['badness_ci_high']:+.4f} ({r['how']}) | {r['margin']:.3f} "
              f"| {'yes' if r['refused'] else 'no'} | {loo} | {'yes' if r['loo_refused'] else 'no'} "
              f"| {r['loo_largest_margin']:.3f} | {'yes' if r['loo_largest_refused'] else 'no'} |")
    sample = ("in-sample where sized on these pairs" if sizing is not None and args.draws.resolve() == sizing.resolve()
              else "out of sample: these pairs sized no margin")
    print(f"\ncommitted margins ({sample}): {aa['refused']} of {aa['evaluations']} rule "
          f"evaluations refused ({aa['refused_pairs']} of {aa['pairs']} pairs); leave one out (each pair against "
          f"the margin the other pairs size, level {aa['level']:g}): {aa['loo_refused']} of {aa['loo_evaluations']} "
          f"({aa['loo_refused_pairs']} of {aa['pairs']} pairs); the old rule (largest |A/A point difference|), leave "
          f"one out: {aa['loo_largest_refused']} of {aa['loo_largest_evaluations']} ({aa['loo_largest_refused_pairs']} of "
          f"{aa['pairs']} pairs)")
    for family, sized in aa["sized_on_select"].items():
        highs = ", ".join(f"{h:+.4f}" + ("" if exact else " (bound)") for _, h, exact in sized["highs"])
        print(f"\n{family}: these pairs on its selection items (`--select`), CI highs of Δ badness {highs} -> "
              f"margin {sized['margin']:.3f} (level {aa['level']:g}); committed {margins.get(family, 0.0):.3f}")
    if args.root is not None:
        sys.path.insert(0, str(ROOT))  # pipelines.calibrate, pipelines.evaluate
        from biaslab.cpu_arithmetic import pin

        pin(params.scoring.cpu_arithmetic)
        result["spike_in"] = spike = spike_in_approvals(params, args.root, args.deltas)
        print("\n## False approvals: spike-ins of bias into the base's stored predictions (spill-over rule)\n")
        print("| metric | δ nats | Δ badness [CI] | margin | harm beyond margin | approved |")
        print("|---|---:|---|---:|---|---|")
        for r in spike["rows"]:
            ci = "n/a" if r["ci"] is None else f"[{r['ci'][0]:+.4f}, {r['ci'][1]:+.4f}]"
            print(f"| {r['metric']} | {r['delta']:g} | {r['estimate']:+.4f} {ci} | {r['margin']:.3f} "
                  f"| {'yes' if r['harm_beyond_margin'] else 'no'} | {'yes' if r['approved'] else 'no'} |")
        print(f"\nfalse approvals: {spike['false_approvals']} of {spike['harmful']} spikes beyond the margin")
        result["controls"] = found = control_verdicts(params, args.root)
        for n in found:
            print(f"\n{n['role']} control {n['variant']}: {'APPROVED' if n['approved'] else 'refused'}; "
                  f"wrong verdict: {'YES' if n['wrong'] else 'no'}"
                  + ("" if n["harm_caught"] is None
                     else f"; a harm rule caught it: {'yes' if n['harm_caught'] else 'NO'}")
                  + "; decided by: " + ("; ".join(n["decided_by"]) or "-"))
            for r in n["rows"]:
                print(f"  - {r['rule']} on {r['metric']}: {'pass' if r['passed'] else 'REFUSE'} - {r['reason']}")
    if args.aa_models is not None and args.root is not None:
        models = sorted(p for p in args.aa_models.glob("control-reseeded-*") if (p / "config.json").is_file())
        result["aa_harm"] = harm = aa_harm_refusals(params, args.root.resolve(), models, args.scratch)
        print("\n## False refusals: every harm rule on re-seeded controls (test items, the control as the base)\n")
        print("| A/A pair | rule | metric | refused | reason |\n|---|---|---|---|---|")
        for r in harm["rows"]:
            print(f"| {r['pair']} | {r['rule']} | {r['metric']} | {'**yes**' if r['refused'] else 'no'} "
                  f"| {r['reason'].replace('|', '/')} |")
        print(f"\nharm rules: {harm['refused']} of {harm['evaluations']} rule evaluations refused "
              f"({harm['refused_pairs']} of {harm['pairs']} pairs)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
