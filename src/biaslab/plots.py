"""Figures for the report. matplotlib is imported inside functions with the headless ``Agg`` backend,
so importing this module costs nothing and no display is needed (CI, DVC stages).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd


def bias_vs_accuracy_figure(frame: pd.DataFrame, *, accuracy: str, bias: str) -> Any:
    """Scatter of bias (y, lower is better) against accuracy (x) per variant, with CI error bars.

    ``frame`` has columns ``variant, accuracy, bias`` and optionally ``accuracy_ci_low/high``,
    ``bias_ci_low/high`` (the rows of ``reports/bias_vs_accuracy.csv``). The ideal corner
    (high accuracy, no bias) is bottom-right.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    for _, row in frame.iterrows():
        xerr = _err(row, "accuracy")
        yerr = _err(row, "bias")
        ax.errorbar(row["accuracy"], row["bias"], xerr=xerr, yerr=yerr, fmt="o", capsize=3)
        ax.annotate(str(row["variant"]), (row["accuracy"], row["bias"]), textcoords="offset points", xytext=(5, 5))
    ax.set_xlabel(f"{accuracy} (higher is better)")
    ax.set_ylabel(f"{bias} (lower is better)")
    ax.set_title("Bias vs accuracy per variant (bars: bootstrap CI)")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def _err(row: pd.Series, name: str) -> list[list[float]] | None:
    lo, hi = row.get(f"{name}_ci_low"), row.get(f"{name}_ci_high")
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return None
    return [[max(row[name] - lo, 0.0)], [max(hi - row[name], 0.0)]]


def save_figure(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` as PNG (temp file + rename, so no half-written output) and close it."""
    import matplotlib.pyplot as plt

    from biaslab.atomic import atomic_file

    path = Path(path)
    with atomic_file(path) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    return path
