"""The package's local ``evaluate`` modules load offline by path and agree with scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest

from biaslab.metrics import classification


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


CASES = [
    ([1, 0, 1, 1, 0], [1, 1, 1, 0, 0]),
    ([0, 0, 0, 0], [1, 0, 1, 0]),  # no predicted positive
    ([1, 1, 0], [1, 1, 0]),
    (list(np.random.default_rng(0).integers(0, 2, 200)), list(np.random.default_rng(1).integers(0, 2, 200))),
]


@pytest.mark.parametrize("predictions, references", CASES)
def test_binary_f1_matches_sklearn(predictions, references):
    from sklearn.metrics import f1_score

    expected = f1_score(references, predictions, zero_division=0.0)
    assert classification.binary_f1(predictions, references) == pytest.approx(expected)
    assert classification.binary_f1_fn()(predictions, references) == pytest.approx(expected)


def test_binary_f1_without_any_positive_is_zero_division():
    from sklearn.metrics import f1_score

    assert classification.binary_f1([0, 0], [0, 0]) == f1_score([0, 0], [0, 0], zero_division=0.0) == 0.0
    assert classification.binary_f1([0, 0], [0, 0], zero_division=1.0) == 1.0


def test_label_agreement_is_the_share_of_equal_labels():
    a, b = [1, 0, 1, 1], [1, 1, 1, 0]
    assert classification.label_agreement(a, b) == 0.5
    assert classification.label_agreement_fn()(a, b) == 0.5
    assert classification.label_agreement(b, a) == 0.5  # symmetric
    assert np.isnan(classification.label_agreement([], []))


def test_modules_load_by_path_with_plain_evaluate():
    import evaluate

    f1 = evaluate.load(str(classification.module_path("binary_f1")))
    agreement = evaluate.load(str(classification.module_path("label_agreement")))
    assert f1.compute(predictions=[1, 0, 1], references=[1, 1, 1]) == {"f1": 0.8, "tp": 2, "fp": 0, "fn": 1}
    result = agreement.compute(predictions=[True, False], references=[True, True])
    assert result == {"agreement": 0.5, "disagreement": 0.5, "n": 2}


def test_unknown_module_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="no local evaluate module"):
        classification.module_path("nope")


def test_the_bootstrap_functions_are_the_modules_formulas_and_import_no_evaluate():
    """``binary_f1_fn`` / ``label_agreement_fn`` (every GBEM-UA bootstrap, every gate rule on it) are the
    functions the modules' ``compute`` wraps, and reaching them imports neither ``evaluate`` nor
    ``transformers`` (``import evaluate`` pulls in ``transformers.pipelines``: seconds per stage)."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from biaslab.benchmarks.gbem_ua.metrics import agreement_of, macro_f1_vs_relevance\n"
            "import numpy as np\n"
            "_, f = macro_f1_vs_relevance('answer_yes')\n"
            "_, g = agreement_of('male', 'female')\n"
            "t = {'answer_yes': np.array([1, 0, 1, 1]), 'is_correct': np.array([1, 1, 0, 1]),\n"
            "     'male': np.array([1, 0, 1, 1]), 'female': np.array([1, 1, 1, 0])}\n"
            "print(round(f(t), 6), g(t), sorted(m for m in ('evaluate', 'transformers', 'datasets', 'torch')\n"
            "                                   if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == ["0.333333", "0.5"]  # (F1 of yes 4/6 + F1 of no 0) / 2; 2 of 4 labels agree
    assert " ".join(out[2:]) == "[]"
    for predictions, references in CASES:
        f1 = classification.load_module("binary_f1").compute(predictions=[int(p) for p in predictions],
                                                             references=[int(r) for r in references])
        assert classification.binary_f1_fn()(predictions, references) == f1["f1"]
        agreement = classification.load_module("label_agreement").compute(
            predictions=[int(p) for p in predictions], references=[int(r) for r in references])
        assert classification.label_agreement_fn()(predictions, references) == agreement["agreement"]
