"""GBEM-UA scoring: the scorer calls (QA answers, geometric-mean sentence probabilities) and per-pair labels."""

from __future__ import annotations

from typing import Any

import pandas as pd

from biaslab.benchmarks.gbem_ua.items import NAME, PAIR_KEY, QA_PROMPT, prob_sentences
from biaslab.scoring.protocol import GENERATE, unsupported_reason

PROB_LABELS = ("padded", "unpadded")


def score_qa(lm: Any, items: pd.DataFrame, opts: dict[str, Any], desc: str | None) -> pd.DataFrame:
    """Per-item QA table: prompt, parser outputs (``logprob_yes/no`` or ``answer_text``, ``sim_yes/no``)."""
    from biaslab.benchmarks.gbem_ua import qa_parsers

    prompts = [QA_PROMPT + s for s in items["qa_sentence"]]
    if opts["qa_parser"] == "logprob":
        parsed = qa_parsers.parse_by_logprob(lm, prompts, opts["qa_capitalisation"], desc=desc)
    elif opts["qa_parser"] == "embedding":
        if not opts["encoder"]:
            raise ValueError("gbem_ua: qa_parser 'embedding' needs option 'encoder' (a sentence-encoder directory)")
        if not lm.supports(GENERATE):
            raise ValueError(unsupported_reason(NAME, "generated answers (qa_parser: embedding)", lm))
        encoder = qa_parsers.SentenceEncoder(str(opts["encoder"]), batch_size=int(opts["encoder_batch_size"]))
        parsed = qa_parsers.parse_by_embedding(lm, prompts, encoder, int(opts["max_new_tokens"]), desc=desc,
                                               lowercase=bool(opts["embedding_lowercase"]))
    else:
        raise ValueError(f"gbem_ua: qa_parser must be 'logprob' or 'embedding', got {opts['qa_parser']!r}")
    base = items[["item_id", "group"] + PAIR_KEY + ["is_male", "is_feminitive"]].reset_index(drop=True)
    return pd.concat([base, pd.Series(prompts, name="prompt"), parsed.reset_index(drop=True)], axis=1)


def score_prob(
    lm: Any, items: pd.DataFrame, pairs: pd.DataFrame, pad_with_eos: bool, desc: str | None,
    prob_label: str = "padded",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-item table (unpadded P⁺, P⁻, label) and per-pair table (pair-padded P⁺, P⁻ and labels of both sides).

    One scorer call, ``lm.geometric_mean_probabilities``, for every sentence and every padded pair.
    """
    positive, negative = prob_sentences(items)
    prob = items[["item_id", "group"] + PAIR_KEY + ["is_male", "is_feminitive"]].reset_index(drop=True)
    return score_prob_sentences(lm, prob, positive, negative, pairs, pad_with_eos, desc, prob_label)


def score_prob_sentences(lm: Any, prob: pd.DataFrame, positive: list[str], negative: list[str], pairs: pd.DataFrame,
                         pad_with_eos: bool, desc: str | None, prob_label: str = "padded",
                         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`score_prob` from the items' ``positive`` and ``negative`` sentences (``prob``: one row per item, its
    ``item_id``; filled in place); the benchmark's ``rescore`` gives it the stored sentences of the items a
    sample of ``prob_pairs`` rows names."""
    n = len(prob)
    row_of = {item: k for k, item in enumerate(prob["item_id"])}
    sentence_pairs = []  # per pair: its positive pair, then its negative pair (indices into positive + negative)
    for male_id, female_id in zip(pairs["male_item_id"], pairs["female_item_id"]):
        m, f = row_of[male_id], row_of[female_id]
        sentence_pairs += [(m, f), (n + m, n + f)]
    result = sentence_probabilities(lm, prob, positive, negative, sentence_pairs, pad_with_eos, desc)
    prob["label"] = prob["p_pos"] > prob["p_neg"]

    label = prob.set_index("item_id")["label"]
    table = pairs.reset_index(drop=True).copy()
    for index, polarity in ((0, "pos"), (1, "neg")):
        padded = result.pairs[index::2]
        for side, k in (("male", 0), ("female", 1)):
            table[f"{polarity}_{side}_eos_pad"] = [pair[k].n_pad for pair in padded]
            table[f"p_{polarity}_{side}"] = [pair[k].probability for pair in padded]
    return prob, pair_labels(table, label, prob_label)


def sentence_probabilities(lm: Any, prob: pd.DataFrame, positive: list[str], negative: list[str],
                           sentence_pairs: list[tuple[int, int]], pad_with_eos: bool, desc: str | None) -> Any:
    """Score ``positive + negative`` (and the pair-padded ``sentence_pairs``) in one scorer call,
    ``lm.geometric_mean_probabilities``; write ``<pos|neg>_sentence``, ``_logprob``, ``_n_tokens`` and ``p_<pos|neg>``
    into ``prob`` (one row per item) and return the scorer's result. :func:`score_prob` and the benchmark's
    ``rescore`` (the stored sentences of sampled ``prob`` rows, no pairs) share it."""
    n = len(positive)
    result = lm.geometric_mean_probabilities(positive + negative, sentence_pairs, pad_with_eos, desc=desc)
    for offset, polarity, sentences in ((0, "pos", positive), (n, "neg", negative)):
        prob[f"{polarity}_sentence"] = sentences
        prob[f"{polarity}_logprob"] = [result.sentences[offset + k].logprob for k in range(n)]
        prob[f"{polarity}_n_tokens"] = [result.sentences[offset + k].n_tokens for k in range(n)]
        prob[f"p_{polarity}"] = [result.geometric_mean(offset + k) for k in range(n)]
    return result


def pair_labels(table: pd.DataFrame, unpadded: pd.Series, rule: str) -> pd.DataFrame:
    """``label_male`` / ``label_female`` (P⁺ > P⁻) of each pair: from the pair-padded columns (``padded``,
    the authors' ``compute_difference``) or the items' unpadded labels (``unpadded``, indexed by item id)."""
    if rule not in PROB_LABELS:
        raise ValueError(f"gbem_ua option prob_label must be one of {PROB_LABELS}, got {rule!r}")
    table = table.copy()
    for side in ("male", "female"):
        if rule == "padded":
            table[f"label_{side}"] = table[f"p_pos_{side}"].to_numpy() > table[f"p_neg_{side}"].to_numpy()
        else:
            table[f"label_{side}"] = unpadded.loc[table[f"{side}_item_id"]].to_numpy()
    return table


def qa_pair_table(qa: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Pairs with the male and female QA answers side by side; with the ``logprob`` parser also each side's
    log-odds of the answer, ``logodds = log P(так) − log P(ні)`` (nats)."""
    by_item = qa.set_index("item_id")
    table = pairs.reset_index(drop=True).copy()
    for side in ("male", "female"):
        ids = table[f"{side}_item_id"]
        table[f"answer_yes_{side}"] = by_item["answer_yes"].loc[ids].to_numpy()
        if {"logprob_yes", "logprob_no"} <= set(by_item.columns):
            table[f"logodds_{side}"] = (by_item["logprob_yes"] - by_item["logprob_no"]).loc[ids].to_numpy()
    return table
