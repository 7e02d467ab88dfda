"""Which families detect the planted bias *across draws* of the recipe, and how often a reading errs on A/A pairs.

One ``make run`` is one draw of the default recipe: another seed, CPU or GPU trains another model, and
whether a family's CIs come apart changes from draw to draw (docs/planted_bias.md 5.1, 5.6). So the
headline is not read off one draw. ``bench/planted_draws.py --aa`` trains, per seed, the planted model, its
control and a second control re-seeded after the shared phase (an A/A pair: two models of one recipe that
differ only in their draw). Its ``draws.jsonl``, committed as ``calibrate.draws``, is read here:

* per family, the **detection rate** of the per-draw readings (CIs apart; paired CI apart from 0) over the
  planted pairs, and their **false-positive rate** over the A/A pairs, where every "detection" is false;
* the **across-draw test**: the K planted − control effects against the K A/A effects, one-sided exact
  Mann-Whitney U (a permutation test of U, ties at mid-rank) (are planted effects larger than what re-drawing the model produces?); a family is
  detected across draws when p < ``calibrate.draws_alpha``. Rank-based, so one runaway draw (a GBEM-UA
  effect of 2.7 next to 0.08) neither makes nor breaks it; with 4 + 4 draws the smallest p is 1/70.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from biaslab.errors import ConfigError, MissingInputError

AA_SUFFIX = "/A-A"  # bench/planted_draws.py names an A/A pair's recipe "<recipe>/A-A"
AA_SEED_OFFSET = 1000
"""A re-seeded control (an A/A pair's second model) continues the shared phase with ``planted_bias.seed`` +
k × this (k = 1, 2, ...: bench/planted_draws.py --aa uses k = 1, bench/gate_tolerances.py --aa N k = 1..N)."""


@dataclass(frozen=True)
class AcrossDraws:
    """One family's reading over the draws of one recipe."""

    family: str
    metric: str
    effects: tuple[float, ...]  # planted - control, one per draw
    aa_effects: tuple[float, ...]  # re-seeded control - control, one per A/A pair
    detected: int  # draws whose CIs are apart in the expected direction
    paired_detected: int  # draws whose paired CI is apart from 0 that way
    aa_detected: int  # A/A pairs "detected" by the CIs (false positives)
    aa_paired_detected: int  # ... by the paired CI
    p_value: float | None  # one-sided exact Mann-Whitney U, effects > aa_effects
    alpha: float

    @property
    def detected_across(self) -> bool:
        return self.p_value is not None and self.p_value < self.alpha


def read_draws(path: str | Path) -> list[dict]:
    """The draws of ``bench/planted_draws.py`` (``draws.jsonl``); a bad line is an error naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise MissingInputError(f"{path}: calibrate.draws names no file (run bench/planted_draws.py --aa, commit draws.jsonl)")
    draws = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            draw = json.loads(line)
            draw["recipe"], draw["seed"], draw["families"]  # noqa: B018 - the keys every draw has
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}: line {number}: not a draw of bench/planted_draws.py ({exc})") from None
        draws.append(draw)
    return draws


def mann_whitney_greater(x: list[float], y: list[float]) -> float | None:
    """One-sided p-value that ``x`` tends to exceed ``y``: the Mann-Whitney U statistic (mid-ranks for ties)
    under every split of the pooled values (exact; a random 100,000 of them for large samples), via
    ``scipy.stats.permutation_test``. None below 2 + 2 values."""
    if len(x) < 2 or len(y) < 2:
        return None
    from scipy.stats import mannwhitneyu, permutation_test

    def u_statistic(a, b, axis):
        return mannwhitneyu(a, b, axis=axis, method="asymptotic").statistic

    exact = math.comb(len(x) + len(y), len(x)) <= 100_000
    result = permutation_test((x, y), u_statistic, permutation_type="independent", alternative="greater",
                              vectorized=True, n_resamples=math.inf if exact else 100_000, rng=0)
    return float(result.pvalue)


def across_draws(draws: list[dict], families: Mapping[str, Mapping[str, str]], recipe: str = "committed",
                 alpha: float = 0.05) -> list[AcrossDraws]:
    """Per family of ``families`` (its primary metric): the rates and the across-draw test of ``recipe``."""
    planted = [d for d in draws if d["recipe"] == recipe]
    aa = [d for d in draws if d["recipe"] == recipe + AA_SUFFIX]
    out = []
    for family, metrics in families.items():
        def rows(ds):
            return [d["families"][family] for d in ds if family in d["families"]
                    and d["families"][family].get("effect") is not None
                    and math.isfinite(d["families"][family]["effect"])]

        p_rows, a_rows = rows(planted), rows(aa)
        effects = [r["effect"] for r in p_rows]
        aa_effects = [r["effect"] for r in a_rows]
        out.append(AcrossDraws(
            family, next(iter(metrics)), tuple(effects), tuple(aa_effects),
            sum(r["status"] == "detected" for r in p_rows), sum(r.get("paired_status") == "detected" for r in p_rows),
            sum(r["status"] == "detected" for r in a_rows), sum(r.get("paired_status") == "detected" for r in a_rows),
            mann_whitney_greater(effects, aa_effects), alpha))
    return out


def _mean_sd(values: tuple[float, ...]) -> str:
    if not values:
        return "n/a"
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return f"{mean:+.3f} ± {sd:.3f}"


def headline(rows: list[AcrossDraws]) -> str:
    """The report's headline: families detected by the across-draw test."""
    n = sum(r.detected_across for r in rows)
    k = max((len(r.effects) for r in rows), default=0)
    k_aa = max((len(r.aa_effects) for r in rows), default=0)
    return (f"**{n} of {len(rows)} benchmark families detect the planted bias across draws** "
            f"({k} planted/control pairs against {k_aa} A/A pairs, one-sided exact Mann-Whitney U, "
            f"p < {rows[0].alpha if rows else 0.05}): "
            + (", ".join(r.family for r in rows if r.detected_across) or "none") + ".")


def render_markdown(rows: list[AcrossDraws], source: str) -> str:
    """The report's section on the draws (headline, per-family rates and test)."""
    lines = [headline(rows), "",
             f"Draws: `{source}` (`bench/planted_draws.py --aa`; docs/planted_bias.md). Per family (primary "
             "metric): how often each per-draw reading detects over the planted pairs (*detection rate*) and "
             "over the A/A pairs (control vs a control re-seeded after the shared phase: every detection there "
             "is a *false positive*); the effects' mean ± sd; the across-draw test of planted against A/A effects.",
             "",
             "| family | primary metric | CIs apart: detected / false positives | paired: detected / false positives "
             "| planted − control (mean ± sd) | A/A (mean ± sd) | Mann-Whitney p | across draws |",
             "|---|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        k, k_aa = len(r.effects), len(r.aa_effects)
        p = "n/a" if r.p_value is None else f"{r.p_value:.3f}"
        lines.append(f"| {r.family} | `{r.metric}` | {r.detected} of {k} / {r.aa_detected} of {k_aa} "
                     f"| {r.paired_detected} of {k} / {r.aa_paired_detected} of {k_aa} | {_mean_sd(r.effects)} "
                     f"| {_mean_sd(r.aa_effects)} | {p} | {'**detected**' if r.detected_across else 'not detected'} |")
    return "\n".join(lines) + "\n"


def mlflow_metrics(rows: list[AcrossDraws]) -> dict[str, float]:
    """``calibration/draws/...`` numbers for the calibrate run."""
    out = {"calibration/draws/families_detected": float(sum(r.detected_across for r in rows))}
    for r in rows:
        k, k_aa = len(r.effects), len(r.aa_effects)
        base = f"calibration/draws/{r.family}"
        if k:
            out[f"{base}/detection_rate"] = r.detected / k
            out[f"{base}/paired_detection_rate"] = r.paired_detected / k
        if k_aa:
            out[f"{base}/false_positive_rate"] = r.aa_detected / k_aa
            out[f"{base}/paired_false_positive_rate"] = r.aa_paired_detected / k_aa
        if r.p_value is not None:
            out[f"{base}/p_value"] = r.p_value
    return out
