"""One compose worker's share of the pipeline: ``python -m pipelines.stage.shard 2/3``.

Scale-out without duplicated work (docker-compose.yml, docs/operations.md): every worker has its own
workspace but all share one DVC cache (``cache.dir``), whose *run-cache* holds every finished stage's
outputs keyed by its command, dependencies and params. So

1. ``upstream`` runs once what every variant needs (:data:`UPSTREAM`: raw data, prepared tables, the base
   and control models, the LoRA study);
2. worker ``i/N`` runs ``dvc repro`` of the ``evaluate@<variant>`` of every N-th variant the active profile
   runs (in params.yaml order, starting at the i-th: :func:`shard_targets`; a disabled variant's stages take
   seconds, and ``collect`` runs them, docs/profiles.md); the upstream stages come back from the run-cache
   instead of running again, and a variant's own chain (``edit_embeddings@…``/``finetune@…`` then
   ``evaluate@…``) runs in exactly one worker. The tune stage keeps a persistent output, which DVC never
   run-caches: it runs again in a worker, but finds the shared Optuna study complete and runs no trial;
3. ``collect`` runs the whole ``dvc repro``: every stage above comes back from the run-cache, and the
   stages that need all variants (calibrate, register, report) run once.

``--dry-run`` prints the targets instead of running them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from biaslab.config import load_params
from biaslab.errors import ConfigError

UPSTREAM = ("base_model", "control_model", "tune")
"""The stages every variant's chain starts from: the ``upstream`` service runs them once, before the workers."""


def shard_targets(variants: list[str], index: int, count: int) -> list[str]:
    """``evaluate@<variant>`` of every ``count``-th variant starting at the ``index``-th (1-based)."""
    if not 1 <= index <= count:
        raise ConfigError(f"shard {index}/{count}: the index must be between 1 and the number of shards")
    return [f"evaluate@{name}" for i, name in enumerate(variants) if i % count == index - 1]


def _shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected <index>/<count>, e.g. 2/3") from None
    return index, count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shard", type=_shard, help="<index>/<count>, e.g. 2/3")
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--dry-run", action="store_true", help="print the targets, run nothing")
    args = parser.parse_args(argv)
    try:
        targets = shard_targets(load_params(args.params).enabled_variants(), *args.shard)
    except ConfigError as exc:
        print(f"shard failed: {exc}", file=sys.stderr)
        return 1
    if args.dry_run or not targets:
        print(" ".join(targets))
        return 0
    return subprocess.run(["dvc", "repro", *targets], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
