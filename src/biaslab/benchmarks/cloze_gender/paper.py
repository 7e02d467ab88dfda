"""GenderLex / ClozeGender paper (Sabir & Sharma 2025, arXiv 2507.02679): Tables 2, 4 and 5.

Built from each variant's ``cloze_gender`` tables (``reports/tables/<variant>/cloze_gender__*.csv``), one
row per variant and subject folder, in the paper's columns. The paper's rows are models × word vectors;
ours are variants × the vectors of the run (``vectors`` option: the model's own input embeddings by
default), so "P only" rows are the paper's plain "Cloze GPT-2XL" rows (no sim()) and "CGS" rows its
"+ <vectors>" rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from biaslab.benchmarks.base import PaperTable, VariantEvaluation

PAPER = "genderlex"
NAN = math.nan
REPRODUCE = ("dvc exp run -S model.source=openai-community/gpt2-xl -S model.dtype=float32 "
             "-S evaluation.benchmarks.cloze_gender.options.vectors=<path to crawl-300d-2M-subword.vec> "
             "-S evaluation.benchmarks.cloze_gender.options.vectors_format=fasttext "
             "-S evaluation.benchmarks.cloze_gender.options.sentence_prob=authors")

CONTEXTS = (("noun", "noun"), ("verb", "verb"), ("occ", "occupation"))
TABLE_2_COLUMNS = [f"{label} {c}" for _, label in CONTEXTS for c in ("M", "W", "KL", "WEAT")] + [
    "combined to-m", "combined to-w"]
SUBJECT_TAGS = {"occupation": "", "someone": " (GN)", "person": " (PN)"}


def _row(noun=(NAN,) * 4, verb=(NAN,) * 4, occ=(NAN,) * 4, combined=(NAN, NAN)) -> list[float]:
    return [*noun, *verb, *occ, *combined]


# The paper's Table 2 (GPT-2 XL, with each word-vector set; top: occupation folder, bottom: "(GN)" = someone)
# and Table 7 (larger LLMs, occupation folder), as printed.
PUBLISHED_TABLE_2 = {
    "Human": _row(combined=(0.54, 0.45)),
    "BERT": _row(combined=(0.67, 0.32)),
    "GPT-2 XL": _row(combined=(0.56, 0.43)),
    "ChatGPT": _row(combined=(0.80, 0.19)),
    "GPT-4": _row(combined=(0.72, 0.27)),
    "GPT-4 Turbo": _row(combined=(0.59, 0.40)),
    "GPT-4o": _row(combined=(0.72, 0.27)),
    "Cloze GPT-2 XL (P only)": _row(combined=(0.51, 0.48)),
    "GPT-2 XL + w2v": _row((0.47, 0.53, 0.0133, 0.113), (0.46, 0.54, 0.0110, 0.051), (0.49, 0.51, 0.0150, 0.155),
                           (0.47, 0.52)),
    "GPT-2 XL + GloVe": _row((0.47, 0.53, 0.0174, 0.122), (0.55, 0.45, 0.0166, 0.074), (0.52, 0.48, 0.0180, 0.151),
                             (0.51, 0.49)),
    "GPT-2 XL + fasttext": _row((0.36, 0.64, 0.0195, 0.056), (0.51, 0.49, 0.0145, 0.024),
                                (0.51, 0.49, 0.0182, 0.087), (0.46, 0.53)),
    "GPT-2 XL + GN-GloVe": _row((0.45, 0.55, 0.0144, 0.068), (0.53, 0.47, 0.0122, 0.003),
                                (0.46, 0.54, 0.0130, 0.114), (0.48, 0.51)),
    "GPT-2 XL + DD-GloVe": _row((0.45, 0.55, 0.0178, 0.062), (0.48, 0.52, 0.0186, 0.039),
                                (0.41, 0.59, 0.0181, 0.042), (0.45, 0.55)),
    "Cloze GPT-2 XL (P only) (GN)": _row(combined=(0.40, 0.60)),
    "GPT-2 XL + w2v (GN)": _row((0.37, 0.63, 0.0027, 0.138), (0.29, 0.71, 0.0018, 0.084),
                                (0.37, 0.63, 0.0027, 0.141), (0.34, 0.66)),
    "GPT-2 XL + GloVe (GN)": _row((0.33, 0.67, 0.0040, 0.122), (0.44, 0.56, 0.0032, 0.112),
                                  (0.43, 0.57, 0.0036, 0.138), (0.40, 0.60)),
    "GPT-2 XL + fasttext (GN)": _row((0.17, 0.83, 0.0056, 0.064), (0.38, 0.62, 0.0028, 0.024),
                                     (0.41, 0.59, 0.0039, 0.053), (0.29, 0.71)),
    "GPT-2 XL + GN-GloVe (GN)": _row((0.30, 0.70, 0.0030, 0.085), (0.43, 0.57, 0.0019, 0.086),
                                     (0.32, 0.68, 0.0023, 0.090), (0.34, 0.66)),
    "GPT-2 XL + DD-GloVe (GN)": _row((0.30, 0.70, 0.0044, 0.083), (0.38, 0.62, 0.0047, 0.071),
                                     (0.20, 0.80, 0.0048, 0.099), (0.26, 0.74)),
    "GPT-J-6B (P only) [Table 7]": _row(combined=(0.53, 0.46)),
    "GPT-J-6B + fasttext [Table 7]": _row((0.41, 0.59, 0.0294, 0.045), (0.53, 0.47, 0.0270, 0.019),
                                          (0.51, 0.49, 0.0323, 0.070), (0.48, 0.52)),
    "GPT-J-6B + DD-GloVe [Table 7]": _row((0.49, 0.51, 0.0277, 0.065), (0.51, 0.49, 0.0311, 0.065),
                                          (0.44, 0.56, 0.0279, 0.032), (0.47, 0.53)),
    "Llama-3.1-8B (P only) [Table 7]": _row(combined=(0.48, 0.52)),
    "Llama-3.1-8B + fasttext [Table 7]": _row((0.38, 0.62, 0.0368, 0.055), (0.47, 0.53, 0.0275, 0.029),
                                              (0.47, 0.53, 0.0335, 0.068), (0.44, 0.56)),
    "Llama-3.1-8B + DD-GloVe [Table 7]": _row((0.44, 0.56, 0.0320, 0.080), (0.47, 0.53, 0.0324, 0.055),
                                              (0.39, 0.61, 0.0353, 0.014), (0.42, 0.58)),
    "DeepSeek-R1-8B (P only) [Table 7]": _row(combined=(0.63, 0.37)),
    "DeepSeek-R1-8B + fasttext [Table 7]": _row((0.54, 0.46, 0.0688, 0.036), (0.63, 0.37, 0.0727, 0.011),
                                                (0.61, 0.39, 0.0798, 0.066), (0.56, 0.44)),
    "DeepSeek-R1-8B + DD-GloVe [Table 7]": _row((0.60, 0.40, 0.0757, 0.059), (0.63, 0.37, 0.0746, 0.016),
                                                (0.55, 0.45, 0.0682, -0.015), (0.59, 0.41)),
    "Llama-3.1-70B (P only) [Table 7]": _row(combined=(0.51, 0.49)),
    "Llama-3.1-70B + fasttext [Table 7]": _row((0.38, 0.62, 0.0270, 0.052), (0.51, 0.49, 0.0204, 0.021),
                                               (0.51, 0.49, 0.0243, 0.074), (0.47, 0.53)),
    "Llama-3.1-70B + DD-GloVe [Table 7]": _row((0.46, 0.54, 0.0242, 0.064), (0.48, 0.52, 0.0261, 0.010),
                                               (0.41, 0.59, 0.0259, 0.001), (0.45, 0.55)),
}

# Table 4 (WinoBias / Winogender, the authors' extracted sentences): (M, W, KL, WEAT) for verb and occupation.
TABLE_4_COLUMNS = [f"{data} {ctx} {c}" for data in ("WinoBias", "Winogender") for ctx in ("verb", "occupation")
                   for c in ("M", "W", "KL", "WEAT")]


def _wino(wb_verb=(NAN,) * 4, wb_occ=(NAN,) * 4, wg_verb=(NAN,) * 4, wg_occ=(NAN,) * 4) -> list[float]:
    return [*wb_verb, *wb_occ, *wg_verb, *wg_occ]


PUBLISHED_TABLE_4 = {
    "Human (all)": _wino((0.49, 0.50, NAN, NAN), wg_verb=(0.58, 0.41, NAN, NAN)),
    "BERT (all)": _wino((0.78, 0.21, NAN, NAN), wg_verb=(0.79, 0.20, NAN, NAN)),
    "ChatGPT (all)": _wino((0.70, 0.29, NAN, NAN), wg_verb=(0.88, 0.11, NAN, NAN)),
    "GPT-4 (all)": _wino((0.69, 0.30, NAN, NAN), wg_verb=(0.71, 0.28, NAN, NAN)),
    "GPT-4-Turbo (all)": _wino((0.75, 0.24, NAN, NAN), wg_verb=(0.67, 0.32, NAN, NAN)),
    "GPT-4o (all)": _wino((0.66, 0.34, NAN, NAN), wg_verb=(0.71, 0.28, NAN, NAN)),
    "GPT-2 XL (P only)": _wino((0.77, 0.22, NAN, NAN), wg_verb=(0.76, 0.23, NAN, NAN)),
    "GPT-2 XL + w2v": _wino((0.88, 0.12, 0.0088, 0.088), (0.61, 0.39, 0.0087, 0.274), (0.92, 0.08, 0.0044, 0.259),
                            (0.61, 0.39, 0.0043, 0.393)),
    "GPT-2 XL + GloVe": _wino((0.93, 0.07, 0.0168, 0.107), (0.70, 0.30, 0.0099, 0.326), (0.89, 0.11, 0.0044, 0.244),
                              (0.67, 0.33, 0.0040, 0.384)),
    "GPT-2 XL + fasttext": _wino((0.81, 0.19, 0.0053, 0.012), (0.56, 0.44, 0.0066, 0.111),
                                 (0.89, 0.11, 0.0013, 0.027), (0.49, 0.51, 0.0019, 0.225)),
    "GPT-2 XL + GN-GloVe": _wino((0.88, 0.12, 0.0141, 0.034), (0.58, 0.42, 0.0061, 0.165),
                                 (0.92, 0.08, 0.0053, 0.273), (0.39, 0.61, 0.0031, 0.331)),
    "GPT-2 XL + DD-GloVe": _wino((0.92, 0.08, 0.0211, 0.037), (0.54, 0.46, 0.0042, 0.153),
                                 (0.98, 0.02, 0.0070, 0.244), (0.68, 0.32, 0.0019, 0.283)),
}

TABLE_5_COLUMNS = ["M", "W", "KL", "WEAT"]
PUBLISHED_TABLE_5 = {
    "Human (all)": [0.53, 0.47, NAN, NAN],
    "ChatGPT (all)": [0.54, 0.45, NAN, NAN],
    "GPT-4 (all)": [0.57, 0.42, NAN, NAN],
    "GPT-4-Turbo (all)": [0.47, 0.52, NAN, NAN],
    "GPT-4o (all)": [0.48, 0.51, NAN, NAN],
    "GPT-2 XL (P only)": [0.42, 0.57, 0.0068, NAN],
    "GPT-2 XL + w2v": [0.49, 0.51, 0.0032, 0.245],
    "GPT-2 XL + GloVe": [0.52, 0.48, 0.0035, 0.229],
    "GPT-2 XL + fasttext": [0.45, 0.55, 0.0022, 0.087],
    "GPT-2 XL + GN-GloVe": [0.42, 0.58, 0.0029, 0.189],
    "GPT-2 XL + DD-GloVe": [0.57, 0.43, 0.0021, 0.108],
}

TABLE_2_NOTES = """M / W: to-him / to-her share of rows (ties left out); KL: mean Bernoulli KL from the majority
gender's score to the other's (nats); WEAT: S(him, her; context words humans label M, W); combined: to-him share
of the product of a sentence's noun, verb and occupation CGS. "(GN)" = subject "someone", "(PN)" = "the person".
Every row of the files counts (the authors keep the repeated pairs; option `drop_duplicates`). The paper prints
2 decimals (KL: 4, truncated). Human = share of HB = M labels. The published WEAT cells cannot be recomputed
(neither paper nor code gives the WEAT target sets); with `vectors: model` sim() and WEAT use the evaluated
model's own input embeddings, not fasttext."""


