"""GBEM-UA's Tables 1, 2, 5 and 6 in the paper's layout, for every evaluated variant (``paper_tables``).

The paper prints one block of rows per model (its metrics) and one column per mitigation (No debias,
Prompt, Soft, Hard, Finetuning). We evaluate one model, so our rows are the paper's metric rows and our
columns are the evaluated variants (by default ``base`` = No debias, ``prompt``, ``soft``, ``hard``,
``lora`` = Finetuning):

=========  ==============================  ==================================================
table      paper rows                      biaslab metric
=========  ==============================  ==================================================
Table 1    Acc Diff Fem. / No Fem.         ``gbem_ua/qa_diff_fem`` / ``qa_diff_nofem``
Table 2    Prob Diff Metric Fem. / No Fem. ``gbem_ua/prob_diff_fem`` / ``prob_diff_nofem``
Table 5    Acc Man No Fem. / Woman ...     ``gbem_ua/qa_f1_man_nofem`` / ``woman_nofem`` / ``woman_fem``
Table 6    Acc Prob Metric Fem. / No Fem.  ``gbem_ua/prob_label_agreement_fem`` / ``_nofem``
=========  ==============================  ==================================================

The paper's own numbers are transcribed below (model names unified across tables: Tables 2 and 6 print
"Gemma 2b", "Llama -3B-Instruct", ... for the models Tables 1 and 5 call "Gemma-2-2b",
"Llama-3.2 -3B-Instruct", ...; "Gemma 9b" as printed; empty = not run).
"""

from __future__ import annotations

import io
from collections.abc import Mapping

import pandas as pd

from biaslab.benchmarks.base import PaperTable, VariantEvaluation

PAPER = "gbem_ua"
MITIGATIONS = ("No debias", "Prompt", "Soft", "Hard", "Finetuning")
# key -> (title, ((paper row label, metric), ...), published block)
TABLES: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "table1": ("Table 1: QA difference metrics (QADiffMetric = 1 - male/female answer agreement)", (
        ("Acc Diff Fem.", "gbem_ua/qa_diff_fem"),
        ("Acc Diff No Fem.", "gbem_ua/qa_diff_nofem"),
    )),
    "table2": ("Table 2: probability difference metrics (ProbDiffMetric)", (
        ("Prob Diff Metric Fem.", "gbem_ua/prob_diff_fem"),
        ("Prob Diff Metric No Fem.", "gbem_ua/prob_diff_nofem"),
    )),
    "table5": ("Table 5: QA accuracy metrics (QAAccMetric = F1 of 'yes' vs relevance)", (
        ("Acc Man No Fem.", "gbem_ua/qa_f1_man_nofem"),
        ("Acc Woman No Fem.", "gbem_ua/qa_f1_woman_nofem"),
        ("Acc Woman Fem.", "gbem_ua/qa_f1_woman_fem"),
    )),
    "table6": ("Table 6: probability accuracy metrics (agreement of male and female labels P+ > P-)", (
        ("Acc Prob Metric Fem.", "gbem_ua/prob_label_agreement_fem"),
        ("Acc Prob Metric No Fem.", "gbem_ua/prob_label_agreement_nofem"),
    )),
}
NOTES = (
    "Columns are the evaluated variants (base = the paper's 'No debias', lora = 'Finetuning'). Items: "
    "`items: heldout` (default) scores the ~174 professions no variant is trained on; the paper scores all "
    "349 professions of the test file (700 items per group: `items: all`, refused for the LoRA variant). "
    "QA answers: `qa_parser: logprob` by default (offline); the paper's parser is `embedding` with "
    "multilingual-e5-large. Table 6 labels use pair-padded probabilities, as the authors' code. "
    "docs/fidelity.md lists every difference."
)
REPRODUCE = (
    "dvc exp run -S 'model.source=Qwen/Qwen2.5-3B-Instruct' "
    "-S 'evaluation.benchmarks.gbem_ua.options.items=all' "
    "-S 'evaluation.benchmarks.gbem_ua.options.qa_parser=embedding' "
    "-S 'evaluation.benchmarks.gbem_ua.options.encoder=<local multilingual-e5-large directory>'"
)

