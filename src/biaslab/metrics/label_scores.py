"""Binary F1 and label agreement: the formulas, as plain functions of two label sequences.

They are the arithmetic of the package's local ``evaluate`` modules (``modules/binary_f1``,
``modules/label_agreement``), which wrap them, and of the hot loops that call them directly
(:func:`biaslab.metrics.classification.binary_f1_fn`, ``label_agreement_fn``: 1000 bootstrap resamples per
GBEM-UA metric, 4000 per gate rule). They live here, outside the module files, because a module file must
``import evaluate``, and importing ``evaluate`` imports its ``evaluator`` and with it ``transformers.pipelines``:
about 6 s of CPU on a 2-core AVX2 machine, paid by every stage that computes a GBEM-UA metric
(docs/speed.md "Between stages"). numpy only.
"""

from __future__ import annotations

import numpy as np


def binary_f1_counts(predictions, references, pos_label=1) -> tuple[int, int, int]:
    """``(tp, fp, fn)`` of the positive class ``pos_label``."""
    pred = np.asarray(predictions).astype(int) == int(pos_label)
    ref = np.asarray(references).astype(int) == int(pos_label)
    if pred.shape != ref.shape:
        raise ValueError(f"predictions {pred.shape} and references {ref.shape} differ in shape")
    tp = int(np.sum(pred & ref))
    fp = int(np.sum(pred & ~ref))
    fn = int(np.sum(~pred & ref))
    return tp, fp, fn


def binary_f1_from_counts(tp: int, fp: int, fn: int, zero_division: float = 0.0) -> float:
    """F1 = 2·TP / (2·TP + FP + FN); ``zero_division`` when there is no positive at all (sklearn's default 0)."""
    denominator = 2 * tp + fp + fn
    return float(zero_division) if denominator == 0 else 2 * tp / denominator


def binary_f1_score(predictions, references, pos_label=1, zero_division=0.0) -> float:
    """F1 of the positive class of ``predictions`` against ``references``."""
    return binary_f1_from_counts(*binary_f1_counts(predictions, references, pos_label), zero_division)


def label_agreement_score(predictions, references) -> float:
    """Mean of ``predictions == references`` (NaN when empty); symmetric in its two inputs."""
    a = np.asarray(predictions).astype(int)
    b = np.asarray(references).astype(int)
    if a.shape != b.shape:
        raise ValueError(f"the two label sequences differ in shape: {a.shape} vs {b.shape}")
    return float(np.mean(a == b)) if a.size else float("nan")
