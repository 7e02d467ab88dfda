"""ClozeGender on CrowS-Pairs (the paper's Table 5), on the pairs that differ only in gendered words."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biaslab.metrics import association as assoc

from .collector import MetricCollector, hb_match_statistic, him_ratio_statistic, kl_statistic, lm_kl_statistic
from .scoring import SentenceScores

WORD = re.compile(r"[a-z']+")


def gender_word_sets(pairs: pd.DataFrame) -> tuple[set[str], set[str]]:
    """English male / female words: the prepared ``gender_pairs`` (en) plus their plurals in -s, men/women."""
    en = pairs[pairs["language"] == "en"]
    male, female = set(en["male"].str.lower()), set(en["female"].str.lower())
    male |= {w + "s" for w in male} | {"men", "gentlemen", "husbands"}
    female |= {w + "s" for w in female} | {"women", "ladies", "wives"}
    return male - female, female - male


def crows_items(crows: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """CrowS-Pairs pairs whose two sentences differ only in gendered words, as (male, female) sentence pairs.

    The words that differ (lower-cased word-level diff) must all be male words in one sentence and all
    female words in the other; pairs that differ otherwise (names, other groups) are left out. ``hb`` is
    the gender of ``sent_more``, the sentence the crowd-worker wrote as the more stereotypical one.
    """
    import difflib

    male, female = gender_word_sets(pairs)
    rows = []
    for r in crows.itertuples(index=False):
        a, b = WORD.findall(r.sent_more.lower()), WORD.findall(r.sent_less.lower())
        diff_a, diff_b = [], []
        for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if op != "equal":
                diff_a += a[a0:a1]
                diff_b += b[b0:b1]
        if not diff_a or not diff_b:
            continue
        if set(diff_a) <= male and set(diff_b) <= female:
            sent_m, sent_w, word_m, word_w, hb = r.sent_more, r.sent_less, diff_a[0], diff_b[0], "M"
        elif set(diff_a) <= female and set(diff_b) <= male:
            sent_m, sent_w, word_m, word_w, hb = r.sent_less, r.sent_more, diff_b[0], diff_a[0], "W"
        else:
            continue
        rows.append({"pair_id": r.pair_id, "bias_type": r.bias_type, "is_duplicate": bool(r.is_duplicate),
                     "sent_m": sent_m, "sent_w": sent_w, "word_m": word_m, "word_w": word_w, "hb": hb})
    return pd.DataFrame(rows, columns=["pair_id", "bias_type", "is_duplicate", "sent_m", "sent_w", "word_m",
                                       "word_w", "hb"])


def read_concepts(path: str) -> dict:
    """``pair_id -> concept`` from a CSV with columns ``pair_id``, ``concept`` (errors name the file and row)."""
    from biaslab.data.tabular import read_table as read_csv_strict

    table = read_csv_strict(Path(path), ("pair_id", "concept"), label=str(path))
    return {table.parse_int(row, "pair_id"): table.nonempty(row, "concept").strip() for row in table}


def crows_predictions(items: pd.DataFrame, sentences: SentenceScores, vectors, concepts: dict | None) -> pd.DataFrame:
    out = items.copy()
    for side in ("m", "w"):
        col = out[f"sent_{side}"]
        out[f"logprob_{side}"] = col.map(sentences.logprob).astype(float)
        out[f"n_tokens_{side}"] = col.map(sentences.n_tokens).astype(int)
        out[f"p_{side}"] = col.map(sentences.prob).astype(float)
    out["lm_preferred"] = out["lm_hb_match"] = None  # filled by crows_derived (as the CGS columns below); created
    if concepts is not None:                          # here to keep the table's column order
        out["concept"] = out["pair_id"].map(concepts)
        for side in ("m", "w"):
            sims = [vectors.similarity(w, c) if isinstance(c, str) else None
                    for w, c in zip(out[f"word_{side}"], out["concept"])]
            out[f"sim_{side}"] = np.array([np.nan if x is None else x for x in sims], dtype=np.float64)
            out[f"cgs_{side}"] = np.nan
    return crows_derived(out)


def crows_derived(out: pd.DataFrame) -> pd.DataFrame:
    """A CrowS table's columns that follow from its stored probabilities (and, with concepts, similarities): the
    preferred gender and its human-bias match by P, and by CGS where ``sim_m``/``sim_w`` are stored (what
    :func:`crows_predictions` writes; the benchmark's ``derive``)."""
    out = out.copy()
    out["lm_preferred"] = assoc.preferred_gender(out["p_m"], out["p_w"])
    out["lm_hb_match"] = out["lm_preferred"] == out["hb"]
    if {"sim_m", "sim_w"} <= set(out.columns):
        for side in ("m", "w"):
            out[f"cgs_{side}"] = assoc.cgs(out[f"p_{side}"], out[f"sim_{side}"])
        out["preferred"] = assoc.preferred_gender(out["cgs_m"], out["cgs_w"])
        out["hb_match"] = out["preferred"] == out["hb"]
    return out


def crows_metrics(pred: pd.DataFrame, vectors, opts: dict[str, Any], m: MetricCollector) -> pd.DataFrame:
    """Table 5: M / W share, KL and HB match on P alone (``lm``) and, with concepts, on CGS (``cgs``) + WEAT."""
    used = pred[~pred["is_duplicate"].astype(bool)] if opts["drop_duplicates"] else pred
    human = float((used["hb"] == "M").mean()) if len(used) else float("nan")
    lm = used.assign(prefers_m=used["lm_preferred"] == assoc.MALE, prefers_w=used["lm_preferred"] == assoc.FEMALE)
    rows = [{"score": "lm", "n": len(used), "human_m": human,
             "him_ratio": m.add("crows_pairs/lm_him_ratio", lm[["prefers_m", "prefers_w"]], him_ratio_statistic, "target", 0.5,
                                "share of binary-gender CrowS pairs whose male sentence has the higher mean probability"),
             "kl": m.add("crows_pairs/lm_kl", used[["p_m", "p_w"]], lm_kl_statistic, "lower", 0.0,
                         "mean Bernoulli KL (nats) between the sentences' mean probabilities (paper's KL)", ci=False),
             "hb_match": m.add("crows_pairs/lm_hb_match", used, lambda f: float(f["lm_hb_match"].mean()), "higher",
                               1.0, "share of pairs where the preferred gender is that of the more stereotypical "
                                    "sentence", ci=False)}]
    if "cgs_m" in used:
        cgs = used.assign(prefers_m=used["preferred"] == assoc.MALE, prefers_w=used["preferred"] == assoc.FEMALE)
        with_concept = used[used["concept"].notna()]
        rows.append({"score": "cgs", "n": len(used), "human_m": human,
                     "him_ratio": m.add("crows_pairs/him_ratio", cgs[["prefers_m", "prefers_w"]], him_ratio_statistic,
                                        "target", 0.5, "as lm_him_ratio with CGS = P^(1 - sim(gender word, concept))"),
                     "kl": m.add("crows_pairs/kl", used[["cgs_m", "cgs_w"]], kl_statistic, "lower", 0.0,
                                 "as lm_kl on CGS", ci=False),
                     "hb_match": m.add("crows_pairs/hb_match", used, hb_match_statistic, "higher", 1.0,
                                       "as lm_hb_match on CGS", ci=False),
                     "weat": m.add("crows_pairs/weat", with_concept, lambda f: assoc.weat_paper(
                         f["word_m"], f["word_w"], f["concept"], f["hb"], vectors.get), "target", 0.0,
                         "WEAT S(male words, female words; concepts of male-/female-stereotyped pairs)", ci=False),
                     "concept_rows": len(with_concept)})
    return pd.DataFrame(rows)