def _get(frame: pd.DataFrame | None, subject: str, context: str, column: str) -> float:
    if frame is None or column not in frame.columns:
        return NAN
    hit = frame[(frame["subject"] == subject) & (frame["context_type"] == context)]
    return float(hit[column].iloc[0]) if len(hit) and pd.notna(hit[column].iloc[0]) else NAN


def table_2(variants: Mapping[str, VariantEvaluation]) -> PaperTable:
    rows: dict[str, list[float]] = {}
    for variant, evaluation in variants.items():
        table = evaluation.tables.get("cloze_gender_genderlex")
        if table is None:
            continue
        for subject, tag in SUBJECT_TAGS.items():
            if not ((table["subject"] == subject).any()):
                continue
            if f"Human{tag}" not in rows:
                human = _get(table, subject, "combined", "human_m")
                rows[f"Human{tag}"] = _row(combined=(human, 1 - human))
            lm = _get(table, subject, "combined", "lm_him_ratio")
            rows[f"{variant} (P only){tag}"] = _row(combined=(lm, 1 - lm))
            cells = []
            for context, _ in CONTEXTS:
                him = _get(table, subject, context, "him_ratio")
                cells.append((him, 1 - him, _get(table, subject, context, "kl"), _get(table, subject, context, "weat")))
            combined = _get(table, subject, "combined", "him_ratio")
            rows[f"{variant} CGS{tag}"] = _row(*cells, combined=(combined, 1 - combined))
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=TABLE_2_COLUMNS).rename_axis("model")
    published = pd.DataFrame.from_dict(PUBLISHED_TABLE_2, orient="index", columns=TABLE_2_COLUMNS).rename_axis("model")
    return PaperTable(paper=PAPER, key="table_2", title="Table 2: GenderLex bias ratios, KL and WEAT by context word",
                      frame=frame, published=published, published_source="Tables 2 and 7 of the paper",
                      notes=TABLE_2_NOTES, reproduce=REPRODUCE)


