"""OccuGender's Tables 3 and 5 in the paper's layout, for every evaluated variant (``paper_tables``).

* Table 3 - one row per model (here: per variant), columns Explicit/Implicit × female-/male-dominated
  occupations × M/F/D: the mean normalised probability P~_g in percent, no debiasing prompt.
* Table 5 - one block per model (here: per variant), rows None, High 1, 2, Avg, Med. 3, 4, Avg, Low 5, 6,
  Avg: the same twelve cells with each debiasing prompt, and the mean of each abstraction level's two
  prompts (the paper's "Avg" rows; Tables 6 and 8-11 are the same table for the other models).

Both are read from the variant's ``occugender_table`` (written by the evaluate stage), so they need no
model. The paper's own numbers (Table 3; Tables 5, 6, 8-11) are transcribed below from the paper text.
"""

from __future__ import annotations

import io
from collections.abc import Mapping

import pandas as pd

from biaslab.benchmarks.base import PaperTable, VariantEvaluation

PAPER = "occugender"
TABLE = "occugender_table"  # the benchmark's per-variant table (rows = conditions)
GROUP_SHORT = {"female_dominated": "FD", "male_dominated": "MD"}
# value columns in the paper's order: Explicit FD M F D, Explicit MD M F D, Implicit FD ..., Implicit MD ...
CELLS: tuple[tuple[str, str], ...] = tuple(
    (f"{bias}_{group}_{g}", f"{bias.capitalize()} {GROUP_SHORT[group]} {g}")
    for bias in ("explicit", "implicit") for group in ("female_dominated", "male_dominated") for g in "MFD"
)
LABELS = [label for _, label in CELLS]
# Table 5 rows: (Abs., ID) -> condition key of the per-variant table
TABLE5_ROWS: tuple[tuple[str, str, str], ...] = (
    ("", "None", "none"),
    ("High", "1", "1"), ("High", "2", "2"), ("High", "Avg", "high"),
    ("Med.", "3", "3"), ("Med.", "4", "4"), ("Med.", "Avg", "medium"),
    ("Low", "5", "5"), ("Low", "6", "6"), ("Low", "Avg", "low"),
)
NOTES = (
    "Percent. FD / MD = the 20 female- / male-dominated occupations (BLS 2021); M / F / D = mean normalised "
    "probability of male / female / diverse expressions (paper Eq. 1-2). Explicit = prompt 1, implicit = mean "
    "of prompts 2-4. Our rows are the evaluated variants of one model; the paper's rows are its six models. "
    "Scored as the authors' code does by default (occugender options in params.yaml; docs/fidelity.md)."
)
REPRODUCE = (
    "dvc exp run -S 'model.source=meta-llama/Meta-Llama-3-8B' -S 'scoring.dtype=bfloat16' "
    "-S 'evaluation.benchmarks.occugender.options.aggregation=authors'"
)

_TABLE3 = """model,{cols}
Llama-3-8B,52.7,45.8,1.5,81.1,17.1,1.8,30.7,67.2,2.1,89.9,8.4,1.7
Llama-3-8B-Instruct,6.9,86.0,7.1,97.2,0.8,2.1,9.9,85.4,4.8,89.6,4.7,5.7
Mistral-7B,26.2,72.3,1.6,84.1,14.0,2.0,28.3,68.1,3.6,89.2,7.6,3.2
Mistral-7B-Instruct,7.2,70.5,22.3,61.1,3.4,35.4,15.0,77.8,7.3,95.0,1.9,3.1
Llama-2-7B,34.7,64.5,0.8,61.1,37.5,1.4,25.5,72.4,2.2,88.0,9.9,2.0
Llama-2-7B-Instruct,30.0,69.8,0.2,83.1,16.8,0.1,15.0,74.8,10.2,88.1,5.5,6.4
"""

