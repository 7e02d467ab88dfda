"""The ClozeGender benchmark: reads its tables, asks the scorer once per request kind, computes every metric."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.benchmarks.base import BenchmarkResult, EvalContext, check_options

from .collector import MetricCollector
from .crows import crows_derived, crows_items, crows_metrics, crows_predictions, read_concepts
from .genderlex import (
    genderlex_item_statistics,
    genderlex_metrics,
    genderlex_predictions,
    spike,
    wino_derived,
    wino_predictions,
)
from .items import cloze_items, read_table
from .options import DEFAULTS, NAME, OPTIONAL_DATASETS, validate
from .scoring import queued_sentences, rescore_cloze, rescore_sentences, score_cloze, score_sentences
from .winobias_winogender import (
    winobias_derived,
    winobias_item_statistics,
    winobias_metrics,
    winobias_predictions,
    winogender_derived,
    winogender_metrics,
    winogender_predictions,
)

# prediction table -> the dataset whose sentences it scores (GenderLex's ClozeLast table aside)
PREDICTION_DATASETS = {f"{NAME}_winobias": "winobias", f"{NAME}_winogender": "winogender",
                       f"{NAME}_genderlex_wino": "genderlex_wino", f"{NAME}_crows": "crows_pairs"}
# prediction table -> how its columns that follow from the stored scores are computed (GenderLex's: spike at 0)
DERIVED = {f"{NAME}_winobias": winobias_derived, f"{NAME}_winogender": winogender_derived,
           f"{NAME}_genderlex_wino": wino_derived, f"{NAME}_crows": crows_derived}
_GENDERLEX = ("sent_m", "sent_w", "context", "hb")  # a GenderLex row's inputs (its two sentences, context, label)


class ClozeGenderBenchmark:
    name = NAME
    language = "en"
    headline = (f"{NAME}/genderlex/him_ratio", f"{NAME}/winobias/pro_share", f"{NAME}/winogender/male_share")
    prepared_files = ("genderlex.parquet", "winobias.parquet", "winogender.parquet", "crows_pairs.parquet",
                      "gender_pairs.parquet")
    # (key columns, input columns) per prediction table: what the promoter requires equal across versions
    rescore_inputs = {
        f"{NAME}_genderlex": (("subject", "context_type", "row"), _GENDERLEX),
        f"{NAME}_genderlex_wino": (("dataset", "context_type", "row"), _GENDERLEX),
        f"{NAME}_winobias": (("pair_id",), ("pro_sentence", "anti_sentence")),
        f"{NAME}_winogender": (("item_id",), ("sentence_male", "sentence_female", "sentence_neutral")),
        f"{NAME}_crows": (("pair_id",), ("sent_m", "sent_w", "hb")),
    }

    def run(self, lm: Any, prepared_dir: Path, options: dict[str, Any], ctx: EvalContext) -> BenchmarkResult:
        from biaslab.scoring.static_vectors import load_static_vectors

        opts = check_options(NAME, dict(options or {}), DEFAULTS)
        validate(opts)
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
        sent_scores = score_sentences(lm, queued_sentences(tables), opts["sentence_prob"])

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
        metrics = MetricCollector(ctx)
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

    def item_statistics(self, options: dict[str, Any]) -> dict[str, Any]:
        """GenderLex's and WinoBias' overall metrics as statistics of per-item rows, for paired model
        comparisons (:mod:`biaslab.metrics.paired`)."""
        opts = check_options(NAME, dict(options or {}), DEFAULTS)
        validate(opts)
        return {**genderlex_item_statistics(opts), **winobias_item_statistics()}

    def spike(self, predictions: dict[str, Any], delta: float, options: dict[str, Any]) -> dict[str, Any]:
        """Its prediction tables with ``delta`` nats on every stereotype-consistent option (GenderLex: the pronoun of the human-bias label; docs/spike_in.md)."""
        return spike(predictions, delta, check_options(NAME, dict(options or {}), DEFAULTS))

    def derive(self, predictions: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
        """Every table's columns that follow from its stored scores and similarities recomputed by the code
        :meth:`run` writes them with (:mod:`biaslab.registry.derived`): GenderLex's P, CGS and preferences
        (:func:`spike` at 0 nats), and the sentence tables' CGS, preferences and matches (:data:`DERIVED`)."""
        out = spike(predictions, 0.0, check_options(NAME, dict(options or {}), DEFAULTS))
        return {table: DERIVED[table](frame) if table in DERIVED else frame for table, frame in out.items()}

    def rescore(self, lm: Any, table: str, rows: pd.DataFrame, options: dict[str, Any],
                tables: dict[str, pd.DataFrame] | None = None) -> dict[str, Any]:
        """The raw scores of stored ``rows``, scored again by :meth:`run`'s own request code (the promoter's
        re-scoring sample, :mod:`biaslab.registry.rescore`): GenderLex's ClozeLast ``logprob_m``/``logprob_w``
        (:func:`~.scoring.rescore_cloze`); the sentence tables' ``logprob_<side>`` and ``p_<side>``/``prob_<side>``
        (:func:`~.scoring.rescore_sentences`, ``sentence_prob`` as the options say: the authors' mean is not a
        function of the log-prob, so both are checked). CGS, preferences and matches follow from them and the
        static vectors."""
        opts = check_options(NAME, dict(options or {}), DEFAULTS)
        validate(opts)
        rows = rows.reset_index(drop=True)
        if table == f"{NAME}_genderlex":
            return rescore_cloze(lm, rows)
        dataset = PREDICTION_DATASETS.get(table)
        return rescore_sentences(lm, rows, dataset, opts["sentence_prob"]) if dataset else {}

    def paper_tables(self, variants):
        """The paper's Tables 2, 4 and 5 for every evaluated variant (:mod:`biaslab.benchmarks.cloze_gender.paper`)."""
        from biaslab.benchmarks.cloze_gender.paper import paper_tables

        return paper_tables(variants)


BENCHMARK = ClozeGenderBenchmark()