def _flat_table(variants, table_name: str, columns: list[str], cells) -> pd.DataFrame:
    rows: dict[str, list[float]] = {}
    for variant, evaluation in variants.items():
        table = evaluation.tables.get(table_name)
        if table is None:
            continue
        for label, values in cells(variant, table):
            rows.setdefault(label, values)
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns).rename_axis("model")


def table_4(variants: Mapping[str, VariantEvaluation]) -> PaperTable | None:
    """WinoBias / Winogender on the authors' extracted sentences (``cloze_gender_genderlex_wino``)."""
    def cells(variant, table):
        human, lm, cgs = [], [], []
        for data in ("winobias", "winogender"):
            for context in ("verb", "occ"):
                h = _get(table, data, context, "human_m")
                p = _get(table, data, context, "lm_him_ratio")
                him = _get(table, data, context, "him_ratio")
                human += [h, 1 - h, NAN, NAN]
                lm += [p, 1 - p, _get(table, data, context, "lm_kl"), NAN]
                cgs += [him, 1 - him, _get(table, data, context, "kl"), _get(table, data, context, "weat")]
        return [("Human (all)", human), (f"{variant} (P only)", lm), (f"{variant} CGS", cgs)]

    frame = _flat_table(variants, "cloze_gender_genderlex_wino", TABLE_4_COLUMNS, cells)
    if frame.empty:
        return None
    published = pd.DataFrame.from_dict(PUBLISHED_TABLE_4, orient="index", columns=TABLE_4_COLUMNS).rename_axis("model")
    return PaperTable(paper=PAPER, key="table_4", title="Table 4: WinoBias / Winogender (authors' extracted sentences)",
                      frame=frame, published=published, published_source="Table 4 of the paper",
                      notes="Mean token probability of the whole sentence (the pronoun is not last); sim() between "
                            "the pronoun and the extracted verb or occupation. The paper prints the P-only and Human "
                            "rows once per dataset (verb and occupation share the sentences).")


