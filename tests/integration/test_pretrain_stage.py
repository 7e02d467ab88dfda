"""The base_model stage end to end on a tiny corpus: model dir, run.json and one MLflow run (sqlite in tmp)."""

from __future__ import annotations

import json

import pytest

from biaslab.config import Params
from biaslab.outputs.variant_dir import fingerprint_dir
from biaslab.data.corpus import write_corpus


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["auto", "bfloat16"])
def test_stage_trains_saves_and_tracks(tmp_path, monkeypatch, dtype):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for lang in ("en", "uk"):
        write_corpus(tmp_path / "corpora", lang, [f"{lang} text number {i}\nsecond line {i}" for i in range(6)])
    params = Params.model_validate({
        "model": {"dtype": dtype, "pretrain": {
            "corpus_dir": str(tmp_path / "corpora"), "languages": ["en", "uk"], "chars_per_language": 5_000,
            "validation_documents": 2, "validation_chars": 500, "vocab_size": 280, "hidden_size": 16,
            "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
            "seq_len": 8, "batch_size": 2, "warmup_steps": 1, "max_steps": 2, "eval_every": 1,
        }},
        "scoring": {"num_threads": 1},
    })
    from pipelines.base_model import run_base_model

    summary = run_base_model(params, tmp_path, progress=False)
    run = json.loads((tmp_path / "runs" / "base_model.json").read_text())
    assert run["fingerprint"] == fingerprint_dir(tmp_path / "models" / "base")
    assert run["model_uri"] == "models/base" and run["run_id"]
    assert summary["steps"] == 2 and set(summary["val_ppl"]) == {"en", "uk"}
    import torch

    from biaslab.models.weights.index import SafetensorsIndex

    stored = SafetensorsIndex(tmp_path / "models" / "base").floating_dtype()
    assert stored == (torch.float32 if dtype == "auto" else torch.bfloat16)  # trained in float32, stored as asked

    import mlflow

    logged = mlflow.get_run(run["run_id"])
    assert logged.info.status == "FINISHED" and logged.data.tags["stage"] == "base_model"
    history = mlflow.MlflowClient().get_metric_history(run["run_id"], "val/ppl_uk")
    assert [m.step for m in history] == [1, 2]
