"""Which families detect the planted bias *across draws* of the recipe, and how often a reading errs on A/A pairs.

One ``make run`` is one draw of the default recipe: another seed, CPU or GPU trains another model, and
whether a family's CIs come apart changes from draw to draw (docs/planted_bias.md 5.1, 5.6). So the
headline is not read off one draw. ``bench/planted_draws.py --aa`` trains, per seed, the planted model, its
control and a second control re-seeded after the shared phase (an A/A pair: two models of one recipe that
differ only in their draw). Its ``draws.jsonl``, committed as ``calibrate.draws``, is read here:

* per family, the **detection rate** of the per-draw readings (CIs apart; paired CI apart from 0) over the
  planted pairs, and their **false-positive rate** over the A/A pairs, where every "detection" is false;
* the **across-draw test**: the K planted − control effects against the K A/A effects, one-sided exact
  Mann-Whitney U (a permutation test of U, ties at mid-rank) in the family's ``expected`` direction (are
  planted effects larger - for a ``decrease`` family: smaller - than what re-drawing the model produces?);
  a family is detected across draws when p < ``calibrate.draws_alpha``. Rank-based, so one runaway draw (a
  GBEM-UA effect of 2.7 next to 0.08) neither makes nor breaks it; with 4 + 4 draws the smallest p is 1/70;
* its **power**: the minimal detectable effect (:func:`mde_sd`: the shift, in SDs of the draws' effects, that
  the test detects with 80 % probability at this K and K_AA, normal draws), also in metric units (× the
  pooled SD of the effects). "Not detected" is "not detected at this power (MDE …)": at 4 + 4 draws a family
  whose planted effect is 1 SD is detected about one time in four.

**Which recipe.** Every draw records the commit and :func:`recipe_hash` of the params it was drawn with
(``bench/planted_draws.py``). :func:`draws_report` (what the calibrate stage reads) compares it with the
running params' hash: draws of another recipe, or of no recorded recipe (files written before draws carried
a hash), are reported as **stale** and not counted, so a recipe change cannot leave an old "2 of 5" standing.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

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
    p_value: float | None  # one-sided exact Mann-Whitney U in the expected direction (increase: effects > aa_effects)
    alpha: float
    expected: str = "increase"
    mde_sd: float | None = None  # minimal detectable effect (80 % power) in SDs of the effects
    sd: float | None = None  # pooled SD of the planted and the A/A effects

    @property
    def detected_across(self) -> bool:
        return self.p_value is not None and self.p_value < self.alpha

    @property
    def mde(self) -> float | None:
        """The minimal detectable effect in the metric's units (signed by the expected direction)."""
        if self.mde_sd is None or self.sd is None or not math.isfinite(self.mde_sd):
            return None
        return self.mde_sd * self.sd * (1 if self.expected == "increase" else -1)

    def verdict(self) -> str:
        if self.detected_across:
            return "**detected**"
        if self.p_value is None:
            return "n/a (fewer than 2 + 2 draws)"
        mde = self.mde
        what = (f"{mde:+.3f}, {self.mde_sd:.1f} SD" if mde is not None
                else "beyond 4 SD" if self.mde_sd is not None else "n/a")
        return f"not detected at this power (MDE {what})"


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


def mann_whitney(x: list[float], y: list[float], expected: str = "increase") -> float | None:
    """One-sided p-value that ``x`` tends to exceed ``y`` (``expected="increase"``) or to fall below it
    (``"decrease"``): :func:`mann_whitney_greater` on the values, negated for a decrease."""
    if expected not in ("increase", "decrease"):
        raise ValueError(f"expected must be 'increase' or 'decrease', got {expected!r}")
    if expected == "decrease":
        return mann_whitney_greater([-v for v in x], [-v for v in y])
    return mann_whitney_greater(x, y)


def mde_sd(k: int, k_aa: int, alpha: float = 0.05, power: float = 0.8, simulations: int = 20_000,
           seed: int = 0) -> float | None:
    """The smallest shift (in SDs, normal draws) the one-sided exact Mann-Whitney test of ``k`` planted against
    ``k_aa`` A/A effects detects with probability ``power`` at level ``alpha``; ``inf`` beyond 4 SD, None below
    2 + 2. Seeded Monte Carlo over a grid of 0.05 SD (the rejection region: the U values whose exact null
    p-value is below ``alpha``, no ties)."""
    curve = power_curve(k, k_aa, alpha, simulations, seed)
    if curve is None:
        return None
    return next((d for d, p in curve if p >= power), math.inf)


