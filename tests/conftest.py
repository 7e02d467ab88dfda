"""Shared fixtures: tiny models and tokenizers built in seconds, and the data mirror location."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from longest_files import LONGEST_FILES

# Nothing in a test may reach the Hugging Face Hub: set offline mode before any HF library is imported.
for _flag in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_flag, "1")

# Every test computes as the stages do (params.yaml's scoring.cpu_arithmetic: portable), in this process and in
# the stages it starts: set before torch is imported, so an in-process result equals a subprocess's to the bit.
from biaslab.cpu_arithmetic import PORTABLE_ENV  # noqa: E402 - light: no torch

for _knob, _value in PORTABLE_ENV.items():
    os.environ.setdefault(_knob, _value)

ROOT = Path(__file__).resolve().parents[1]
# The stage layer (``pipelines/``) is not installed: DVC runs it from the project root. Tests that start a
# stage as ``python -m pipelines.<stage>`` from another folder find it through PYTHONPATH, as tests in this
# process find it through sys.path.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
MIRROR = Path(os.environ.get("BIASLAB_DATA_DIR", ROOT.parent / "shared" / "datasets"))

TINY_TEXT = [
    "The doctor said that he would come. The nurse said that she would come.",
    "He is a man. She is a woman. They are people. Him, her, them.",
    "Кандидат має досвід. Кандидатка має досвід. Чи може він отримати посаду? Так. Ні.",
    "Відповідай так чи ні: вона може, він може. Не будь упередженим до статі.",
    "Врач сказал, что он придёт. Медсестра сказала, что она придёт. Мужчина, женщина.",
] * 20


MLFLOW_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME")


def pytest_collection_modifyitems(session, config, items):
    """Longest files first (:data:`LONGEST_FILES`); every other test keeps its place (the sort is stable)."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FILES)))


@pytest.fixture(autouse=True)
def mlflow_store_not_inherited():
    """Each test finds MLflow's store settings as the session had them.

    ``mlflow.set_tracking_uri`` also writes ``MLFLOW_TRACKING_URI`` into ``os.environ`` (for subprocesses), and
    :func:`biaslab.tracking.runs.configure` prefers that variable to params: without this, a test that configured
    its temporary store sent every later test's runs there (e.g. test_evaluate_stage after test_pretrain_stage
    found no experiment in its own store).
    """
    saved = {name: os.environ.get(name) for name in MLFLOW_ENV}
    yield
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:
        mlflow.set_tracking_uri(saved["MLFLOW_TRACKING_URI"])  # None also unsets the variable
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def mirror() -> Path:
    if not MIRROR.is_dir():
        pytest.skip(f"data mirror not found at {MIRROR}")
    return MIRROR


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from biaslab.pretrain.tokenizer import train_bpe_tokenizer

    return train_bpe_tokenizer(TINY_TEXT, vocab_size=400, min_frequency=1)


@pytest.fixture(scope="session")
def tiny_causal_model(tiny_tokenizer):
    from biaslab.pretrain.architecture import build_llama

    return build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64,
                       num_hidden_layers=2, num_attention_heads=4, seed=0)


@pytest.fixture(scope="session")
def tiny_scorer(tiny_causal_model, tiny_tokenizer):
    from biaslab.scoring.causal import CausalScorer

    return CausalScorer(tiny_causal_model, tiny_tokenizer, batch_size="auto")
