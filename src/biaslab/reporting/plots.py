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


def calibration_figure(rows: list[dict[str, Any]]) -> Any:
    """One row of panels per benchmark family (its primary metric), from ``CalibrationReport.table()`` rows.

    Left: the planted model's and the control's value with their 95 % CIs (the CIs-apart rule reads these);
    right: planted − control with its paired 95 % CI and a line at 0 (the paired reading). Each title names
    the metric and both verdicts, so the figure says what the table does, at a glance.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(rows), 2, figsize=(9, 1.6 * len(rows) + 0.6), squeeze=False)
    for (left, right), row in zip(axes, rows):
        for y, side, colour in ((1, "planted", "tab:red"), (0, "control", "tab:blue")):
            value, low, high = row.get(side), row.get(f"{side}_ci_low"), row.get(f"{side}_ci_high")
            if value is not None and pd.notna(value):
                left.errorbar(value, y, xerr=_interval(value, low, high), fmt="o", color=colour, capsize=3)
        left.set_yticks([0, 1], ["control", "planted"])
        left.set_ylim(-0.6, 1.6)
        left.set_title(f"{row['metric']}: {row['verdict']}", fontsize=8, loc="left")
        paired, low, high = row.get("paired_effect"), row.get("paired_ci_low"), row.get("paired_ci_high")
        right.axvline(0.0, color="grey", linewidth=0.8)
        if paired is not None and pd.notna(paired):
            right.errorbar(paired, 0, xerr=_interval(paired, low, high), fmt="s", color="black", capsize=3)
        right.set_yticks([])
        right.set_title(f"planted − control, paired: {row.get('paired_verdict', 'n/a')}", fontsize=8, loc="left")
        for ax in (left, right):
            ax.grid(True, axis="x", alpha=0.3)
            ax.tick_params(labelsize=7)
    fig.suptitle("Calibration: the planted bias per family (bars: 95 % CIs)", fontsize=9)
    fig.tight_layout()
    return fig


def spike_in_figure(rows: list[dict[str, Any]]) -> Any:
    """One panel per family: its primary metric against the spike δ (nats), with 95 % CIs (``spike_in.csv`` rows).

    A dashed line marks the resolution δ* where the grid has one: the smallest δ whose CI is apart from δ = 0's.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = pd.DataFrame(rows).dropna(subset=["delta"])
    families = list(dict.fromkeys(frame["family"]))
    fig, axes = plt.subplots(1, max(len(families), 1), figsize=(2.6 * max(len(families), 1), 2.6), squeeze=False)
    for ax, family in zip(axes[0], families):
        part = frame[frame["family"] == family]
        err = [(part["value"] - part["ci_low"]).fillna(0).clip(lower=0), (part["ci_high"] - part["value"]).fillna(0).clip(lower=0)]
        ax.errorbar(part["delta"], part["value"], yerr=err, fmt="o-", capsize=3, color="tab:red")
        resolution = part["resolution"].iloc[0]
        if pd.notna(resolution):
            ax.axvline(resolution, color="grey", linestyle="--", linewidth=0.8)
        ax.set_title(f"{family}\n{part['metric'].iloc[0].split('/', 1)[1]}", fontsize=7, loc="left")
        ax.set_xlabel("spike δ (nats)", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
    fig.suptitle("Spike-in self-test: primary metric vs δ (bars: 95 % CIs; dashed: resolution δ*)", fontsize=8)
    fig.tight_layout()
    return fig


def _interval(value: float, low: Any, high: Any) -> list[list[float]] | None:
    if low is None or high is None or pd.isna(low) or pd.isna(high):
        return None
    return [[max(value - low, 0.0)], [max(high - value, 0.0)]]


def _err(row: pd.Series, name: str) -> list[list[float]] | None:
    return _interval(row[name], row.get(f"{name}_ci_low"), row.get(f"{name}_ci_high"))


def save_figure(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` as PNG (temp file + rename, so no half-written output) and close it."""
    import matplotlib.pyplot as plt

    from biaslab.atomic import atomic_file

    path = Path(path)
    with atomic_file(path) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    return path