def power_curve(k: int, k_aa: int, alpha: float = 0.05, simulations: int = 20_000,
                seed: int = 0) -> list[tuple[float, float]] | None:
    """``[(shift in SD, power)]`` for shifts 0, 0.05, ..., 4 (see :func:`mde_sd`)."""
    import numpy as np

    if k < 2 or k_aa < 2:
        return None
    rng = np.random.default_rng(seed)
    null = _u_null(k, k_aa, rng)
    # the smallest u with P0(U >= u) < alpha (exact null when enumerable)
    values = np.sort(np.unique(null))
    tail = np.array([(null >= u).mean() for u in values])
    allowed = values[tail < alpha]
    if not len(allowed):
        return [(round(0.05 * i, 2), 0.0) for i in range(81)]
    critical = allowed.min()
    x, y = rng.standard_normal((simulations, k)), rng.standard_normal((simulations, k_aa))
    out = []
    for i in range(81):
        d = round(0.05 * i, 2)
        u = ((x[:, :, None] + d) > y[:, None, :]).sum(axis=(1, 2))
        out.append((d, float((u >= critical).mean())))
    return out


def _u_null(k: int, k_aa: int, rng) -> Any:
    """U of every split of ``k + k_aa`` distinct ranks (exact), or of 100,000 random ones."""
    import itertools

    import numpy as np

    n = k + k_aa
    if math.comb(n, k) <= 100_000:
        firsts = np.array(list(itertools.combinations(range(n), k)))
    else:
        firsts = np.sort(np.argsort(rng.random((100_000, n)), axis=1)[:, :k], axis=1)
    # U = sum of the first group's ranks (0-based) - k (k - 1) / 2
    return firsts.sum(axis=1) - k * (k - 1) // 2


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


def _pooled_sd(a: list[float], b: list[float]) -> float | None:
    parts = [(len(v) - 1, _var(v)) for v in (a, b) if len(v) > 1]
    dof = sum(d for d, _ in parts)
    return math.sqrt(sum(d * v for d, v in parts) / dof) if dof else None


def _var(v: list[float]) -> float:
    mean = sum(v) / len(v)
    return sum((x - mean) ** 2 for x in v) / (len(v) - 1)


def across_draws(draws: list[dict], families: Mapping[str, Mapping[str, str]], recipe: str = "committed",
                 alpha: float = 0.05) -> list[AcrossDraws]:
    """Per family of ``families`` (its primary metric and that metric's ``expected`` direction): the rates,
    the across-draw test of ``recipe`` in that direction and its minimal detectable effect."""
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
        metric, expected = next(iter(metrics.items()))
        out.append(AcrossDraws(
            family, metric, tuple(effects), tuple(aa_effects),
            sum(r["status"] == "detected" for r in p_rows), sum(r.get("paired_status") == "detected" for r in p_rows),
            sum(r["status"] == "detected" for r in a_rows), sum(r.get("paired_status") == "detected" for r in a_rows),
            mann_whitney(effects, aa_effects, expected), alpha, expected,
            mde_sd(len(effects), len(aa_effects), alpha), _pooled_sd(effects, aa_effects)))
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
    alpha = rows[0].alpha if rows else 0.05
    power = mde_sd(k, k_aa, alpha)
    at = (f" At {k} + {k_aa} draws the test detects an effect of {power:.1f} SD of the draws' effects 80 % of the "
          f"time (1 SD: {_power_at(k, k_aa, alpha, 1.0):.0%}): a family not detected is not detected at this "
          "power, not shown blind." if power is not None and math.isfinite(power) else "")
    return (f"**{n} of {len(rows)} benchmark families detect the planted bias across draws** "
            f"({k} planted/control pairs against {k_aa} A/A pairs, one-sided exact Mann-Whitney U in each "
            f"family's expected direction, p < {alpha}): "
            + (", ".join(r.family for r in rows if r.detected_across) or "none") + "." + at)


def _power_at(k: int, k_aa: int, alpha: float, shift: float) -> float:
    curve = power_curve(k, k_aa, alpha) or []
    return next((p for d, p in curve if abs(d - shift) < 1e-9), float("nan"))


