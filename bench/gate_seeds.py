"""Do the promotion gate's verdicts depend on the bootstrap seed? Every variant, seeds 0-4, on a workspace.

Reads the evaluate stage's outputs of a run (``metrics/<variant>.json`` and ``data/predictions/<variant>/``)
through :class:`biaslab.registry.evidence.LocalEvidence` and evaluates the project's gate
(:func:`biaslab.registry.gate.evaluate_gate_for`, ``registry.bootstrap.samples`` resamples) once per seed:

    python bench/gate_seeds.py                      # the workspace in the current directory, seeds 0-4
    python bench/gate_seeds.py --root /path/to/run --seeds 0 1 2 3 4 5 6 7 --samples 8000

Prints, per variant, the verdict and the rules it fails for each seed, then a line per variant whose verdict
or failing rules differ between seeds (and the rows whose CI bound is closest to its threshold); exit 1 if
any does. The gate's seed stability is a claim about a run's evidence: run this on the committed run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("."), help="the workspace (project root) of a run")
    parser.add_argument("--params", default="params.yaml", help="params file, relative to --root")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--samples", type=int, default=None, help="resamples (default: registry.bootstrap.samples)")
    parser.add_argument("--base", default="base")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from biaslab.config import load_params
    from biaslab.outputs import metrics_file
    from biaslab.registry.evidence import LocalEvidence
    from biaslab.registry.gate import evaluate_gate_for

    args = parse_args(argv)
    params = load_params(args.root / args.params)
    if args.samples is not None:
        registry = params.registry.model_copy(update={"bootstrap": params.registry.bootstrap.model_copy(
            update={"samples": args.samples})})
        params = params.model_copy(update={"registry": registry})
    evidence = LocalEvidence(args.root)
    variants = [v for v in params.variants if v != args.base
                and (found := metrics_file.read_if_present(args.root, v)) is not None and not found.skipped]
    print(f"gate on {args.root.resolve()}: {len(variants)} variants vs {args.base}, "
          f"{params.registry.bootstrap.samples} resamples, seeds {args.seeds}")
    unstable = []
    for variant in variants:
        seen = {}
        for seed in args.seeds:
            start = time.perf_counter()
            verdict = evaluate_gate_for(params, evidence, variant, args.base, seed=seed)
            failed = tuple(f"{r.metric} ({r.rule})" for r in verdict.failed)
            seen[seed] = (verdict.passed, failed, verdict)
            print(f"  {variant:<14} seed {seed}: {'PASS' if verdict.passed else 'FAIL'}"
                  f"{'' if not failed else ' - fails ' + ', '.join(failed)} ({time.perf_counter() - start:.1f} s)")
        if len({(passed, failed) for passed, failed, _ in seen.values()}) > 1:
            unstable.append(variant)
            for seed, (_, _, verdict) in seen.items():
                for r in verdict.rows:
                    if r.ci is not None:
                        print(f"      seed {seed} {r.metric} {r.rule}: {r.estimate:.4g} [{r.ci[0]:.4g}, {r.ci[1]:.4g}] "
                              f"{'PASS' if r.passed else 'FAIL'}")
    if unstable:
        print(f"verdicts differ between seeds for: {', '.join(unstable)}")
        return 1
    print(f"verdicts identical across seeds {args.seeds} for every variant")
    return 0


if __name__ == "__main__":
    sys.exit(main())
