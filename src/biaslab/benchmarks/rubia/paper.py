"""RuBia paper (Grigoreva et al., LREC-COLING 2024), Table 1, for every evaluated variant.

Rows as in the paper: one section per domain ("Gender bias + PPLL scoring", ...), each with its Overall
row and its subdomains under the paper's names (:data:`biaslab.benchmarks.rubia.PAPER_TABLE_1`; the
merged rows "Freeform" of nationality and "Stereo.wealth" included). Columns: one per variant, scores
x100 as in the paper. The published frame is the paper's Table 1 for its six masked LMs.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from biaslab.benchmarks.base import PaperTable, VariantEvaluation

PAPER = "rubia"
TABLE = "rubia_scores"  # the benchmark's table (reports/tables/<variant>/rubia__rubia_scores.csv)
REPRODUCE = "dvc exp run -S model.source=ai-forever/ruBert-large -S model.dtype=float32"

# The paper's Table 1 (scores x100); column order RemBERT, XLM-R, BERT, BERT_conv, BERT_large, RoBERTa.
# (The text-extracted header is garbled; the order follows the paper's discussion of each column.)
PUBLISHED_MODELS = ("RemBERT", "XLM-R", "BERT", "BERT_conv", "BERT_large", "RoBERTa")
PUBLISHED = {
    ("gender", "Overall"): (61.3, 57.1, 62.0, 58.8, 58.7, 66.7),
    ("gender", "Family.cont."): (59.1, 49.6, 62.4, 45.9, 55.4, 60.3),
    ("gender", "Freeform"): (60.5, 58.6, 64.5, 52.0, 62.5, 71.7),
    ("gender", "Gen.pronouns"): (64.2, 51.3, 56.6, 59.3, 53.5, 66.4),
    ("gender", "Prof.cont."): (45.7, 68.0, 58.3, 72.0, 57.7, 64.0),
    ("gender", "Prof.cont.pos"): (85.3, 71.8, 59.6, 67.9, 56.4, 78.8),
    ("gender", "Stereotypes"): (78.6, 52.9, 81.4, 68.6, 78.6, 80.0),
    ("gender", "Sep.pos."): (44.1, 48.8, 65.4, 55.9, 63.0, 55.1),
    ("nationality", "Overall"): (57.0, 47.9, 61.9, 53.7, 55.1, 63.3),
    ("nationality", "Antisemitism"): (58.7, 44.3, 61.1, 47.3, 53.3, 70.7),
    ("nationality", "Immigrant"): (60.2, 37.3, 65.1, 50.6, 61.4, 54.2),
    ("nationality", "Freeform"): (50.6, 55.1, 68.6, 55.8, 58.3, 62.2),
    ("nationality", "Stereotypes"): (59.6, 50.0, 54.8, 59.6, 50.6, 61.4),
    ("class", "Overall"): (59.2, 58.5, 64.6, 59.5, 61.3, 67.5),
    ("class", "Freeform"): (42.7, 57.3, 63.1, 53.4, 61.2, 51.5),
    ("class", "Prof.status"): (54.9, 60.8, 58.8, 58.2, 56.2, 71.9),
    ("class", "Stereo.wealth"): (53.7, 53.7, 52.9, 54.5, 59.5, 60.3),
    ("lgbtq", "Overall"): (46.6, 61.1, 65.6, 58.5, 62.8, 71.0),
    ("lgbtq", "Sexuality"): (45.6, 67.5, 71.1, 67.5, 72.8, 82.5),
    ("lgbtq", "Identity"): (42.0, 59.4, 75.4, 55.1, 60.9, 56.5),
    ("lgbtq", "Stereotypes"): (51.4, 59.5, 56.8, 58.1, 58.1, 66.2),
    ("lgbtq", "Represented"): (47.4, 55.8, 58.9, 50.5, 55.8, 71.6),
    ("lgbtq", "Gendergap*"): (98.2, 96.4, 97.3, 99.1, 97.3, 98.2),
}

NOTES = """Scores are the share of pairs where the pro-trope sentence is preferred, x100 (50 = no preference).
Overall rows leave out the `*_stereotype` copies and Gendergap* (as the paper and the authors' code).
Nationality "Freeform" = `freeform_full` + `freeform_enemy`; "Stereo.wealth" = `template_poor` + `template_rich`
(merged as in the authors' notebook). The paper scores masked LMs only (PPLL for gender and Gendergap, MPLL
elsewhere); a causal model is scored with its sentence log-likelihood. The paper says the data were lower-cased;
the released file is not (option `lowercase`)."""


def table_1(variants: Mapping[str, VariantEvaluation]) -> PaperTable:
    from biaslab.benchmarks.rubia.metrics import PAPER_TABLE_1

    index = [(section, row) for section, _, rows in PAPER_TABLE_1 for row, _ in rows]
    frame = pd.DataFrame(index=pd.MultiIndex.from_tuples(index, names=["section", "row"]))
    for variant, evaluation in variants.items():
        scores = evaluation.tables.get(TABLE)
        if scores is None:
            continue
        by_key = {(d, s): v for d, s, v in zip(scores["domain"], scores["subdomain"], scores["pro_share"])}
        frame[variant] = [100 * by_key.get((domain, sub), float("nan"))
                          for _, domain, rows in PAPER_TABLE_1 for _, sub in rows]
    published = pd.DataFrame(
        [PUBLISHED[(domain, row)] for _, domain, rows in PAPER_TABLE_1 for row, _ in rows],
        index=frame.index, columns=list(PUBLISHED_MODELS),
    )
    return PaperTable(paper=PAPER, key="table_1", title="Table 1: pro-trope preference by domain and subdomain (x100)",
                      frame=frame, published=published, published_source="Table 1 of the paper, masked LMs",
                      notes=NOTES, reproduce=REPRODUCE)


def paper_tables(variants: Mapping[str, VariantEvaluation]) -> list[PaperTable]:
    return [table_1(variants)]