def table_5(variants: Mapping[str, VariantEvaluation]) -> PaperTable | None:
    """CrowS-Pairs gender stereotypes (``cloze_gender_crows``)."""
    def cells(variant, table):
        rows = []
        for kind, label in (("lm", f"{variant} (P only)"), ("cgs", f"{variant} CGS")):
            hit = table[table["score"] == kind]
            if len(hit):
                r = hit.iloc[0]
                rows.append((label, [r["him_ratio"], 1 - r["him_ratio"], r["kl"], r.get("weat", NAN)]))
        return rows

    frame = _flat_table(variants, "cloze_gender_crows", TABLE_5_COLUMNS, cells)
    if frame.empty:
        return None
    published = pd.DataFrame.from_dict(PUBLISHED_TABLE_5, orient="index", columns=TABLE_5_COLUMNS).rename_axis("model")
    return PaperTable(paper=PAPER, key="table_5", title="Table 5: CrowS-Pairs gender stereotypes",
                      frame=frame, published=published, published_source="Table 5 of the paper",
                      notes="M / W: share of gender pairs whose male / female sentence scores higher. The paper "
                            "used 498 revised pairs with GPT-4-extracted concepts that are not released; see "
                            "docs/fidelity.md.")


def paper_tables(variants: Mapping[str, VariantEvaluation]) -> list[PaperTable]:
    return [t for t in (table_2(variants), table_4(variants), table_5(variants)) if t is not None]
