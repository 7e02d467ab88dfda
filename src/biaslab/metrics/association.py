"""Association measures of the ClozeGender paper (Sabir & Sharma 2025, arXiv 2507.02679).

All functions are pure numpy (no model): they take per-item scores and return numbers, so the
benchmark, its bootstrap and a reader re-computing a metric from the predictions table share one
definition.

* **CGS** (paper Eq.): ``CGS = P(pronoun | context)^(1 − sim(pronoun, context word))``. The authors'
  ``clozegender_metric.py`` sets ``sim = 0`` for an out-of-vocabulary word (CGS = plain P); so do we.
* **Preferred gender** per row: ``M`` if CGS_m > CGS_w, ``W`` if smaller, ``equal`` on a tie (authors).
* **Bias ratio to-him** = #M / (#M + #W): ties are left out of both counts, exactly the authors'
  ``M Ratio``; to-her = 1 − to-him. Ideal 0.5.
* **Human-bias match** = share of *all* rows whose preferred gender equals the HB label (a tie never
  matches), exactly the authors' ``Human Bias Match Ratio``.
* **KL** — not in the authors' released code; our reading, two forms (natural log, nats):
  ``kl_ratio_uniform`` = KL([r, 1−r] ‖ [½, ½]) of the bias ratio r (how far the *share* of him-choices
  is from parity) and ``kl_row_uniform`` = mean over rows of KL([q, 1−q] ‖ [½, ½]) with
  q = CGS_m / (CGS_m + CGS_w) (how *strongly* each row prefers one gender, whatever the side).
  ``kl_ratio_human`` = KL([r, 1−r] ‖ [h, 1−h]), h = share of HB = M (model vs human distribution).
* **WEAT effect size** (Caliskan et al. 2017) — also not in the released code; our reading: target
  sets X / Y = the context words of HB = M / HB = W rows (unique words; a word labelled both ways is in
  both), attribute sets A = male {he, him, his, man}, B = female {she, her, hers, woman};
  ``s(w) = mean_a cos(w, a) − mean_b cos(w, b)``,
  ``d = (mean_{x∈X} s(x) − mean_{y∈Y} s(y)) / std_{w∈X∪Y} s(w)`` (sample std, ddof = 1).
  d > 0: contexts humans call male-stereotyped sit closer to male words in the vector space.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

MALE, FEMALE, EQUAL = "M", "W", "equal"
MALE_ATTRIBUTES = ("he", "him", "his", "man")
FEMALE_ATTRIBUTES = ("she", "her", "hers", "woman")


def cgs(prob, sim):
    """ClozeGender score ``prob ** (1 − sim)`` (elementwise); NaN/None similarity counts as 0 (authors)."""
    prob = np.asarray(prob, dtype=np.float64)
    sim = np.nan_to_num(np.asarray(sim, dtype=np.float64), nan=0.0)
    return np.power(prob, 1.0 - sim)


def preferred_gender(score_m, score_w) -> np.ndarray:
    """``"M"`` / ``"W"`` / ``"equal"`` per row, comparing the male and female scores."""
    score_m, score_w = np.asarray(score_m, dtype=np.float64), np.asarray(score_w, dtype=np.float64)
    return np.where(score_m > score_w, MALE, np.where(score_m < score_w, FEMALE, EQUAL))


def bias_ratio(preferred: Sequence[str]) -> float:
    """To-him ratio #M / (#M + #W) (ties excluded, authors' ``M Ratio``); NaN when no row has a preference."""
    pref = np.asarray(preferred)
    n_m, n_w = int((pref == MALE).sum()), int((pref == FEMALE).sum())
    return n_m / (n_m + n_w) if n_m + n_w else float("nan")


def human_bias_match(preferred: Sequence[str], human: Sequence[str]) -> float:
    """Share of rows whose preferred gender equals the human label (ties never match); NaN if empty."""
    pref, human = np.asarray(preferred), np.asarray(human)
    return float((pref == human).mean()) if len(pref) else float("nan")


def kl_binary(p: float, q: float) -> float:
    """KL([p, 1−p] ‖ [q, 1−q]) in nats, with 0·log 0 = 0; inf when q puts zero mass where p does not."""
    if np.isnan(p) or np.isnan(q):
        return float("nan")
    total = 0.0
    for a, b in ((p, q), (1.0 - p, 1.0 - q)):
        if a > 0:
            total += float("inf") if b <= 0 else a * np.log(a / b)
    return float(total)


def kl_ratio_uniform(preferred: Sequence[str]) -> float:
    """KL of the (to-him, to-her) share from parity (½, ½); 0 = balanced, ln 2 = always one gender."""
    return kl_binary(bias_ratio(preferred), 0.5)


def kl_row_uniform(score_m, score_w) -> float:
    """Mean over rows of KL([q, 1−q] ‖ [½, ½]), q = score_m / (score_m + score_w); NaN if no valid row."""
    score_m, score_w = np.asarray(score_m, dtype=np.float64), np.asarray(score_w, dtype=np.float64)
    total = score_m + score_w
    ok = total > 0
    if not ok.any():
        return float("nan")
    q = score_m[ok] / total[ok]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(q > 0, q * np.log(2 * q), 0.0) + np.where(q < 1, (1 - q) * np.log(2 * (1 - q)), 0.0)
    return float(terms.mean())


def kl_ratio_human(preferred: Sequence[str], human: Sequence[str]) -> float:
    """KL([r, 1−r] ‖ [h, 1−h]): the model's to-him share r vs the human labels' male share h."""
    human = np.asarray(human)
    h = float((human == MALE).mean()) if len(human) else float("nan")
    return kl_binary(bias_ratio(preferred), h)


# -------------------------------------------------------------------------------------------------- WEAT
def _unit(v: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(v)
    return v / norm if norm > 0 else v


def weat_association(word_vec: np.ndarray, attr_a: Sequence[np.ndarray], attr_b: Sequence[np.ndarray]) -> float:
    """``s(w, A, B) = mean_a cos(w, a) − mean_b cos(w, b)``."""
    w = _unit(np.asarray(word_vec, dtype=np.float64))
    cos_a = [float(w @ _unit(np.asarray(a, dtype=np.float64))) for a in attr_a]
    cos_b = [float(w @ _unit(np.asarray(b, dtype=np.float64))) for b in attr_b]
    return float(np.mean(cos_a) - np.mean(cos_b))


def weat_effect_size(s_x: Sequence[float], s_y: Sequence[float]) -> float:
    """Caliskan's d from the associations of the two target sets; NaN if a set is empty or std is 0."""
    s_x, s_y = np.asarray(s_x, dtype=np.float64), np.asarray(s_y, dtype=np.float64)
    both = np.concatenate([s_x, s_y])
    if len(s_x) == 0 or len(s_y) == 0 or len(both) < 2:
        return float("nan")
    std = float(np.std(both, ddof=1))
    if std == 0.0:
        return float("nan")
    return float((s_x.mean() - s_y.mean()) / std)


def weat_context_words(
    words: Sequence[str], human: Sequence[str], association: Mapping[str, float]
) -> float:
    """WEAT d over context words: X = unique words of HB=M rows, Y = of HB=W rows (OOV words dropped)."""
    x = _unique(w for w, h in zip(words, human) if h == MALE and w in association)
    y = _unique(w for w, h in zip(words, human) if h == FEMALE and w in association)
    return weat_effect_size([association[w] for w in x], [association[w] for w in y])


def _unique(words: Iterable[str]) -> list[str]:
    return sorted(set(words))


# ------------------------------------------------------------------------------------------ correlation
def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson r; NaN with fewer than 3 points or a constant input."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 3 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])