# Tables 5 (Llama-3-8B), 6 (Llama-3-8B-Instruct), 8 (Mistral-7B), 9 (Mistral-7B-Instruct), 10 (Llama-2-7B),
# 11 (Llama-2-7B-Instruct); "Abs." empty on the None row, as printed
_TABLE5 = """model,Abs.,ID,{cols}
Llama-3-8B,,None,52.7,45.8,1.5,81.1,17.1,1.8,30.7,67.2,2.1,89.9,8.4,1.7
Llama-3-8B,High,1,47.2,44.8,8.0,56.4,35.0,8.6,27.6,68.7,3.6,63.3,32.9,3.8
Llama-3-8B,High,2,48.8,49.1,2.1,75.6,21.9,2.5,32.6,65.6,1.9,81.5,16.8,1.7
Llama-3-8B,High,Avg,48.0,46.9,5.1,66.0,28.5,5.5,30.1,67.2,2.7,72.4,24.9,2.7
Llama-3-8B,Med.,3,39.5,36.6,23.9,51.5,25.5,23.0,31.5,60.9,7.6,62.6,29.4,8.0
Llama-3-8B,Med.,4,45.1,45.1,9.9,60.4,29.4,10.2,33.2,60.9,5.9,67.3,27.7,5.0
Llama-3-8B,Med.,Avg,42.3,40.8,16.9,56.0,27.5,16.6,32.4,60.9,6.7,64.9,28.5,6.5
Llama-3-8B,Low,5,27.7,31.3,41.0,28.6,27.8,43.5,30.2,54.4,15.4,49.2,33.5,17.3
Llama-3-8B,Low,6,47.8,43.6,8.6,57.5,34.2,8.3,26.4,62.5,11.1,53.2,34.7,12.1
Llama-3-8B,Low,Avg,37.7,37.4,24.8,43.1,31.0,25.9,28.3,58.4,13.3,51.2,34.1,14.7
Llama-3-8B-Instruct,,None,6.9,86.0,7.1,97.2,0.8,2.1,9.9,85.4,4.8,89.6,4.7,5.7
Llama-3-8B-Instruct,High,1,4.2,12.8,83.0,10.1,25.7,64.2,5.3,81.5,13.2,18.0,61.3,20.7
Llama-3-8B-Instruct,High,2,11.2,72.0,16.8,60.4,27.0,12.6,13.4,78.5,8.0,57.6,33.2,9.3
Llama-3-8B-Instruct,High,Avg,7.7,42.4,49.9,35.3,26.3,38.4,9.4,80.0,10.6,37.8,47.2,15.0
Llama-3-8B-Instruct,Med.,3,0.4,3.5,96.1,0.8,3.7,95.6,5.5,41.7,52.7,7.9,24.9,67.2
Llama-3-8B-Instruct,Med.,4,10.2,38.7,51.2,19.4,35.3,45.4,22.5,62.3,15.2,22.1,61.5,16.3
Llama-3-8B-Instruct,Med.,Avg,5.3,21.1,73.6,10.1,19.5,70.5,14.0,52.0,33.9,15.0,43.2,41.8
Llama-3-8B-Instruct,Low,5,0.4,1.7,97.9,0.6,2.5,97.0,2.0,7.9,90.1,1.4,4.0,94.7
Llama-3-8B-Instruct,Low,6,1.2,10.1,88.7,1.4,12.8,85.9,1.7,14.2,84.0,1.6,6.1,92.2
Llama-3-8B-Instruct,Low,Avg,0.8,5.9,93.3,1.0,7.6,91.4,1.9,11.1,87.1,1.5,5.0,93.5
Mistral-7B,,None,26.2,72.3,1.6,84.1,14.0,2.0,28.3,68.1,3.6,89.2,7.6,3.2
Mistral-7B,High,1,47.8,39.9,12.3,63.3,27.9,8.8,30.4,65.0,4.6,75.8,20.4,3.8
Mistral-7B,High,2,47.8,50.6,1.6,82.9,15.6,1.5,37.3,60.3,2.4,82.6,15.0,2.4
Mistral-7B,High,Avg,47.8,45.2,7.0,73.1,21.8,5.1,33.9,62.6,3.5,79.2,17.7,3.1
Mistral-7B,Med.,3,27.9,51.5,20.6,42.1,32.5,25.4,23.6,64.8,11.6,56.7,30.7,12.6
Mistral-7B,Med.,4,29.4,37.7,33.0,32.9,25.0,42.0,26.8,61.4,11.9,54.6,33.5,11.9
Mistral-7B,Med.,Avg,28.6,44.6,26.8,37.5,28.8,33.7,25.2,63.1,11.7,55.6,32.1,12.3
Mistral-7B,Low,5,36.2,50.0,13.8,45.4,44.1,10.4,25.1,46.6,28.3,33.6,34.9,31.5
Mistral-7B,Low,6,32.5,61.0,6.5,57.9,37.3,4.8,22.1,56.5,21.4,37.8,35.0,27.2
Mistral-7B,Low,Avg,34.3,55.5,10.1,51.7,40.7,7.6,23.6,51.6,24.9,35.7,35.0,29.4
Mistral-7B-Instruct,,None,7.2,70.5,22.3,61.1,3.4,35.4,15.0,77.8,7.3,95.0,1.9,3.1
Mistral-7B-Instruct,High,1,6.3,8.3,85.4,3.2,5.6,91.1,12.5,62.3,25.2,66.1,12.9,20.9
Mistral-7B-Instruct,High,2,18.9,36.9,44.2,27.6,5.9,66.5,16.9,75.3,7.9,85.0,9.3,5.7
Mistral-7B-Instruct,High,Avg,12.6,22.6,64.8,15.4,5.8,78.8,14.7,68.8,16.5,75.6,11.1,13.3
Mistral-7B-Instruct,Med.,3,8.6,43.4,48.0,14.2,23.2,62.6,7.7,39.5,52.8,21.5,9.2,69.3
Mistral-7B-Instruct,Med.,4,9.8,24.3,66.0,16.7,6.9,76.4,8.1,50.8,41.2,28.5,25.2,46.3
Mistral-7B-Instruct,Med.,Avg,9.2,33.8,57.0,15.4,15.1,69.5,7.9,45.1,47.0,25.0,17.2,57.8
Mistral-7B-Instruct,Low,5,2.1,0.2,97.6,0.1,0.1,99.8,0.0,0.0,100.0,0.0,0.0,100.0
Mistral-7B-Instruct,Low,6,4.6,34.4,61.0,7.6,17.1,75.3,0.1,0.8,99.2,0.0,0.2,99.8
Mistral-7B-Instruct,Low,Avg,3.3,17.3,79.3,3.8,8.6,87.6,0.0,0.4,99.6,0.0,0.1,99.9
Llama-2-7B,,None,34.7,64.5,0.8,61.1,37.5,1.4,25.5,72.4,2.2,88.0,9.9,2.0
Llama-2-7B,High,1,40.1,53.6,6.3,53.8,39.3,6.9,23.7,73.4,3.0,65.1,32.2,2.7
Llama-2-7B,High,2,40.1,58.6,1.2,65.4,33.3,1.3,26.2,71.2,2.6,71.6,25.9,2.5
Llama-2-7B,High,Avg,40.1,56.1,3.8,59.6,36.3,4.1,24.9,72.3,2.8,68.3,29.1,2.6
Llama-2-7B,Med.,3,28.3,56.6,15.1,37.3,43.5,19.2,25.6,65.1,9.3,56.9,33.8,9.3
Llama-2-7B,Med.,4,35.3,54.3,10.5,58.3,28.9,12.8,24.3,69.1,6.6,50.5,42.3,7.1
Llama-2-7B,Med.,Avg,31.8,55.4,12.8,47.8,36.2,16.0,24.9,67.1,8.0,53.7,38.0,8.2
Llama-2-7B,Low,5,25.7,55.8,18.5,36.8,43.1,20.1,24.0,61.8,14.2,47.5,36.9,15.6
Llama-2-7B,Low,6,26.4,42.0,31.6,30.8,30.7,38.5,32.3,56.9,10.8,55.6,33.0,11.4
Llama-2-7B,Low,Avg,26.0,48.9,25.1,33.8,36.9,29.3,28.1,59.4,12.5,51.5,35.0,13.5
Llama-2-7B-Instruct,,None,30.0,69.8,0.2,83.1,16.8,0.1,15.0,74.8,10.2,88.1,5.5,6.4
Llama-2-7B-Instruct,High,1,24.8,73.3,1.9,54.6,44.1,1.3,16.3,71.5,12.2,60.1,26.1,13.8
Llama-2-7B-Instruct,High,2,30.8,68.8,0.4,84.2,15.7,0.2,20.0,65.1,14.9,70.3,15.4,14.3
Llama-2-7B-Instruct,High,Avg,27.8,71.1,1.1,69.4,29.9,0.7,18.1,68.3,13.6,65.2,20.7,14.0
Llama-2-7B-Instruct,Med.,3,18.9,57.2,23.9,46.0,35.9,18.1,22.9,46.4,30.7,43.6,19.4,37.0
Llama-2-7B-Instruct,Med.,4,28.5,69.3,2.1,79.6,19.6,0.8,25.4,50.3,24.3,47.8,25.0,27.3
Llama-2-7B-Instruct,Med.,Avg,23.7,63.3,13.0,62.8,27.8,9.4,24.2,48.4,27.5,45.7,22.2,32.2
Llama-2-7B-Instruct,Low,5,6.5,52.2,41.3,18.9,44.7,36.5,18.7,38.2,43.1,34.9,18.5,46.5
Llama-2-7B-Instruct,Low,6,22.7,46.0,31.2,37.0,35.5,27.5,17.2,24.5,58.3,27.1,12.4,60.5
Llama-2-7B-Instruct,Low,Avg,14.6,49.1,36.3,27.9,40.1,32.0,18.0,31.3,50.7,31.0,15.5,53.5
"""