def render_markdown(rows: list[AcrossDraws], source: str) -> str:
    """The report's section on the draws (headline, per-family rates and test)."""
    lines = [headline(rows), "",
             f"Draws: `{source}` (`bench/planted_draws.py --aa`; docs/planted_bias.md). Per family (primary "
             "metric): how often each per-draw reading detects over the planted pairs (*detection rate*) and "
             "over the A/A pairs (control vs a control re-seeded after the shared phase: every detection there "
             "is a *false positive*); the effects' mean ± sd; the across-draw test of planted against A/A effects.",
             "",
             "| family | primary metric | expected | CIs apart: detected / false positives | paired: detected / "
             "false positives | planted − control (mean ± sd) | A/A (mean ± sd) | Mann-Whitney p | across draws |",
             "|---|---|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        k, k_aa = len(r.effects), len(r.aa_effects)
        p = "n/a" if r.p_value is None else f"{r.p_value:.3f}"
        lines.append(f"| {r.family} | `{r.metric}` | {r.expected} | {r.detected} of {k} / {r.aa_detected} of {k_aa} "
                     f"| {r.paired_detected} of {k} / {r.aa_paired_detected} of {k_aa} | {_mean_sd(r.effects)} "
                     f"| {_mean_sd(r.aa_effects)} | {p} | {r.verdict()} |")
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
        if r.mde is not None:
            out[f"{base}/mde"] = r.mde
    return out


# --------------------------------------------------------------------------- which recipe a draws file holds
def recipe_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """What decides a draw (``params``: params.yaml as a validated dump, ``Params.model_dump(mode="json")``):
    ``model.pretrain`` (the per-draw ``seed`` and the folders left out), ``data`` (the items; the folders and
    ``allow_download`` left out), ``evaluation``'s seed, bootstrap, confidence, prompt format and the
    calibrated families' benchmarks, and ``calibrate.families``. Scoring settings are not part of it: a draw
    scores in float32 on the device it runs on (another draw, like another CPU's)."""
    pretrain = {k: v for k, v in params["model"]["pretrain"].items() if k not in ("seed", "corpus_dir", "checkpoint_dir")}
    pretrain["planted_bias"] = {k: v for k, v in pretrain["planted_bias"].items() if k != "checkpoint_dir"}
    data = {k: v for k, v in params["data"].items() if k not in ("mirror_dir", "prepared_dir", "allow_download")}
    families = params["calibrate"]["families"]
    benchmarks = {m.split("/", 1)[0] for metrics in families.values() for m in metrics}
    ev = params["evaluation"]
    evaluation = {k: ev[k] for k in ("seed", "bootstrap_samples", "confidence", "prompt_format")}
    evaluation["benchmarks"] = {b: ev["benchmarks"][b] for b in sorted(benchmarks) if b in ev["benchmarks"]}
    return {"model.pretrain": pretrain, "data": data, "evaluation": evaluation, "calibrate.families": families}


def recipe_hash(params: Mapping[str, Any]) -> str:
    """``sha256:<16 hex>`` of :func:`recipe_params` as canonical JSON: the recipe a draw was drawn with."""
    text = json.dumps(recipe_params(params), sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class DrawsReport(NamedTuple):
    """What the calibrate stage takes from the draws: the report's section, its MLflow numbers, and per primary
    metric the A/A spread ``(sd, largest |effect|, count)`` (empty when the draws are stale)."""

    markdown: str
    metrics: dict[str, float]
    aa_spread: dict[str, tuple[float | None, float, int]]


def draws_report(path: str | Path, params: Mapping[str, Any], recipe: str = "committed",
                 alpha: float = 0.05, source: str | None = None) -> DrawsReport:
    """The across-draw section from the draws file ``path``, or - when its ``recipe`` draws were drawn with
    another recipe than ``params`` (another :func:`recipe_hash`) or record none - a section that says so and
    counts nothing (``calibration/draws/stale`` = 1)."""
    source = source or str(path)
    rows_all = read_draws(path)
    mine = [d for d in rows_all if d["recipe"] in (recipe, recipe + AA_SUFFIX)]
    wanted = recipe_hash(params)
    hashes = sorted({str(d.get("params_hash")) for d in mine})
    commits = sorted({str(d.get("commit")) for d in mine if d.get("commit")})
    families = params["calibrate"]["families"]
    if not mine or hashes != [wanted]:
        if not mine:
            why = f"it holds no draws of recipe {recipe!r}"
        elif "None" in hashes:
            why = ("its draws record no params hash (drawn before draws carried one): their recipe is unknown, "
                   "so they cannot be matched to this run's params")
        else:
            why = (f"its draws were made with another recipe (params hash {', '.join(hashes)}, commit "
                   f"{', '.join(commits) or 'unknown'}; this run's: {wanted})")
        text = (f"**Across draws: not counted - `{source}` is stale.** {why[0].upper() + why[1:]}. Rerun "
                "`python bench/planted_draws.py --seeds 0 1 2 3 --aa` on this recipe and commit its `draws.jsonl` "
                "to count families across draws; until then only this run's single draw below is reported.\n")
        if mine:
            rows = across_draws(mine, families, recipe, alpha)
            text += "\nFor the record only (stale, not counted):\n\n" + render_markdown(rows, source).split("\n", 2)[2]
        return DrawsReport(text, {"calibration/draws/stale": 1.0}, {})
    rows = across_draws(mine, families, recipe, alpha)
    spread = {r.metric: (_sd(r.aa_effects), max((abs(v) for v in r.aa_effects), default=0.0), len(r.aa_effects))
              for r in rows if r.aa_effects}
    stamp = f" Drawn at commit {', '.join(commits) or 'unknown'}, params hash {wanted} (this run's)."
    return DrawsReport(render_markdown(rows, source).replace("\n\n", "\n\n" + stamp.strip() + " ", 1),
                       {**mlflow_metrics(rows), "calibration/draws/stale": 0.0}, spread)


def _sd(values: tuple[float, ...]) -> float | None:
    return math.sqrt(_var(list(values))) if len(values) > 1 else None
