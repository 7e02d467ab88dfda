"""F1 and label agreement, computed by the package's local ``evaluate`` modules.

The formulas live once, in :mod:`biaslab.metrics.label_scores`; the local ``evaluate`` modules
``biaslab/metrics/modules/<name>/<name>.py`` (loadable by anyone with ``evaluate.load(path)``, offline) wrap
them:

* :func:`binary_f1` / :func:`label_agreement` go through ``EvaluationModule.compute`` (evaluate's
  validated path);
* :func:`binary_f1_fn` / :func:`label_agreement_fn` return the pure functions, for hot loops such as 1000
  bootstrap resamples: ``compute`` writes an Arrow cache per call (~15 ms), which would make one GBEM-UA
  run spend minutes in bookkeeping. Same functions, same arithmetic, and no ``import evaluate``: that
  import pulls in ``transformers.pipelines`` (about 6 s of CPU), which no stage otherwise needs.

Modules are loaded lazily (first use) and kept for the process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

MODULES_DIR = Path(__file__).resolve().parent / "modules"


def module_path(name: str) -> Path:
    """Folder of the local evaluate module ``name`` (e.g. ``binary_f1``)."""
    path = MODULES_DIR / name
    if not (path / f"{name}.py").is_file():
        raise FileNotFoundError(f"no local evaluate module {name!r} under {MODULES_DIR}")
    return path


@lru_cache(maxsize=None)
def load_module(name: str):
    """``evaluate.load`` of a local module by path (no Hub access: the path is a folder on disk)."""
    import evaluate

    return evaluate.load(str(module_path(name)))


def binary_f1(predictions: Sequence, references: Sequence, zero_division: float = 0.0) -> float:
    """F1 of the positive class (1 / True); ``zero_division`` when there are no positives at all."""
    result = load_module("binary_f1").compute(
        predictions=[int(p) for p in predictions],
        references=[int(r) for r in references],
        zero_division=zero_division,
    )
    return float(result["f1"])


def label_agreement(first: Sequence, second: Sequence) -> float:
    """Share of aligned positions where the two label sequences are equal (NaN when empty)."""
    if len(first) == 0:
        return float("nan")
    result = load_module("label_agreement").compute(
        predictions=[int(x) for x in first], references=[int(x) for x in second]
    )
    return float(result["agreement"])


def binary_f1_fn() -> Callable[..., float]:
    """The pure ``binary_f1_score(predictions, references, pos_label=1, zero_division=0.0)`` the module wraps."""
    from biaslab.metrics.label_scores import binary_f1_score

    return binary_f1_score


def label_agreement_fn() -> Callable[..., float]:
    """The pure ``label_agreement_score(predictions, references)`` the module wraps."""
    from biaslab.metrics.label_scores import label_agreement_score

    return label_agreement_score
