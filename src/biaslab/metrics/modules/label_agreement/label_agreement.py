"""Share of items on which two label sequences agree, as a local ``evaluate`` module.

agreement = (1/N) · Σ_i [a_i == b_i]. GBEM-UA compares the answer given for a male candidate with the
answer for the matched female candidate (same profession, experience and relevance): QADiffMetric is
``1 - agreement`` of the QA answers, and the authors' reported "prob accuracy" is the agreement of the
probability-set labels (label = P⁺ > P⁻). ``predictions`` and ``references`` are the two sequences
(e.g. male and female labels); the measure is symmetric in them.

Load it offline by path: ``evaluate.load("<this folder>")``. The formula is
``biaslab.metrics.label_scores`` (numpy only), which the bootstrap loops call without importing ``evaluate``.
"""

import datasets
import evaluate

from biaslab.metrics.label_scores import label_agreement_score

_DESCRIPTION = "Agreement = mean over items of [prediction == reference]; symmetric in its two inputs."

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): first label sequence (e.g. answers for the male candidate).
    references (list of int): second label sequence, aligned item by item (e.g. the female candidate).
Returns:
    agreement (float, NaN for empty input), disagreement (float, 1 - agreement), n (int)
"""

_CITATION = "Buleshnyi et al., GBEM-UA, UNLP 2025 (QADiffMetric, probability accuracy)."


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class LabelAgreement(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}
            ),
        )

    def _compute(self, predictions, references):
        agreement = label_agreement_score(predictions, references)
        return {"agreement": agreement, "disagreement": 1.0 - agreement, "n": len(predictions)}