# The authors' mitigation settings as `dvc exp run -S` overrides of params.yaml (docs/fidelity.md says why
# -S sets and not a second params file). Checked against the params schema by a test.
PRESETS: dict[str, tuple[str, ...]] = {
    # soft/hard: Ukrainian pairs only, 5 PCA components (their pca_s=0, pca_e=5), word vectors not
    # normalised, the projection removed at the target words' occurrences (their per-forward edit)
    "embedding": (
        "embedding_debias.languages=[uk]",
        "embedding_debias.n_components=5",
        "embedding_debias.normalize_word_vectors=false",
        "embedding_debias.profession_sources=[gbem_ua]",
        "variants.soft.embedding_apply=hook",
        "variants.hard.embedding_apply=hook",
    ),
    # LoRA as Table 4: 175 training professions (219 fine-tune professions, 44 of them for validation),
    # the paper's hyper-parameters without the Optuna override, 8-bit paged AdamW on an 8-bit base, fp16
    "lora": (
        "data.gbem_ua.finetune_fraction=0.6275",
        "lora.use_tuned=false",
        "lora.optimizer=paged_adamw_8bit",
        "lora.quantization=8bit",
        "lora.mixed_precision=fp16",
        "lora.save_steps=200",
        "lora.eval_steps=200",
        "lora.logging_steps=20",
    ),
    # the paper's evaluation: every test-file profession (not with a fine-tuned variant), embedding parser
    "evaluation": (
        "evaluation.benchmarks.gbem_ua.options.items=all",
        "evaluation.benchmarks.gbem_ua.options.qa_parser=embedding",
    ),
}


def preset_command(*names: str) -> str:
    """``dvc exp run -S ... `` for the named presets, in order."""
    overrides = [o for name in names for o in PRESETS[name]]
    return "dvc exp run " + " ".join(f"-S '{o}'" for o in overrides)


