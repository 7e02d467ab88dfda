"""Binary F1 of predicted labels against reference labels, as a local ``evaluate`` module.

F1 = 2·TP / (2·TP + FP + FN) for the positive class ``pos_label`` (default 1). When there is no
positive at all (TP + FP + FN = 0) the score is ``zero_division`` (default 0.0), which is what
``sklearn.metrics.f1_score`` returns by default (with a warning). GBEM-UA's QAAccMetric and the
probability-set F1 use it with "yes" (the candidate may get the job) as the positive class.

Load it offline by path: ``evaluate.load("<this folder>")``. The formula is
``biaslab.metrics.label_scores`` (numpy only), which the bootstrap loops call without importing ``evaluate``.
"""

import datasets
import evaluate

from biaslab.metrics.label_scores import binary_f1_counts, binary_f1_from_counts

_DESCRIPTION = "Binary F1 = 2TP / (2TP + FP + FN) of the positive class; zero_division when undefined."

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of int): predicted labels (0/1 or booleans).
    references (list of int): reference labels (0/1 or booleans).
    pos_label (int): the positive class, default 1.
    zero_division (float): value when there are no positives at all, default 0.0 (sklearn's default).
Returns:
    f1 (float), tp (int), fp (int), fn (int)
"""

_CITATION = "Buleshnyi et al., GBEM-UA, UNLP 2025 (QAAccMetric); van Rijsbergen 1979 (F-measure)."


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class BinaryF1(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("int32"), "references": datasets.Value("int32")}
            ),
            reference_urls=["https://scikit-learn.org/stable/modules/generated/sklearn.metrics.f1_score.html"],
        )

    def _compute(self, predictions, references, pos_label=1, zero_division=0.0):
        tp, fp, fn = binary_f1_counts(predictions, references, pos_label)
        return {"f1": float(binary_f1_from_counts(tp, fp, fn, zero_division)), "tp": tp, "fp": fp, "fn": fn}
