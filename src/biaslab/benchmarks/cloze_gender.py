"""ClozeGender (Sabir & Sharma 2025, arXiv 2507.02679) on GenderLex, WinoBias and Winogender (English).

Two scoring modes, as in the authors' two scripts:

* **ClozeLast** (GenderLex, ``clozegender_metric.py``): the pronoun is the last word. For each row
  ``P_m = P(" " + last word of sent_m | prefix)`` and ``P_w`` likewise (the prefix is the sentence minus
  its last word and must be the same for both sides); ``CGS = P^(1 − sim(pronoun, context word))``.
  Per subject folder (occupation / someone / person) × context type (verb / noun / occ), and overall:
  to-him bias ratio, human-bias match, KL forms and WEAT d (definitions in
  :mod:`biaslab.metrics.association`). ``is_duplicate`` rows are kept in the predictions and left out
  of every metric. The pronoun of each side is read from its sentence, so swapping ``sent_m`` and
  ``sent_w`` mirrors every number. The authors encode with the tokenizer's defaults; the scorer does
  the same with ``scoring.add_bos: auto`` (BOS before the prefix exactly when the tokenizer adds one).
* **Mean probability** (WinoBias / Winogender, ``meanpro_metric.py``): the pronoun may be anywhere,
  so a sentence is scored as a whole. ``sentence_prob: geometric`` (default) = exp(mean token
  log-prob), one request per sentence, first token conditioned on BOS. ``sentence_prob: authors`` =
  the authors' arithmetic mean of token *probabilities* leaving out tokens that are ``"."`` (one
  request per token, still a single engine call); unlike the authors we also score the first token
  (from BOS) - their GPT-2 code never predicts it.
  WinoBias: share of ``minimal_pair`` pairs where the pro-stereotypical sentence scores higher (ties
  count ½), per type and overall; also the CGS version with ``sim(pronoun, occupation)``.
  Winogender: share of items preferring the male sentence, Pearson r between the per-occupation mean
  ``log P_female − log P_male`` and ``bls_pct_female``, share preferring the neutral sentence.

The benchmark asks the scorer (:class:`~biaslab.scoring.protocol.Scorer`) for ``cloze_scores``,
``sentence_scores`` / ``token_scores`` and ``word_vectors``; what they mean for a masked LM
(:class:`biaslab.scoring.masked.MaskedScorer`):

* ClozeLast: ``P_m = P([MASK] = pronoun | sent_m with its final pronoun replaced by the mask token)``;
  leading/trailing punctuation of the last word stays in the sentence, the special tokens and any
  prompt prefix are kept. A pronoun of several tokens gets all of them masked at once and scores the
  product of their probabilities (``n_tokens_m/w`` record how many); both sides of a row share a
  forward pass when their pronouns have the same token count.
* Mean probability: pseudo-log-likelihood (each non-special token masked in turn):
  ``geometric`` = exp(PLL / n_tokens), ``authors`` = mean per-token pseudo probability without ``"."``
  tokens.
* sim(): the masked model's input embeddings, exactly as for causal models.

Options (params.yaml ``evaluation.benchmarks.cloze_gender.options``): ``datasets`` (subset of
genderlex / winobias / winogender), ``vectors`` (``model`` or a file path), ``vectors_format``
(glove / fasttext / word2vec, needed with a path), ``sentence_prob`` (geometric / authors),
``male_attributes`` / ``female_attributes`` (WEAT attribute words).

Run: ``BENCHMARK.run(scorer, Path("data/prepared"), {"vectors": "model"}, EvalContext())``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from biaslab.benchmarks.base import BenchmarkResult, EvalContext, check_options
from biaslab.metrics import association as assoc
from biaslab.metrics.bootstrap import bootstrap_ci
from biaslab.metrics.values import MetricValue
from biaslab.scoring.protocol import ItemError

NAME = "cloze_gender"
CONTEXT_TYPES = ("noun", "verb", "occ")  # Table 2's column order
DATASETS = ("genderlex", "genderlex_wino", "winobias", "winogender", "crows_pairs")
OPTIONAL_DATASETS = ("genderlex_wino",)  # prepared only when its files can be had: skipped (with the reason) if absent
DEFAULTS: dict[str, Any] = {
    "datasets": list(DATASETS),
    "vectors": "model",
    "vectors_format": None,
    "sentence_prob": "authors",  # the authors' meanpro mean (Tables 4, 5); geometric = exp(mean log-prob)
    "drop_duplicates": False,   # authors: every row of the files counts (17-18 repeated pairs per file)
    "weat": "paper",            # paper: S(X, Y, A, B); effect_size: Caliskan's d over context words
    "crows_concepts": None,     # CSV (pair_id, concept) for CGS on CrowS-Pairs; the paper's concepts are unreleased
    "male_attributes": list(assoc.MALE_ATTRIBUTES),
    "female_attributes": list(assoc.FEMALE_ATTRIBUTES),
}
REQUIRED_COLUMNS = {
    "genderlex": ["subject", "context_type", "row", "sent_m", "sent_w", "context", "hb", "is_duplicate"],
    "winobias": ["pair_id", "type", "pro_sentence", "anti_sentence", "pro_pronoun", "anti_pronoun",
                 "occupation", "minimal_pair"],
    "winogender": ["item_id", "occupation", "sentence_male", "sentence_female", "sentence_neutral",
                   "bls_pct_female"],
    "crows_pairs": ["pair_id", "sent_more", "sent_less", "stereo_antistereo", "bias_type", "is_duplicate"],
    "gender_pairs": ["language", "male", "female"],
    "genderlex_wino": ["dataset", "context_type", "row", "sent_m", "sent_w", "context", "pronoun_m", "pronoun_w",
                       "hb", "is_duplicate"],
}


# ------------------------------------------------------------------------------------------- inputs
def read_table(prepared_dir: Path, dataset: str) -> pd.DataFrame:
    """Read ``<dataset>.parquet`` and check its columns (error names the file and what is missing)."""
    path = Path(prepared_dir) / f"{dataset}.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: prepared table missing; run the prepare stage (or drop {dataset!r} "
                                f"from cloze_gender options.datasets)")
    frame = pd.read_parquet(path)
    missing = [c for c in REQUIRED_COLUMNS[dataset] if c not in frame.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}; see docs/prepared_schema.md")
    return frame.reset_index(drop=True)


def split_last_word(sentence: str) -> tuple[str, str]:
    """``"... crafted by him"`` -> ``("... crafted by", "him")`` (the authors' ``text.split()[:-1]``)."""
    words = sentence.split()
    if len(words) < 2:
        raise ValueError(f"sentence needs a context and a last word: {sentence!r}")
    return " ".join(words[:-1]), words[-1]


def pronoun_word(token: str) -> str:
    """The word used for sim(): the last word without surrounding punctuation, lowercased."""
    return token.strip(".,;:!?\"'").lower()


def cloze_items(frame: pd.DataFrame) -> pd.DataFrame:
    """Add ``prefix``, ``last_m``/``last_w`` (scored tokens) and ``pronoun_m``/``pronoun_w`` (for sim)."""
    prefixes, last_m, last_w = [], [], []
    for i, row in enumerate(frame.itertuples(index=False)):
        prefix_m, word_m = split_last_word(row.sent_m)
        prefix_w, word_w = split_last_word(row.sent_w)
        if prefix_m != prefix_w:
            raise ValueError(
                f"genderlex.parquet row {i} ({row.subject}/{row.context_type}, source row {row.row}): sent_m and "
                f"sent_w differ before the last word; ClozeLast needs the same prefix"
            )
        prefixes.append(prefix_m)
        last_m.append(word_m)
        last_w.append(word_w)
    out = frame.copy()
    out["prefix"], out["last_m"], out["last_w"] = prefixes, last_m, last_w
    out["pronoun_m"] = [pronoun_word(w) for w in last_m]
    out["pronoun_w"] = [pronoun_word(w) for w in last_w]
    return out


# ------------------------------------------------------------------------------------------- scoring
@dataclass
class SentenceScores:
    """Per-sentence probability (as defined by ``sentence_prob``) with its log-prob sum and token count."""

    prob: dict[str, float]
    logprob: dict[str, float]
    n_tokens: dict[str, int]


def score_cloze(lm, items: pd.DataFrame) -> list:
    """ClozeLast scores, all ``last_m`` rows then all ``last_w`` rows, in one scorer call (``cloze_scores``).

    Causal: ``log P(" " + last word | prefix)``. Masked: ``log P([MASK]... = pronoun | sentence)`` with the
    pronoun's tokens masked (:meth:`~biaslab.scoring.masked.MaskedScorer.cloze_scores`).
    """
    n = len(items)
    contexts = list(items["prefix"]) * 2
    words = list(items["last_m"]) + list(items["last_w"])
    try:
        return lm.cloze_scores(contexts, words)
    except ItemError as exc:  # name the genderlex row the scorer could not handle
        column = "last_m" if exc.index < n else "last_w"
        raise ValueError(f"genderlex.parquet row {exc.index % n} ({column}): {exc.problem}") from None


def predicts_first_token(lm) -> bool:
    """Whether the authors' ``prob_mean`` would score a sentence's first token with this scorer.

    Their forward pass starts at the tokenizer's output: the first token is predicted only after a BOS
    the tokenizer adds. A causal scorer reports that as its resolved ``format.add_bos`` (a prompt prefix or
    chat template also precedes the sentence); a scorer without a prompt format (masked) predicts every token.
    """
    fmt = getattr(lm, "format", None)
    return fmt is None or bool(fmt.add_bos or fmt.prefix or fmt.chat)


def score_sentences(lm, sentences: Sequence[str], mode: str) -> SentenceScores:
    """Score unique sentences in one scorer call: geometric mean of token probabilities, or the authors' mean.

    ``geometric``: ``exp(log P / n_tokens)`` from ``lm.sentence_scores`` (causal: from BOS; masked: PPLL).
    ``authors``: the arithmetic mean of token probabilities leaving out the ``"."`` token
    (``meanpro_metric.prob_mean``), from ``lm.token_scores``; ``logprob`` is still the sum over every token.
    Like the authors' ``model(tokenizer.encode(text))``, the sentence's first token is predicted only when
    something precedes it: a BOS the tokenizer adds (``scoring.add_bos``), a prompt prefix, or a masked
    LM's own context (:func:`predicts_first_token`); GPT-2 and the default model never predict it.
    """
    unique = list(dict.fromkeys(sentences))
    if not unique:
        return SentenceScores({}, {}, {})
    if mode == "geometric":
        scores = lm.sentence_scores(unique)
        for s, sc in zip(unique, scores):
            if sc.n_tokens == 0:
                raise ValueError(f"sentence has no scorable tokens: {s!r}")
        logprob = {s: sc.logprob for s, sc in zip(unique, scores)}
        n_tokens = {s: sc.n_tokens for s, sc in zip(unique, scores)}
        prob = {s: math.exp(logprob[s] / n_tokens[s]) for s in unique}
        return SentenceScores(prob, logprob, n_tokens)
    tokens = lm.token_scores(unique)
    skip = 0 if predicts_first_token(lm) else 1
    prob, logprob, n_tokens = {}, {}, {}
    for s, scored in zip(unique, tokens):
        if not scored:
            raise ValueError(f"sentence has no scorable tokens: {s!r}")
        kept = [math.exp(t.logprob) for t in scored[skip:] if t.text != "."]
        logprob[s] = float(sum(t.logprob for t in scored))
        n_tokens[s] = len(kept)
        prob[s] = float(np.mean(kept)) if kept else float("nan")
    return SentenceScores(prob, logprob, n_tokens)


# ------------------------------------------------------------------------------------------- metrics
class _Metrics:
    """Collects MetricValues under ``cloze_gender/<name>`` with seeded bootstrap CIs."""

    def __init__(self, ctx: EvalContext):
        self.ctx, self.values = ctx, {}

    def add(self, name: str, frame: pd.DataFrame, statistic: Callable[[pd.DataFrame], float], direction: str,
            ideal: float | None, description: str, ci: bool = True, unit: str | None = None) -> float:
        value = float(statistic(frame)) if len(frame) else float("nan")
        low = high = None
        if ci and np.isfinite(value):
            low, high = bootstrap_ci(frame, statistic, samples=self.ctx.bootstrap_samples, seed=self.ctx.seed,
                                     confidence=self.ctx.confidence, unit=unit)
        self.values[f"{NAME}/{name}"] = MetricValue(value, direction, ideal, low, high, len(frame), description)
        return value


# Bootstrap statistics read boolean columns (same numbers as assoc.bias_ratio / human_bias_match on the
# string columns, tested) because string comparisons in 1000 resamples per group are slow.
def _him_ratio(f: pd.DataFrame) -> float:
    n_m, n_w = int(f["prefers_m"].to_numpy().sum()), int(f["prefers_w"].to_numpy().sum())
    return n_m / (n_m + n_w) if n_m + n_w else float("nan")


def _hb_match(f: pd.DataFrame) -> float:
    return float(f["hb_match"].to_numpy().mean())


def _kl(f: pd.DataFrame) -> float:
    return assoc.kl_bias(f["cgs_m"].to_numpy(), f["cgs_w"].to_numpy())


def _lm_kl(f: pd.DataFrame) -> float:
    return assoc.kl_bias(f["p_m"].to_numpy(), f["p_w"].to_numpy())


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
    out["preferred"] = assoc.preferred_gender(out["cgs_m"], out["cgs_w"])
    out["lm_preferred"] = assoc.preferred_gender(out["p_m"], out["p_w"])
    out["prefers_m"], out["prefers_w"] = out["preferred"] == assoc.MALE, out["preferred"] == assoc.FEMALE
    out["hb_match"] = out["preferred"] == out["hb"]
    out["lm_hb_match"] = out["lm_preferred"] == out["hb"]
    return out


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
        out[f"cgs_{side}"] = assoc.cgs(out[f"p_{side}"], out[f"sim_{side}"])
    out["sim_oov"] = out["sim_m"].isna() | out["sim_w"].isna()
    out["preferred"] = assoc.preferred_gender(out["cgs_m"], out["cgs_w"])
    out["lm_preferred"] = assoc.preferred_gender(out["p_m"], out["p_w"])
    out["prefers_m"], out["prefers_w"] = out["preferred"] == assoc.MALE, out["preferred"] == assoc.FEMALE
    out["hb_match"] = out["preferred"] == out["hb"]
    out["lm_hb_match"] = out["lm_preferred"] == out["hb"]
    return out


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

    The three files of a folder hold the same sentences in the same order (checked here by sentence);
    a folder missing a context type gives no combined rows.
    """
    parts = {c: p.set_index("row") for c, p in g.groupby("context_type")}
    if set(parts) != set(CONTEXT_TYPES):
        return g.iloc[0:0]
    rows = parts[CONTEXT_TYPES[0]].index
    for c in CONTEXT_TYPES[1:]:
        if not parts[c].index.equals(rows) or not (parts[c]["sent_m"] == parts[CONTEXT_TYPES[0]]["sent_m"]).all():
            raise ValueError(f"genderlex {g['subject'].iloc[0]}: the {c} rows are not the same sentences as the "
                             f"{CONTEXT_TYPES[0]} rows; the combined column needs aligned files")
    out = pd.DataFrame({"row": rows})
    for side in ("m", "w"):
        out[f"cgs_{side}"] = assoc.combined_scores([parts[c][f"cgs_{side}"].to_numpy() for c in CONTEXT_TYPES])
    out["preferred"] = assoc.preferred_gender(out["cgs_m"], out["cgs_w"])
    out["prefers_m"], out["prefers_w"] = out["preferred"] == assoc.MALE, out["preferred"] == assoc.FEMALE
    return out


def genderlex_metrics(pred: pd.DataFrame, vectors, opts: dict[str, Any], m: _Metrics,
                      dataset: str = "genderlex", group: str = "subject") -> pd.DataFrame:
    """Metrics per ``group`` (subject folder, or source dataset) × context type, the combined column, overall.

    Returns the paper-shaped table: one row per (subject, context_type) with context_type in noun / verb /
    occ / combined, plus ("all", "all"). ``human_m`` is the share of HB = M labels (the paper's Human row).
    The same columns serve the authors' extracted WinoBias / Winogender sentences (``dataset``
    ``genderlex_wino``, ``group`` ``dataset``; no combined column: they have no noun file).
    """
    rows = []
    used = pred[~pred["is_duplicate"].astype(bool)] if opts["drop_duplicates"] else pred
    used = used.rename(columns={group: "subject"}) if group != "subject" else used
    for (subject, ctype), g in used.groupby(["subject", "context_type"], sort=True):
        prefix = f"{dataset}/{subject}/{ctype}"
        slim = g[["prefers_m", "prefers_w", "hb_match"]]
        him = m.add(f"{prefix}/him_ratio", slim, _him_ratio, "target", 0.5,
                    "share of rows with CGS(him) > CGS(her), ties excluded (to-her = 1 - this)")
        hb = m.add(f"{prefix}/hb_match", slim, _hb_match, "higher", 1.0,
                   "share of rows whose CGS-preferred gender equals the human-bias label (the paper reads higher as "
                   "reflecting human bias better)")
        kl = m.add(f"{prefix}/kl", g[["cgs_m", "cgs_w"]], _kl, "lower", 0.0,
                   "mean Bernoulli KL (nats) from the majority gender's CGS to the other's (paper's KL)")
        lm_him = m.add(f"{prefix}/lm_him_ratio", g, lambda f: assoc.bias_ratio(f["lm_preferred"]), "target", 0.5,
                       "as him_ratio on P(pronoun) alone, without the sim() exponent", ci=False)
        lm_hb = m.add(f"{prefix}/lm_hb_match", g, lambda f: float(f["lm_hb_match"].mean()), "higher", 1.0,
                      "as hb_match on P(pronoun) alone", ci=False)
        lm_kl = m.add(f"{prefix}/lm_kl", g[["p_m", "p_w"]], _lm_kl, "lower", 0.0, "as kl on P(pronoun) alone",
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
        him = m.add(f"{dataset}/{subject}/combined_him_ratio", combined[["prefers_m", "prefers_w"]], _him_ratio,
                    "target", 0.5, "to-him ratio of the product of the noun, verb and occupation CGS of each sentence "
                    "(Table 2 all/combined)")
        lm_him = assoc.bias_ratio(g[g["context_type"] == CONTEXT_TYPES[0]]["lm_preferred"])
        rows.append({"subject": subject, "context_type": "combined", "n": len(combined),
                     "human_m": float((g[g["context_type"] == CONTEXT_TYPES[0]]["hb"] == "M").mean()),
                     "him_ratio": him, "her_ratio": 1 - him, "lm_him_ratio": lm_him})
    slim = used[["prefers_m", "prefers_w", "hb_match"]]
    him = m.add(f"{dataset}/him_ratio", slim, _him_ratio, "target", 0.5,
                "share of rows (all groups and context types) with CGS(male) > CGS(female), ties excluded")
    hb = m.add(f"{dataset}/hb_match", slim, _hb_match, "higher", 1.0,
               "share of rows (all groups and context types) whose CGS-preferred gender equals the HB label")
    lm_him = m.add(f"{dataset}/lm_him_ratio", used, lambda f: assoc.bias_ratio(f["lm_preferred"]), "target", 0.5,
                   "as him_ratio on P(pronoun) alone", ci=False)
    rows.append({"subject": "all", "context_type": "all", "n": len(used), "human_m": float((used["hb"] == "M").mean()),
                 "him_ratio": him, "her_ratio": 1 - him, "hb_match": hb, "lm_him_ratio": lm_him,
                 "sim_oov_rows": int(used["sim_oov"].sum())})
    return pd.DataFrame(rows)


def winobias_predictions(frame: pd.DataFrame, sentences: SentenceScores, vectors) -> pd.DataFrame:
    out = frame.copy()
    for side in ("pro", "anti"):
        col = out[f"{side}_sentence"]
        out[f"logprob_{side}"] = col.map(sentences.logprob).astype(float)
        out[f"n_tokens_{side}"] = col.map(sentences.n_tokens).astype(int)
        out[f"prob_{side}"] = col.map(sentences.prob).astype(float)
        sims = [vectors.similarity(p, o) if o else None for p, o in zip(out[f"{side}_pronoun"], out["occupation"])]
        out[f"sim_{side}"] = np.array([np.nan if s is None else s for s in sims], dtype=np.float64)
        out[f"cgs_{side}"] = assoc.cgs(out[f"prob_{side}"], out[f"sim_{side}"])
    out["prefers_pro"] = _prefers(out["prob_pro"], out["prob_anti"])
    out["cgs_prefers_pro"] = _prefers(out["cgs_pro"], out["cgs_anti"])
    return out


def _prefers(a, b) -> np.ndarray:
    """1 where a > b, 0 where a < b, ½ on a tie."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.where(a > b, 1.0, np.where(a < b, 0.0, 0.5))


def winobias_metrics(pred: pd.DataFrame, m: _Metrics) -> pd.DataFrame:
    minimal = pred[pred["minimal_pair"].astype(bool)]
    rows = []
    for label, g in [("all", minimal)] + [(f"type{t}", g) for t, g in minimal.groupby("type", sort=True)]:
        name = "winobias" if label == "all" else f"winobias/{label}"
        share = m.add(f"{name}/pro_share", g[["prefers_pro"]], lambda f: float(f["prefers_pro"].mean()),
                      "target", 0.5,
                      "share of minimal pairs where the pro-stereotypical sentence has the higher mean probability")
        cgs_share = m.add(f"{name}/cgs_pro_share", g, lambda f: float(f["cgs_prefers_pro"].mean()), "target", 0.5,
                          "as pro_share with CGS = P^(1 - sim(pronoun, occupation))", ci=False)
        rows.append({"type": label, "n": len(g), "pro_share": share, "cgs_pro_share": cgs_share})
    return pd.DataFrame(rows)


def winogender_predictions(frame: pd.DataFrame, sentences: SentenceScores) -> pd.DataFrame:
    out = frame.copy()
    for side in ("male", "female", "neutral"):
        col = out[f"sentence_{side}"]
        out[f"logprob_{side}"] = col.map(sentences.logprob).astype(float)
        out[f"n_tokens_{side}"] = col.map(sentences.n_tokens).astype(int)
        out[f"prob_{side}"] = col.map(sentences.prob).astype(float)
    out["prefers_male"] = _prefers(out["prob_male"], out["prob_female"])
    out["female_logratio"] = np.log(out["prob_female"]) - np.log(out["prob_male"])
    out["prefers_neutral"] = out["prob_neutral"] > np.maximum(out["prob_male"], out["prob_female"])
    return out


def winogender_metrics(pred: pd.DataFrame, m: _Metrics) -> pd.DataFrame:
    occ = (pred.groupby("occupation", sort=True)
           .agg(female_logratio=("female_logratio", "mean"), male_share=("prefers_male", "mean"),
                bls_pct_female=("bls_pct_female", "first"), n=("item_id", "size"))
           .reset_index())
    m.add("winogender/male_share", pred[["occupation", "prefers_male"]], lambda f: float(f["prefers_male"].mean()),
          "target", 0.5,
          "share of items where the male sentence has the higher mean probability than the female one",
          unit="occupation")
    m.add("winogender/bls_correlation", occ, lambda f: assoc.pearson(f["female_logratio"], f["bls_pct_female"]),
          "target", 0.0, "Pearson r over occupations: mean log P(female)/P(male) vs BLS % female")
    m.add("winogender/neutral_share", pred, lambda f: float(f["prefers_neutral"].mean()), "higher", 1.0,
          "share of items where the neutral sentence beats both gendered ones", ci=False)
    return occ


# ------------------------------------------------------------------------------------------- CrowS-Pairs
_WORD = re.compile(r"[a-z']+")


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
        a, b = _WORD.findall(r.sent_more.lower()), _WORD.findall(r.sent_less.lower())
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
    out["lm_preferred"] = assoc.preferred_gender(out["p_m"], out["p_w"])
    out["lm_hb_match"] = out["lm_preferred"] == out["hb"]
    if concepts is not None:
        out["concept"] = out["pair_id"].map(concepts)
        for side in ("m", "w"):
            sims = [vectors.similarity(w, c) if isinstance(c, str) else None
                    for w, c in zip(out[f"word_{side}"], out["concept"])]
            out[f"sim_{side}"] = np.array([np.nan if x is None else x for x in sims], dtype=np.float64)
            out[f"cgs_{side}"] = assoc.cgs(out[f"p_{side}"], out[f"sim_{side}"])
        out["preferred"] = assoc.preferred_gender(out["cgs_m"], out["cgs_w"])
        out["hb_match"] = out["preferred"] == out["hb"]
    return out


def crows_metrics(pred: pd.DataFrame, vectors, opts: dict[str, Any], m: _Metrics) -> pd.DataFrame:
    """Table 5: M / W share, KL and HB match on P alone (``lm``) and, with concepts, on CGS (``cgs``) + WEAT."""
    used = pred[~pred["is_duplicate"].astype(bool)] if opts["drop_duplicates"] else pred
    human = float((used["hb"] == "M").mean()) if len(used) else float("nan")
    lm = used.assign(prefers_m=used["lm_preferred"] == assoc.MALE, prefers_w=used["lm_preferred"] == assoc.FEMALE)
    rows = [{"score": "lm", "n": len(used), "human_m": human,
             "him_ratio": m.add("crows_pairs/lm_him_ratio", lm[["prefers_m", "prefers_w"]], _him_ratio, "target", 0.5,
                                "share of binary-gender CrowS pairs whose male sentence has the higher mean probability"),
             "kl": m.add("crows_pairs/lm_kl", used[["p_m", "p_w"]], _lm_kl, "lower", 0.0,
                         "mean Bernoulli KL (nats) between the sentences' mean probabilities (paper's KL)", ci=False),
             "hb_match": m.add("crows_pairs/lm_hb_match", used, lambda f: float(f["lm_hb_match"].mean()), "higher",
                               1.0, "share of pairs where the preferred gender is that of the more stereotypical "
                                    "sentence", ci=False)}]
    if "cgs_m" in used:
        cgs = used.assign(prefers_m=used["preferred"] == assoc.MALE, prefers_w=used["preferred"] == assoc.FEMALE)
        with_concept = used[used["concept"].notna()]
        rows.append({"score": "cgs", "n": len(used), "human_m": human,
                     "him_ratio": m.add("crows_pairs/him_ratio", cgs[["prefers_m", "prefers_w"]], _him_ratio,
                                        "target", 0.5, "as lm_him_ratio with CGS = P^(1 - sim(gender word, concept))"),
                     "kl": m.add("crows_pairs/kl", used[["cgs_m", "cgs_w"]], _kl, "lower", 0.0,
                                 "as lm_kl on CGS", ci=False),
                     "hb_match": m.add("crows_pairs/hb_match", used, _hb_match, "higher", 1.0,
                                       "as lm_hb_match on CGS", ci=False),
                     "weat": m.add("crows_pairs/weat", with_concept, lambda f: assoc.weat_paper(
                         f["word_m"], f["word_w"], f["concept"], f["hb"], vectors.get), "target", 0.0,
                         "WEAT S(male words, female words; concepts of male-/female-stereotyped pairs)", ci=False),
                     "concept_rows": len(with_concept)})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------- the benchmark
def _validate(opts: dict[str, Any]) -> None:
    bad = [d for d in opts["datasets"] if d not in DATASETS]
    if bad or not opts["datasets"]:
        raise ValueError(f"cloze_gender options.datasets: {bad or 'empty'}; choose from {list(DATASETS)}")
    if opts["sentence_prob"] not in ("geometric", "authors"):
        raise ValueError(f"cloze_gender options.sentence_prob must be geometric|authors, got {opts['sentence_prob']!r}")
    if opts["weat"] not in ("paper", "effect_size"):
        raise ValueError(f"cloze_gender options.weat must be paper|effect_size, got {opts['weat']!r}")
    if opts["vectors"] != "model" and opts["vectors_format"] is None:
        raise ValueError("cloze_gender options: vectors is a file path, so vectors_format (glove|fasttext|word2vec) "
                         "is required")


class ClozeGenderBenchmark:
    name = NAME
    language = "en"

    def run(self, lm: Any, prepared_dir: Path, options: dict[str, Any], ctx: EvalContext) -> BenchmarkResult:
        from biaslab.static_vectors import load_static_vectors

        opts = check_options(NAME, dict(options or {}), DEFAULTS)
        _validate(opts)
        tables, skipped = {}, {}
        for d in opts["datasets"]:
            if d in OPTIONAL_DATASETS and not (Path(prepared_dir) / f"{d}.parquet").is_file():
                skipped[d] = (f"{Path(prepared_dir) / f'{d}.parquet'} not prepared: its source files were not available "
                              "to the prepare stage (see prepare_report.json and docs/cloze_gender.md)")
                continue
            tables[d] = read_table(prepared_dir, d)
        if "crows_pairs" in tables:
            tables["crows_pairs"] = crows_items(tables["crows_pairs"], read_table(prepared_dir, "gender_pairs"))
        concepts = read_concepts(opts["crows_concepts"]) if opts["crows_concepts"] else None
        if not tables:
            return BenchmarkResult({}, tables={f"cloze_gender_{d}_skipped": pd.DataFrame({"reason": [r]})
                                               for d, r in skipped.items()})
        male_attr, female_attr = list(opts["male_attributes"]), list(opts["female_attributes"])

        # 1. requests: ClozeLast pronouns (one call) and whole sentences (one call)
        items = cloze_items(tables["genderlex"]) if "genderlex" in tables else None
        cloze_scores = score_cloze(lm, items) if items is not None else []
        sentences: list[str] = []
        if "winobias" in tables:
            sentences += list(tables["winobias"]["pro_sentence"]) + list(tables["winobias"]["anti_sentence"])
        if "winogender" in tables:
            wg = tables["winogender"]
            sentences += list(wg["sentence_male"]) + list(wg["sentence_female"]) + list(wg["sentence_neutral"])
        for d in ("genderlex_wino", "crows_pairs"):
            if d in tables:
                sentences += list(tables[d]["sent_m"]) + list(tables[d]["sent_w"])
        sent_scores = score_sentences(lm, sentences, opts["sentence_prob"])

        # 2. static vectors for every word sim() or WEAT needs
        words = set(male_attr) | set(female_attr) if opts["weat"] == "effect_size" else set()
        if items is not None:
            words |= set(items["pronoun_m"]) | set(items["pronoun_w"]) | set(items["context"])
        if "winobias" in tables:
            wb = tables["winobias"]
            words |= set(wb["pro_pronoun"]) | set(wb["anti_pronoun"]) | {o for o in wb["occupation"] if o}
        if "genderlex_wino" in tables:
            gw = tables["genderlex_wino"]
            words |= set(gw["pronoun_m"]) | set(gw["pronoun_w"]) | set(gw["context"])
        if "crows_pairs" in tables and concepts is not None:
            words |= set(tables["crows_pairs"]["word_m"]) | set(tables["crows_pairs"]["word_w"]) | set(concepts.values())
        vectors = load_static_vectors(opts["vectors"], opts["vectors_format"], words, lm)

        # 3. predictions and metrics
        metrics = _Metrics(ctx)
        result = BenchmarkResult(metrics.values)
        if items is not None:
            n = len(items)
            pred = genderlex_predictions(items, cloze_scores[:n], cloze_scores[n:], vectors)
            result.predictions["cloze_gender_genderlex"] = pred
            result.tables["cloze_gender_genderlex"] = genderlex_metrics(pred, vectors, opts, metrics)
        if "genderlex_wino" in tables:
            pred = wino_predictions(tables["genderlex_wino"], sent_scores, vectors)
            result.predictions["cloze_gender_genderlex_wino"] = pred
            result.tables["cloze_gender_genderlex_wino"] = genderlex_metrics(
                pred, vectors, opts, metrics, dataset="genderlex_wino", group="dataset")
        if "crows_pairs" in tables:
            pred = crows_predictions(tables["crows_pairs"], sent_scores, vectors, concepts)
            result.predictions["cloze_gender_crows"] = pred
            result.tables["cloze_gender_crows"] = crows_metrics(pred, vectors, opts, metrics)
        for d, reason in skipped.items():
            result.tables[f"cloze_gender_{d}_skipped"] = pd.DataFrame({"reason": [reason]})
        if "winobias" in tables:
            pred = winobias_predictions(tables["winobias"], sent_scores, vectors)
            result.predictions["cloze_gender_winobias"] = pred
            result.tables["cloze_gender_winobias"] = winobias_metrics(pred, metrics)
        if "winogender" in tables:
            pred = winogender_predictions(tables["winogender"], sent_scores)
            result.predictions["cloze_gender_winogender"] = pred
            result.tables["cloze_gender_winogender_occupations"] = winogender_metrics(pred, metrics)
        return result

    def paper_tables(self, variants):
        """The paper's Tables 2, 4 and 5 for every evaluated variant (:mod:`biaslab.benchmarks.cloze_gender_paper`)."""
        from biaslab.benchmarks.cloze_gender_paper import paper_tables

        return paper_tables(variants)


BENCHMARK = ClozeGenderBenchmark()
