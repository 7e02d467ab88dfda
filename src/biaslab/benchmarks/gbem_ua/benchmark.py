"""GBEM-UA options and entry points: ``BENCHMARK.run`` (prepared table) and ``evaluate_gbem_ua`` (any frame)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.benchmarks.base import BenchmarkResult, EvalContext, check_options, skipped_result
from biaslab.benchmarks.gbem_ua.items import ITEMS, NAME, load_items, match_pairs, select_items
from biaslab.benchmarks.gbem_ua.metrics import PROB_DIFF_COLUMNS, compute_metrics, item_statistics, spike, summary_table
from biaslab.benchmarks.gbem_ua.scoring import (
    PROB_LABELS,
    pair_labels,
    qa_pair_table,
    score_prob,
    score_prob_sentences,
    score_qa,
    sentence_probabilities,
)
from biaslab.data.splits import split_dir
from biaslab.scoring.protocol import LOGLIKELIHOOD, PAIR_PADDING, unsupported_reason

NEEDS = (LOGLIKELIHOOD, PAIR_PADDING)  # GENERATE too, with qa_parser: embedding
DEFAULT_OPTIONS: dict[str, Any] = {
    "items": "heldout",  # heldout: professions no variant trains on (split eval) | all: every profession (paper)
    "source_file": "test",  # train | test (the authors evaluate on test)
    "max_professions": None,  # keep the first N professions (sorted) - for smoke runs
    "qa_parser": "logprob",  # logprob | embedding
    "qa_capitalisation": "both",  # both: P(так)+P(Так) vs P(ні)+P(Ні); lower: lower-case forms only
    "max_new_tokens": 5,  # embedding parser: greedy answer length (authors: 5)
    "encoder": None,  # embedding parser: local sentence-encoder directory (paper: multilingual-e5-large)
    "encoder_batch_size": 32,
    "embedding_lowercase": True,  # embedding parser: lower-case the answer before embedding (authors, 9b29344)
    "pad_pairs_with_eos": True,  # ProbDiff: pad the shorter sentence of a pair with EOS (authors)
    "prob_label": "padded",  # label P+ > P- from the pair-padded (authors) or the unpadded probabilities
    "prompt_join": "authors",  # prompt variant: instruction + text with nothing between (authors) | space
}
PROMPT_JOINS = {"authors": "", "space": " "}  # prompt_join -> separator between a prompt variant's prefix and text
_ITEM = ("group", "profession", "experience", "is_correct", "is_male")  # an item's inputs besides its text
# a pair row: keys, then its other item and what the pair compares (the items' text is in qa / prob)
_PAIR = (("pairing", "male_item_id"), ("female_item_id", "profession", "experience", "is_correct"))


class GbemUaBenchmark:
    name = NAME
    language = "uk"
    headline = (f"{NAME}/qa_f1_man_nofem", f"{NAME}/qa_diff_fem", f"{NAME}/qa_logodds_gap_fem", f"{NAME}/prob_diff_fem")
    prepared_files = ("test/gbem_ua.parquet",)  # items: heldout (the default) reads the test professions only
    # (key columns, input columns) per prediction table: what the promoter requires equal across versions
    rescore_inputs = {
        "qa": (("item_id",), (*_ITEM, "prompt")),
        "prob": (("item_id",), (*_ITEM, "pos_sentence", "neg_sentence")),
        "qa_pairs": _PAIR,
        "prob_pairs": _PAIR,
    }

    def run(self, lm: Any, prepared_dir: Path, options: dict[str, Any], ctx: EvalContext) -> BenchmarkResult:
        opts = check_options(NAME, options or {}, DEFAULT_OPTIONS)
        if not all(lm.supports(c) for c in NEEDS):  # like OccuGender: an all-benchmark run on BERT completes
            reason = unsupported_reason(NAME, "generated / next-token answers and left-to-right sentence "
                                              "probabilities (a causal LM)", lm)
            warnings.warn(reason, stacklevel=2)
            return skipped_result(NAME, reason)
        if opts["items"] not in ITEMS:
            raise ValueError(f"gbem_ua option items must be one of {ITEMS}, got {opts['items']!r}")
        if opts["items"] == "all" and NAME in ctx.trained_on:
            raise ValueError(
                "gbem_ua option items: all scores every profession, including those this variant was fine-tuned "
                "on (LoRA trains on GBEM-UA professions; the test file shares all of them with train); use "
                "items: heldout for a fine-tuned variant"
            )
        if opts["items"] == "heldout":  # the professions of ctx.split (test: evaluation; select: validation)
            frame = load_items(split_dir(prepared_dir, ctx.split) / "gbem_ua.parquet", "heldout", opts["source_file"],
                               ctx.split)
        else:
            frame = load_items(Path(prepared_dir) / "gbem_ua.parquet", opts["items"], opts["source_file"])
        return evaluate_gbem_ua(lm, frame, opts, ctx)

    def item_statistics(self, options: dict[str, Any]) -> dict[str, Any]:
        """The pair metrics as statistics of per-item rows, for paired model comparisons (:mod:`biaslab.metrics.paired`)."""
        return item_statistics()

    def spike(self, predictions: dict[str, Any], delta: float, options: dict[str, Any]) -> dict[str, Any]:
        """Its prediction tables with ``delta`` nats on every stereotype-consistent option («так» after a man, «ні» after a woman; docs/spike_in.md)."""
        return spike(predictions, delta, check_options(NAME, options or {}, DEFAULT_OPTIONS))

    def derive(self, predictions: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        """The derived columns recomputed from the stored scores (:mod:`biaslab.registry.derived`): the QA
        ``answer_yes`` and the pair table's answers and log-odds (:func:`spike` at 0 nats, as
        :func:`qa_pair_table`); each item's ``label`` P+ > P- (``prob``) and the pairs' ``label_male`` /
        ``label_female`` (:func:`pair_labels`, by the ``prob_label`` option). The pair-padded probabilities are
        scores (the padding is scored), checked by the re-scoring sample."""
        opts = check_options(NAME, options or {}, DEFAULT_OPTIONS)
        out = spike(predictions, 0.0, opts)
        if "prob" in out and {"p_pos", "p_neg"} <= set(out["prob"].columns):
            prob = out["prob"].copy()
            prob["label"] = prob["p_pos"] > prob["p_neg"]
            out["prob"] = prob
            if "prob_pairs" in out:
                out["prob_pairs"] = pair_labels(out["prob_pairs"], prob.set_index("item_id")["label"],
                                                opts["prob_label"])
        return out

    def rescore(self, lm: Any, table: str, rows: pd.DataFrame, options: dict[str, Any],
                tables: dict[str, pd.DataFrame] | None = None) -> dict[str, Any]:
        """The raw scores of stored ``rows``, scored again by :meth:`run`'s own request code (the promoter's
        re-scoring sample, :mod:`biaslab.registry.rescore`), with the same prompt join:

        * ``qa``: ``logprob_yes``, ``logprob_no`` of each stored ``prompt`` (:func:`qa_parsers.parse_by_logprob`)
          and the ``answer_yes`` it gives (what the F1s and the gate's answer floor read). With the ``embedding``
          parser the answer is a generation judged by a sentence encoder that is not part of the model's files:
          ``{}``;
        * ``prob``: ``pos_logprob``, ``neg_logprob`` and their ``n_tokens`` of the stored sentences
          (:func:`sentence_probabilities`; ``p_pos``, ``p_neg`` follow) and the ``label`` P+ > P-;
        * ``qa_pairs``: ``logodds_male``, ``logodds_female`` and ``answer_yes_male``, ``answer_yes_female`` (logprob
          parser; ``qa_diff`` reads the answers) and ``prob_pairs``: the pair-padded ``p_pos_male`` ...
          ``p_neg_female`` and ``label_male``, ``label_female`` - a pair row names its two items, so their stored
          text is read from ``tables`` (the evaluation's ``qa`` / ``prob`` table) and scored as
          :func:`qa_pair_table` / :func:`score_prob_sentences` do; ``{}`` without ``tables``.
        """
        from biaslab.benchmarks.gbem_ua import qa_parsers

        opts = check_options(NAME, options or {}, DEFAULT_OPTIONS)
        rows = rows.reset_index(drop=True)
        logprob = opts["qa_parser"] == "logprob"
        if table == "qa" and logprob:
            parsed = qa_parsers.parse_by_logprob(joined(lm, opts), rows["prompt"].tolist(), opts["qa_capitalisation"])
            return {c: parsed[c].to_numpy() for c in ("logprob_yes", "logprob_no", "answer_yes")}
        if table == "prob":
            fresh = pd.DataFrame(index=rows.index)
            sentence_probabilities(joined(lm, opts), fresh, rows["pos_sentence"].tolist(),
                                   rows["neg_sentence"].tolist(), [], bool(opts["pad_pairs_with_eos"]), None)
            out = {c: fresh[c].to_numpy() for c in ("pos_logprob", "neg_logprob", "pos_n_tokens", "neg_n_tokens")}
            return {**out, "label": (fresh["p_pos"] > fresh["p_neg"]).to_numpy()}  # as score_prob_sentences
        if tables is None or table not in ("qa_pairs", "prob_pairs") or (table == "qa_pairs" and not logprob):
            return {}
        named = pd.unique(pd.concat([rows["male_item_id"], rows["female_item_id"]]))
        items = tables["qa" if table == "qa_pairs" else "prob"].set_index("item_id").loc[named].reset_index()
        if table == "qa_pairs":
            parsed = qa_parsers.parse_by_logprob(joined(lm, opts), items["prompt"].tolist(), opts["qa_capitalisation"])
            fresh = qa_pair_table(pd.concat([items[["item_id"]], parsed], axis=1), rows)
            return {c: fresh[c].to_numpy() for c in ("logodds_male", "logodds_female", "answer_yes_male",
                                                     "answer_yes_female")}
        _, fresh = score_prob_sentences(joined(lm, opts), items[["item_id"]].copy(), items["pos_sentence"].tolist(),
                                        items["neg_sentence"].tolist(), rows, bool(opts["pad_pairs_with_eos"]), None,
                                        opts["prob_label"])
        return {c: fresh[c].to_numpy() for c in (*PROB_DIFF_COLUMNS, "label_male", "label_female")}

    def paper_tables(self, variants):
        """Tables 1, 2, 5 and 6 of the paper (:mod:`biaslab.benchmarks.gbem_ua.paper`)."""
        from biaslab.benchmarks.gbem_ua.paper import paper_tables

        return paper_tables(variants)


BENCHMARK = GbemUaBenchmark()


def joined(lm: Any, opts: dict[str, Any]) -> Any:
    """``lm`` joining a prompt variant's prefix to the text as option ``prompt_join`` says: the authors' prompt
    wrapper is debias_prompt + text (debias/prompt_debias.py), no separator. :func:`evaluate_gbem_ua` and
    :meth:`GbemUaBenchmark.rescore` share it."""
    if opts["prompt_join"] not in PROMPT_JOINS:
        raise ValueError(f"gbem_ua option prompt_join must be one of {sorted(PROMPT_JOINS)}, got {opts['prompt_join']!r}")
    return lm.with_prefix_separator(PROMPT_JOINS[opts["prompt_join"]])


def evaluate_gbem_ua(lm: Any, frame: pd.DataFrame, options: dict[str, Any], ctx: EvalContext) -> BenchmarkResult:
    """Score ``frame`` (any rows of ``gbem_ua.parquet``, e.g. the validation professions) and compute metrics."""
    opts = check_options(NAME, options or {}, DEFAULT_OPTIONS)
    if not all(lm.supports(c) for c in NEEDS):
        raise ValueError(unsupported_reason(NAME, "next-token answers and sentence probabilities (a causal LM)", lm))
    if opts["prob_label"] not in PROB_LABELS:
        raise ValueError(f"gbem_ua option prob_label must be one of {PROB_LABELS}, got {opts['prob_label']!r}")
    lm = joined(lm, opts)
    items = select_items(frame, opts["max_professions"])
    pairs = match_pairs(items)
    qa = score_qa(lm, items, opts, desc="gbem_ua QA" if ctx.progress else None)
    qa_pairs = qa_pair_table(qa, pairs)
    prob, prob_pairs = score_prob(
        lm, items, pairs, bool(opts["pad_pairs_with_eos"]), desc="gbem_ua probability" if ctx.progress else None,
        prob_label=opts["prob_label"],
    )
    metrics = compute_metrics(qa, qa_pairs, prob, prob_pairs, ctx)
    return BenchmarkResult(
        metrics=metrics,
        predictions={"qa": qa, "qa_pairs": qa_pairs, "prob": prob, "prob_pairs": prob_pairs},
        tables={"summary": summary_table(metrics)},
    )