def _published(text: str) -> pd.DataFrame:
    frame = pd.read_csv(io.StringIO(text.format(cols=",".join(LABELS))), dtype={"Abs.": str, "ID": str},
                        keep_default_na=False)
    return frame


def published_table3() -> pd.DataFrame:
    """The paper's Table 3 (percent): ``model`` + the twelve cells."""
    return _published(_TABLE3)


def published_table5() -> pd.DataFrame:
    """The paper's Tables 5, 6 and 8-11 (percent): ``model``, ``Abs.``, ``ID`` + the twelve cells."""
    return _published(_TABLE5)


def _condition_rows(variants: Mapping[str, VariantEvaluation]) -> dict[str, pd.DataFrame]:
    """variant -> its ``occugender_table`` indexed by condition (variants without one are left out)."""
    out = {}
    for name, evaluation in variants.items():
        table = evaluation.tables.get(TABLE)
        if table is None or table.empty or "condition" not in table.columns:
            continue
        out[name] = table.assign(condition=table["condition"].astype(str)).set_index("condition")
    return out


def table3(variants: Mapping[str, VariantEvaluation]) -> pd.DataFrame:
    """Rows = variants; the twelve cells of the no-debiasing condition."""
    records = []
    for name, table in _condition_rows(variants).items():
        if "none" in table.index:
            records.append({"variant": name, **{label: float(table.loc["none", key]) for key, label in CELLS}})
    return pd.DataFrame(records, columns=["variant", *LABELS])


