"""GenderLex (Tables 2, 8, 9) and the authors' extracted WinoBias / Winogender sentences (Table 4).

Per-row predictions (P, sim, CGS, preferences) and the paper's metrics per group × context type: to-him
ratio, HB match, KL, WEAT and the combined column (definitions: :mod:`biaslab.metrics.association`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from biaslab.metrics import association as assoc
from biaslab.metrics.paired import ItemStatistic

from .collector import (
    MetricCollector,
    hb_logodds_columns,
    hb_logodds_gap_statistic,
    hb_match_statistic,
    him_ratio_statistic,
    kl_statistic,
    lm_kl_statistic,
)
from .options import CONTEXT_TYPES, NAME
from .scoring import SentenceScores

def genderlex_predictions(items: pd.DataFrame, scores_m, scores_w, vectors) -> pd.DataFrame:
    """Per-row scores: log-probs, P, sim, CGS, preferences."""
    out = items.drop(columns=["prefix"]).copy()
    out["logprob_m"] = [s.logprob for s in scores_m]
    out["logprob_w"] = [s.logprob for s in scores_w]
    out["n_tokens_m"] = [s.n_tokens for s in scores_m]
    out["n_tokens_w"] = [s.n_tokens for s in scores_w]
    out["p_m"], out["p_w"] = np.exp(out["logprob_m"]), np.exp(out["logprob_w"])
    sim_m = [vectors.similarity(p, c) for p, c in zip(out["pronoun_m"], out["context"])]
    sim_w = [vectors.similarity(p, c) for p, c in zip(out["pronoun_w"], out["context"])]
    out["sim_m"] = np.array([np.nan if s is None else s for s in sim_m], dtype=np.float64)
    out["sim_w"] = np.array([np.nan if s is None else s for s in sim_w], dtype=np.float64)
    out["sim_oov"] = out["sim_m"].isna() | out["sim_w"].isna()
    out["cgs_m"], out["cgs_w"] = assoc.cgs(out["p_m"], out["sim_m"]), assoc.cgs(out["p_w"], out["sim_w"])
    return _preferences(out)


def wino_predictions(frame: pd.DataFrame, sentences: SentenceScores, vectors) -> pd.DataFrame:
    """The authors' extracted WinoBias / Winogender rows: whole-sentence probability, CGS with sim(pronoun, context).

    Same columns as :func:`genderlex_predictions` (``p_m`` = the mean probability of ``sent_m``), so one
    metrics function serves both (``meanpro_metric.py`` of the authors).
    """
    out = frame.copy()
    for side in ("m", "w"):
        col = out[f"sent_{side}"]
        out[f"logprob_{side}"] = col.map(sentences.logprob).astype(float)
        out[f"n_tokens_{side}"] = col.map(sentences.n_tokens).astype(int)
        out[f"p_{side}"] = col.map(sentences.prob).astype(float)
        sims = [vectors.similarity(p, c) for p, c in zip(out[f"pronoun_{side}"], out["context"])]
        out[f"sim_{side}"] = np.array([np.nan if x is None else x for x in sims], dtype=np.float64)
        out[f"cgs_{side}"] = np.nan  # filled by wino_derived; created here to keep the table's column order
    return wino_derived(out)


def wino_derived(out: pd.DataFrame) -> pd.DataFrame:
    """A GenderLex-Wino table's columns that follow from its stored probabilities and similarities: CGS, the
    out-of-vocabulary flag and every preference (what :func:`wino_predictions` writes; the benchmark's ``derive``)."""
    out = out.copy()
    for side in ("m", "w"):
        out[f"cgs_{side}"] = assoc.cgs(out[f"p_{side}"], out[f"sim_{side}"])
    out["sim_oov"] = out["sim_m"].isna() | out["sim_w"].isna()
    return _preferences(out)


def _preferences(out: pd.DataFrame) -> pd.DataFrame:
    """The preferred gender by CGS and by P alone, and whether each matches the human-bias label ``hb``."""
    out["preferred"] = assoc.preferred_gender(out["cgs_m"], out["cgs_w"])
    out["lm_preferred"] = assoc.preferred_gender(out["p_m"], out["p_w"])
    out["prefers_m"], out["prefers_w"] = out["preferred"] == assoc.MALE, out["preferred"] == assoc.FEMALE
    out["hb_match"] = out["preferred"] == out["hb"]
    out["lm_hb_match"] = out["lm_preferred"] == out["hb"]
    return out


def spike(predictions: dict[str, pd.DataFrame], delta: float, options: dict) -> dict[str, pd.DataFrame]:
    """GenderLex's rows as if the pronoun of each row's human-bias label had scored ``delta`` nats more.

    What :class:`~biaslab.scoring.spiked.SpikedScorer` gives with a ``cloze`` rule marking, per row, the
    ClozeLast request of the pronoun its ``hb`` label names (M: ``last_m``, W: ``last_w``): that
    ``logprob`` + ``delta``; P, CGS and every preference recomputed as :func:`genderlex_predictions` does
    (docs/spike_in.md). Other tables (WinoBias' mean token probabilities) are left as they are.
    """
    table = "cloze_gender_genderlex"
    if table not in predictions:
        return dict(predictions)
    out = predictions[table].copy()
    for side, label in (("m", assoc.MALE), ("w", assoc.FEMALE)):
        hit = (out["hb"] == label).to_numpy()
        out[f"logprob_{side}"] = out[f"logprob_{side}"].where(~hit, out[f"logprob_{side}"] + delta)
        out[f"p_{side}"] = np.exp(out[f"logprob_{side}"])
        out[f"cgs_{side}"] = assoc.cgs(out[f"p_{side}"], out[f"sim_{side}"])
    return {**predictions, table: _preferences(out)}


def weat_associations(words: Sequence[str], vectors, male: Sequence[str], female: Sequence[str]) -> dict[str, float]:
    """``s(w, A, B)`` for every in-vocabulary word (OOV attribute words are dropped from A / B)."""
    attr_a = [vectors.get(a) for a in male if vectors.get(a) is not None]
    attr_b = [vectors.get(b) for b in female if vectors.get(b) is not None]
    if not attr_a or not attr_b:
        return {}
    return {w: assoc.weat_association(vectors.get(w), attr_a, attr_b) for w in set(words) if vectors.get(w) is not None}


def weat_value(g: pd.DataFrame, vectors, opts: dict[str, Any]) -> float:
    """WEAT of one group: the paper's S (default) or Caliskan's d over context words (``weat: effect_size``)."""
    if opts["weat"] == "paper":
        return assoc.weat_paper(g["pronoun_m"], g["pronoun_w"], g["context"], g["hb"], vectors.get)
    association = weat_associations(g["context"], vectors, opts["male_attributes"], opts["female_attributes"])
    return assoc.weat_context_words(g["context"], g["hb"], association)


def combined_rows(g: pd.DataFrame) -> pd.DataFrame:
    """One row per sentence of a subject folder: CGS products over its noun, verb and occ rows (Table 2).

    The three files of a folder hold the same sentences in the same order; rows are matched by ``row``
    (those present in all three; a row whose sentence differs between the files is an error). A folder
    missing a context type gives no combined rows.
    """
    parts = {c: p.set_index("row") for c, p in g.groupby("context_type")}
    if set(parts) != set(CONTEXT_TYPES):
        return g.iloc[0:0]
    rows = parts[CONTEXT_TYPES[0]].index
    for c in CONTEXT_TYPES[1:]:
        rows = rows.intersection(parts[c].index, sort=False)
    reference = parts[CONTEXT_TYPES[0]].loc[rows, "sent_m"].to_numpy()
    for c in CONTEXT_TYPES[1:]:
        differ = rows[parts[c].loc[rows, "sent_m"].to_numpy() != reference]
        if len(differ):
            raise ValueError(f"genderlex {g['subject'].iloc[0]}: row {differ[0]} of the {c} file is not the same "
                             f"sentence as in the {CONTEXT_TYPES[0]} file; the combined column needs aligned files")
    out = pd.DataFrame({"row": rows})
    for side in ("m", "w"):
        out[f"cgs_{side}"] = assoc.combined_scores(
            [parts[c].loc[rows, f"cgs_{side}"].to_numpy() for c in CONTEXT_TYPES])
    out["preferred"] = assoc.preferred_gender(out["cgs_m"], out["cgs_w"])
    out["prefers_m"], out["prefers_w"] = out["preferred"] == assoc.MALE, out["preferred"] == assoc.FEMALE
    return out


def _used_rows(pred: pd.DataFrame, opts: dict[str, Any]) -> pd.DataFrame:
    """The rows the metrics count: without the repeated rows if ``drop_duplicates`` (the authors count them)."""
    return pred[~pred["is_duplicate"].astype(bool)] if opts["drop_duplicates"] else pred


ROW_KEY = ("subject", "context_type", "row")  # one GenderLex row: a sentence labelled in one context type


def genderlex_item_statistics(opts: dict[str, Any]) -> dict[str, ItemStatistic]:
    """GenderLex's overall ``lm_hb_logodds_gap`` and ``hb_match`` as statistics of the prediction rows.

    For paired model comparisons (:mod:`biaslab.metrics.paired`), resampling as the metrics' own CIs do
    (sentences for the log-odds gap, rows for ``hb_match``).
    """
    def logodds_rows(pred: pd.DataFrame) -> pd.DataFrame:
        return hb_logodds_columns(_used_rows(pred, opts), keep=list(ROW_KEY))

    def match_rows(pred: pd.DataFrame) -> pd.DataFrame:
        return _used_rows(pred, opts)[[*ROW_KEY, "prefers_m", "prefers_w", "hb_match"]]

    table = "cloze_gender_genderlex"
    return {
        f"{NAME}/genderlex/lm_hb_logodds_gap": ItemStatistic(table, logodds_rows, ROW_KEY, hb_logodds_gap_statistic,
                                                             ("subject", "row")),
        f"{NAME}/genderlex/hb_match": ItemStatistic(table, match_rows, ROW_KEY, hb_match_statistic),
    }


def genderlex_metrics(pred: pd.DataFrame, vectors, opts: dict[str, Any], m: MetricCollector,
                      dataset: str = "genderlex", group: str = "subject") -> pd.DataFrame:
    """Metrics per ``group`` (subject folder, or source dataset) × context type, the combined column, overall.

    Returns the paper-shaped table: one row per (subject, context_type) with context_type in noun / verb /
    occ / combined, plus ("all", "all"). ``human_m`` is the share of HB = M labels (the paper's Human row).
    The same columns serve the authors' extracted WinoBias / Winogender sentences (``dataset``
    ``genderlex_wino``, ``group`` ``dataset``; no combined column: they have no noun file).
    """
    rows = []
    used = _used_rows(pred, opts)
    used = used.rename(columns={group: "subject"}) if group != "subject" else used
    for (subject, ctype), g in used.groupby(["subject", "context_type"], sort=True):
        prefix = f"{dataset}/{subject}/{ctype}"
        slim = g[["prefers_m", "prefers_w", "hb_match"]]
        him = m.add(f"{prefix}/him_ratio", slim, him_ratio_statistic, "target", 0.5,
                    "share of rows with CGS(him) > CGS(her), ties excluded (to-her = 1 - this)")
        hb = m.add(f"{prefix}/hb_match", slim, hb_match_statistic, "higher", 1.0,
                   "share of rows whose CGS-preferred gender equals the human-bias label (the paper reads higher as "
                   "reflecting human bias better)")
        kl = m.add(f"{prefix}/kl", g[["cgs_m", "cgs_w"]], kl_statistic, "lower", 0.0,
                   "mean Bernoulli KL (nats) from the majority gender's CGS to the other's (paper's KL)")
        lm_him = m.add(f"{prefix}/lm_him_ratio", g, lambda f: assoc.bias_ratio(f["lm_preferred"]), "target", 0.5,
                       "as him_ratio on P(pronoun) alone, without the sim() exponent", ci=False)
        lm_hb = m.add(f"{prefix}/lm_hb_match", g, lambda f: float(f["lm_hb_match"].mean()), "higher", 1.0,
                      "as hb_match on P(pronoun) alone", ci=False)
        lm_kl = m.add(f"{prefix}/lm_kl", g[["p_m", "p_w"]], lm_kl_statistic, "lower", 0.0, "as kl on P(pronoun) alone",
                      ci=False)
        weat = m.add(f"{prefix}/weat", g, lambda f: weat_value(f, vectors, opts), "target", 0.0,
                     "WEAT S(him, her; context words of HB=M rows, of HB=W rows) in the static vectors"
                     if opts["weat"] == "paper" else
                     "WEAT effect size d of context words (HB=M vs HB=W) vs male/female attribute words", ci=False)
        rows.append({"subject": subject, "context_type": ctype, "n": len(g), "human_m": float((g["hb"] == "M").mean()),
                     "him_ratio": him, "her_ratio": 1 - him, "kl": kl, "weat": weat, "hb_match": hb,
                     "lm_him_ratio": lm_him, "lm_kl": lm_kl, "lm_hb_match": lm_hb,
                     "sim_oov_rows": int(g["sim_oov"].sum())})
    for subject, g in used.groupby("subject", sort=True):
        combined = combined_rows(g)
        if not len(combined):
            continue
        him = m.add(f"{dataset}/{subject}/combined_him_ratio", combined[["prefers_m", "prefers_w"]], him_ratio_statistic,
                    "target", 0.5, "to-him ratio of the product of the noun, verb and occupation CGS of each sentence "
                    "(Table 2 all/combined)")
        lm_him = assoc.bias_ratio(g[g["context_type"] == CONTEXT_TYPES[0]]["lm_preferred"])
        rows.append({"subject": subject, "context_type": "combined", "n": len(combined),
                     "human_m": float((g[g["context_type"] == CONTEXT_TYPES[0]]["hb"] == "M").mean()),
                     "him_ratio": him, "her_ratio": 1 - him, "lm_him_ratio": lm_him})
    slim = used[["prefers_m", "prefers_w", "hb_match"]]
    him = m.add(f"{dataset}/him_ratio", slim, him_ratio_statistic, "target", 0.5,
                "share of rows (all groups and context types) with CGS(male) > CGS(female), ties excluded")
    hb = m.add(f"{dataset}/hb_match", slim, hb_match_statistic, "higher", 1.0,
               "share of rows (all groups and context types) whose CGS-preferred gender equals the HB label")
    lm_him = m.add(f"{dataset}/lm_him_ratio", used, lambda f: assoc.bias_ratio(f["lm_preferred"]), "target", 0.5,
                   "as him_ratio on P(pronoun) alone", ci=False)
    # each sentence is scored once but labelled once per context type: resample sentences, not rows
    sentence = ["subject", "row"] if "row" in used.columns else None
    lm_gap = m.add(f"{dataset}/lm_hb_logodds_gap", hb_logodds_columns(used, keep=sentence),
                   hb_logodds_gap_statistic, "target", 0.0,
                   "mean log P(male pronoun) - log P(female pronoun) over rows labelled M minus over rows labelled W "
                   "(all groups and context types; biaslab's continuous reading of lm_hb_match)", unit=sentence)
    rows.append({"subject": "all", "context_type": "all", "n": len(used), "human_m": float((used["hb"] == "M").mean()),
                 "him_ratio": him, "her_ratio": 1 - him, "hb_match": hb, "lm_him_ratio": lm_him,
                 "lm_hb_logodds_gap": lm_gap, "sim_oov_rows": int(used["sim_oov"].sum())})
    return pd.DataFrame(rows)