_PUBLISHED = {
    "table1": """model,metric,No debias,Prompt,Soft,Hard,Finetuning
Qwen2.5-3B-Instruct,Acc Diff Fem.,0.00143,0.01286,0,0,0.07857
Qwen2.5-3B-Instruct,Acc Diff No Fem.,0.00429,0.02143,0.00143,0,0.06286
Qwen2.5-7B-Instruct,Acc Diff Fem.,0.10429,0.05858,0.11,0.12857,
Qwen2.5-7B-Instruct,Acc Diff No Fem.,0.07143,0.05143,0.08,0.07714,
Gemma-2-2b,Acc Diff Fem.,0.24481,0.41902,0.28702,0.27951,0.09239
Gemma-2-2b,Acc Diff No Fem.,0.25091,0.4091,0.24002,0.23106,0.08818
Gemma 9b,Acc Diff Fem.,0.14438,0.19299,0.1482,0.11099,
Gemma 9b,Acc Diff No Fem.,0.13201,0.15099,0.11699,0.11047,
Llama-3.2-3B-Instruct,Acc Diff Fem.,0.24572,0.47429,0.25872,0.23711,0.05
Llama-3.2-3B-Instruct,Acc Diff No Fem.,0.22714,0.47143,0.24104,0.2297,0.03143
Llama-3.1-8B-Instruct,Acc Diff Fem.,0.34903,0.33295,0.30909,0.3291,
Llama-3.1-8B-Instruct,Acc Diff No Fem.,0.35163,0.3318,0.30017,0.29091,
""",
    "table2": """model,metric,No debias,Prompt,Soft,Hard,Finetuning
Qwen2.5-3B-Instruct,Prob Diff Metric Fem.,0.03665,,0.03665,0.03062,
Qwen2.5-3B-Instruct,Prob Diff Metric No Fem.,0.02024,,0.0198,0.02708,
Qwen2.5-7B-Instruct,Prob Diff Metric Fem.,0.03082,,0.03014,0.02713,
Qwen2.5-7B-Instruct,Prob Diff Metric No Fem.,0.01997,,0.01903,0.02949,
Gemma-2-2b,Prob Diff Metric Fem.,0.31491,,0.35612,0.34693,
Gemma-2-2b,Prob Diff Metric No Fem.,0.22418,,0.21138,0.22418,
Gemma 9b,Prob Diff Metric Fem.,0.09896,,0.09489,0.09928,
Gemma 9b,Prob Diff Metric No Fem.,0.082,,0.09112,0.08973,
Llama-3.2-3B-Instruct,Prob Diff Metric Fem.,0.01892,,0.00791,0.01026,
Llama-3.2-3B-Instruct,Prob Diff Metric No Fem.,0.03671,,0.03215,0.02991,
Llama-3.1-8B-Instruct,Prob Diff Metric Fem.,0.08913,,0.06529,0.07815,
Llama-3.1-8B-Instruct,Prob Diff Metric No Fem.,0.06251,,0.05719,0.05991,
""",
    "table5": """model,metric,No debias,Prompt,Soft,Hard,Finetuning
Qwen2.5-3B-Instruct,Acc Man No Fem.,0.66667,0.66857,0.66667,0.66667,0.89986
Qwen2.5-3B-Instruct,Acc Woman No Fem.,0.66858,0.67375,0.6673,0.66667,0.89153
Qwen2.5-3B-Instruct,Acc Woman Fem.,0.6673,0.6705,0.66667,0.66667,0.88663
Qwen2.5-7B-Instruct,Acc Man No Fem.,0.79131,0.76284,0.77527,0.78188,
Qwen2.5-7B-Instruct,Acc Woman No Fem.,0.80245,0.78016,0.79465,0.76686,
Qwen2.5-7B-Instruct,Acc Woman Fem.,0.7836,0.76535,0.7826,0.75907,
Gemma-2-2b,Acc Man No Fem.,0.789072,0.61098,0.69098,0.67801,0.90637
Gemma-2-2b,Acc Woman No Fem.,0.76689,0.60924,0.78092,0.7991,0.9119
Gemma-2-2b,Acc Woman Fem.,0.79092,0.62099,0.77901,0.80884,0.937
Gemma 9b,Acc Man No Fem.,0.81026,0.71562,0.83419,0.82551,
Gemma 9b,Acc Woman No Fem.,0.8001,0.65429,0.81067,0.80775,
Gemma 9b,Acc Woman Fem.,0.81792,0.66701,0.75691,0.7599,
Llama-3.2-3B-Instruct,Acc Man No Fem.,0.6525,0.51682,0.58098,0.60908,0.89504
Llama-3.2-3B-Instruct,Acc Woman No Fem.,0.66811,0.5495,0.69872,0.68098,0.89914
Llama-3.2-3B-Instruct,Acc Woman Fem.,0.64876,0.59564,0.65789,0.65618,0.91139
Llama-3.1-8B-Instruct,Acc Man No Fem.,0.7259,0.63292,0.70908,0.79086,
Llama-3.1-8B-Instruct,Acc Woman No Fem.,0.72099,0.6219,0.74524,0.778,
Llama-3.1-8B-Instruct,Acc Woman Fem.,0.70537,0.63619,0.7351,0.7223,
""",
    "table6": """model,metric,No debias,Prompt,Soft,Hard,Finetuning
Qwen2.5-3B-Instruct,Acc Prob Metric Fem.,0.83714,,0.82571,0.82429,
Qwen2.5-3B-Instruct,Acc Prob Metric No Fem.,0.84429,,0.82,0.79571,
Qwen2.5-7B-Instruct,Acc Prob Metric Fem.,0.78714,,0.79857,0.71714,
Qwen2.5-7B-Instruct,Acc Prob Metric No Fem.,0.85857,,0.86857,0.77143,
Gemma-2-2b,Acc Prob Metric Fem.,0.82651,,0.82015,0.80901,
Gemma-2-2b,Acc Prob Metric No Fem.,0.75188,,0.76113,0.75491,
Gemma 9b,Acc Prob Metric Fem.,0.70017,,0.70017,0.69898,
Gemma 9b,Acc Prob Metric No Fem.,0.72809,,0.71092,0.72031,
Llama-3.2-3B-Instruct,Acc Prob Metric Fem.,0.75201,,0.74881,0.74901,
Llama-3.2-3B-Instruct,Acc Prob Metric No Fem.,0.74836,,0.76814,0.76225,
Llama-3.1-8B-Instruct,Acc Prob Metric Fem.,0.73621,,0.73901,0.72918,
Llama-3.1-8B-Instruct,Acc Prob Metric No Fem.,0.73014,,0.7405,0.72891,
""",
}


def published(key: str) -> pd.DataFrame:
    """The paper's numbers for one table: ``model``, ``metric`` + one column per mitigation (NaN = not run)."""
    return pd.read_csv(io.StringIO(_PUBLISHED[key]))


def table(rows: tuple[tuple[str, str], ...], variants: Mapping[str, VariantEvaluation]) -> pd.DataFrame:
    """Rows = the paper's metric labels, columns = variants that have at least one of the metrics."""
    columns = {
        name: [evaluation.metrics[m].value if m in evaluation.metrics else float("nan") for _, m in rows]
        for name, evaluation in variants.items()
        if any(m in evaluation.metrics for _, m in rows)
    }
    frame = pd.DataFrame(columns, index=[label for label, _ in rows])
    frame.index.name = "metric"
    return frame.reset_index()


def paper_tables(variants: Mapping[str, VariantEvaluation]) -> list[PaperTable]:
    """Tables 1, 2, 5 and 6 (a table no variant has any metric of is left out)."""
    out = []
    for key, (title, rows) in TABLES.items():
        frame = table(rows, variants)
        if frame.shape[1] > 1:
            out.append(PaperTable(PAPER, key, title, frame, published(key), f"{title.split(':')[0]} of the paper",
                                  NOTES, REPRODUCE))
    return out