def table5(variants: Mapping[str, VariantEvaluation]) -> pd.DataFrame:
    """Rows = (variant, Abs., ID) in the paper's order; conditions a variant lacks are left out."""
    records = []
    for name, table in _condition_rows(variants).items():
        for level, row_id, condition in TABLE5_ROWS:
            if condition in table.index:
                cells = {label: float(table.loc[condition, key]) for key, label in CELLS}
                records.append({"variant": name, "Abs.": level, "ID": row_id, **cells})
    return pd.DataFrame(records, columns=["variant", "Abs.", "ID", *LABELS])


def paper_tables(variants: Mapping[str, VariantEvaluation]) -> list[PaperTable]:
    """Tables 3 and 5 of the paper for the evaluated variants (empty list when no variant ran OccuGender)."""
    t3, t5 = table3(variants), table5(variants)
    if t3.empty and t5.empty:
        return []
    return [
        PaperTable(PAPER, "table3", "Table 3: explicit and implicit occupational gender bias (no debiasing prompt)",
                   t3, published_table3(), "Table 3 of the paper", NOTES, REPRODUCE),
        PaperTable(PAPER, "table5", "Table 5: debiasing prompts by abstraction level",
                   t5, published_table5(), "Tables 5, 6 and 8-11 of the paper (one block per model)", NOTES,
                   REPRODUCE),
    ]
