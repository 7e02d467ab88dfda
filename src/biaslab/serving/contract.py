"""The predict contract every registered version shares: one row = one request.

Input columns (strings; each row fills exactly one of the three request shapes):

===============================  ==============  =================================================================
columns                          task            result
===============================  ==============  =================================================================
``prompt``                       ``generate``    ``generated``: greedy continuation (``max_new_tokens`` param)
``context`` + ``continuation``   ``loglikelihood``  ``logprob`` = log P(continuation | context), ``n_tokens``,
                                                 ``is_greedy`` (an empty/missing context = from BOS); causal LMs
``sentence``                     ``sentence``    ``logprob``, ``n_tokens``: log P(sentence | BOS) for a causal LM,
                                                 pseudo-log-likelihood for a masked LM
===============================  ==============  =================================================================

``language`` (optional) picks a prompt variant's debiasing prefix (``uk``, ``en``...; the variant's ``*``
entry, or its only entry, when missing). Output: one row per input row, in order, with the columns
``task``, ``generated``, ``logprob``, ``n_tokens``, ``is_greedy`` (``None`` where a column does not apply).
Natural logarithms, as the benchmarks report them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from biaslab.errors import BiaslabError

INPUT_COLUMNS = ("prompt", "context", "continuation", "sentence", "language")
OUTPUT_COLUMNS = ("task", "generated", "logprob", "n_tokens", "is_greedy")
GENERATE, LOGLIKELIHOOD, SENTENCE = "generate", "loglikelihood", "sentence"
DEFAULT_MAX_NEW_TOKENS = 20


class RequestError(BiaslabError, ValueError):
    """A predict input row that is not one of the contract's request shapes."""


@dataclass(frozen=True)
class ServingRequest:
    """One input row, classified."""

    row: int
    task: str
    text: str  # prompt, context or sentence
    continuation: str = ""
    language: str | None = None


def _cell(record: dict[str, Any], column: str) -> str | None:
    value = record.get(column)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if not isinstance(value, str):
        raise RequestError(f"column {column!r} must hold text, got {type(value).__name__} {value!r}")
    return value


def parse_requests(model_input: Any) -> list[ServingRequest]:
    """Classify every row of a DataFrame (or a list of dicts / a dict of columns) as one request."""
    import pandas as pd

    frame = model_input if isinstance(model_input, pd.DataFrame) else pd.DataFrame(model_input)
    unknown = sorted(set(map(str, frame.columns)) - set(INPUT_COLUMNS))
    if unknown:
        raise RequestError(f"unknown input column(s) {unknown}; the contract has {list(INPUT_COLUMNS)}")
    requests = []
    for row, record in enumerate(frame.to_dict(orient="records")):
        try:
            cells = {c: _cell(record, c) for c in INPUT_COLUMNS}
        except RequestError as exc:
            raise RequestError(f"row {row}: {exc}") from None
        shapes = [name for name, present in (
            (GENERATE, cells["prompt"] is not None),
            (LOGLIKELIHOOD, cells["continuation"] is not None),
            (SENTENCE, cells["sentence"] is not None),
        ) if present]
        if len(shapes) != 1:
            raise RequestError(
                f"row {row}: fill exactly one of prompt | context+continuation | sentence "
                f"(found {shapes or 'none'})")
        task = shapes[0]
        if cells["context"] is not None and task != LOGLIKELIHOOD:
            raise RequestError(f"row {row}: context without continuation")
        if task == GENERATE:
            requests.append(ServingRequest(row, task, cells["prompt"], language=cells["language"]))
        elif task == LOGLIKELIHOOD:
            requests.append(ServingRequest(row, task, cells["context"] or "", cells["continuation"],
                                           language=cells["language"]))
        else:
            requests.append(ServingRequest(row, task, cells["sentence"], language=cells["language"]))
    return requests


def output_frame(results: list[dict[str, Any]]):
    """The output DataFrame: the contract's columns, ``None`` where a column does not apply to a row."""
    import pandas as pd

    return pd.DataFrame([{c: r.get(c) for c in OUTPUT_COLUMNS} for r in results], columns=list(OUTPUT_COLUMNS),
                        dtype=object)


def signature():
    """The MLflow signature of the contract (optional input columns, ``max_new_tokens`` param)."""
    from mlflow.models import ModelSignature
    from mlflow.types.schema import ColSpec, ParamSchema, ParamSpec, Schema

    inputs = Schema([ColSpec("string", name, required=False) for name in INPUT_COLUMNS])
    outputs = Schema([
        ColSpec("string", "task"), ColSpec("string", "generated", required=False),
        ColSpec("double", "logprob", required=False), ColSpec("long", "n_tokens", required=False),
        ColSpec("boolean", "is_greedy", required=False),
    ])
    params = ParamSchema([ParamSpec("max_new_tokens", "long", DEFAULT_MAX_NEW_TOKENS)])
    return ModelSignature(inputs=inputs, outputs=outputs, params=params)


def input_example(model_kind: str):
    """A request a user can send as is: log-likelihoods for a causal LM, sentence scores for a masked LM."""
    import pandas as pd

    if model_kind == "masked":
        return pd.DataFrame({"sentence": ["The nurse said that she would come.", "The nurse said that he would come."]})
    return pd.DataFrame({"context": ["The nurse said that", "The nurse said that"], "continuation": [" she", " he"]})
