"""How far the stored derived columns of honest evaluate runs are from their recomputation (registry/derived.py).

MLflow's ``log_table`` stores numbers with 10 decimals, so a column recomputed from the stored (rounded) scores
differs from the stored (rounded) column a little. This prints, per derived column, the largest
``|Δ| / max(1, |value|)`` over every evaluate run's ``predictions/*.json`` artifacts in a local store, and the
count of boolean or text mismatches - the measurement ``registry.derived.TOLERANCE`` was set above. It also runs
the promoter's check (``derived_row``) on each run; both read the check's own walk (``recompute``)::

    python bench/derived_tolerance.py                         # in a workspace after `make run`
    python bench/derived_tolerance.py --artifacts mlruns/artifacts --params params.yaml
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tables(run: Path) -> dict[str, object]:
    import pandas as pd

    out = {}
    for path in sorted((run / "artifacts" / "predictions").glob("*.json")):
        body = json.loads(path.read_text(encoding="utf-8"))
        out[path.stem] = pd.DataFrame(body["data"], columns=body["columns"])
    return out


class _Evidence:
    def __init__(self, tables):
        self.tables = tables

    def predictions(self, variant):
        return self.tables


def main() -> None:
    import numpy as np
    import pandas as pd
    import yaml

    from biaslab.config import Params
    from biaslab.registry.derived import TOLERANCE, derived_row, recompute

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artifacts", type=Path, default=ROOT / "mlruns" / "artifacts")
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    args = parser.parse_args()
    params = Params.model_validate(yaml.safe_load(args.params.read_text(encoding="utf-8")))
    runs = sorted(p.parents[1] for p in args.artifacts.glob("*/artifacts/predictions"))
    worst: dict[str, float] = {}
    mismatches: dict[str, int] = {}
    refused = 0
    for run in runs:
        tables = _tables(run)
        if not derived_row(params, _Evidence(tables), ["run"]).passed:
            refused += 1
        for table, stored, fresh in recompute(params, tables).pairs:  # the check's own walk
            for column in fresh.columns:
                a, z = fresh[column], stored[column]
                key = f"{table}.{column}"
                if a.dtype == bool or z.dtype == bool or not pd.api.types.is_numeric_dtype(a):
                    differ = (a.astype(object) != z.astype(object)) & ~(a.isna() & z.isna())
                    mismatches[key] = mismatches.get(key, 0) + int(differ.sum())
                    continue
                values = a.astype(float).to_numpy()
                kept = pd.to_numeric(z, errors="coerce").to_numpy(dtype=float)
                both = ~(np.isnan(values) & np.isnan(kept))
                if both.any():
                    rel = np.abs(values - kept)[both] / np.maximum(1.0, np.abs(kept[both]))
                    worst[key] = max(worst.get(key, 0.0), float(np.nan_to_num(rel, nan=np.inf).max()))
    print(f"{len(runs)} evaluate runs under {args.artifacts}; derived_row refused {refused}")
    print(f"boolean/text mismatches: {sum(mismatches.values())}"
          + "".join(f"\n  {k}: {v}" for k, v in sorted(mismatches.items()) if v))
    print(f"largest |Δ| / max(1, |value|) per numeric derived column (TOLERANCE {TOLERANCE:g}):")
    for key, value in sorted(worst.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {value:.2g}  {key}")


if __name__ == "__main__":
    main()
