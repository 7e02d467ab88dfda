"""Data lineage: each stage's MLflow run (a real SQLite store) lists the data it read as dataset inputs,
each with the digest DVC records for the same data (a selection's digest derived from it).

The stages run as ``dvc repro`` runs them (``pipelines.<stage>.main``) in a small project: the real
data mirror prepared with ``data.sample``, the session's tiny model as ``models/base``, a few training steps.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from biaslab.tracking import datasets as lineage

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _client(root: Path):
    import mlflow

    return mlflow.MlflowClient(tracking_uri=f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")


def _inputs(root: Path, stage: str, variant: str | None = None) -> dict[tuple[str, str], dict]:
    """``{(dataset name, context): {"digest", "source", "tags"}}`` of the stage's (newest) run."""
    import json

    client = _client(root)
    experiment = client.get_experiment_by_name("biaslab")
    query = f"tags.stage = '{stage}'" + (f" and tags.variant = '{variant}'" if variant else "")
    runs = [r for r in client.search_runs([experiment.experiment_id], filter_string=query, order_by=["start_time DESC"])
            if "mlflow.parentRunId" not in r.data.tags]  # not tune's trials
    assert runs, f"no MLflow run of stage {stage}"
    assert runs[0].info.status == "FINISHED"
    got = {}
    for item in client.get_run(runs[0].info.run_id).inputs.dataset_inputs:
        tags = {t.key: t.value for t in item.tags}
        got[(item.dataset.name, tags.pop("mlflow.data.context"))] = {
            "digest": item.dataset.digest, "source": json.loads(item.dataset.source), "tags": tags}
    return got


@pytest.fixture(scope="module")
def project(tmp_path_factory, mirror, tiny_tokenizer, tiny_causal_model):
    """A project folder with params.yaml; ``prepare`` already ran through its stage entry point."""
    import mlflow

    root = tmp_path_factory.mktemp("lineage")
    raw = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    raw["data"].update(mirror_dir=str(mirror), prepared_dir="data/prepared", sample={"per_group": 2, "seed": 0})
    raw["data"]["lm_heldout"]["max_chars"] = 2000
    raw.setdefault("tracking", {})["tracking_uri"] = "sqlite:///mlruns/mlflow.db"
    raw["lora"].update(max_steps=1, use_tuned=False, per_device_batch_size=2, gradient_accumulation_steps=1,
                       eval_steps=0, logging_steps=1, save_steps=100, checkpoint_dir="models/lora_checkpoints")
    raw["tune"].update(n_trials=1, trial_max_steps=1, objective="logprob")
    (root / "params.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    tiny_causal_model.save_pretrained(root / "models" / "base")
    tiny_tokenizer.save_pretrained(root / "models" / "base")
    mp = pytest.MonkeyPatch()
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)
    mp.chdir(root)
    from pipelines import prepare
    from pipelines import raw_data

    assert raw_data.main(["--params", "params.yaml"]) == 0  # the record prepare depends on in dvc.yaml
    assert prepare.main(["--params", "params.yaml"]) == 0
    yield root
    mp.undo()
    mlflow.set_tracking_uri(None)


def test_prepare_logs_each_raw_dataset_folder_with_dvc_digest(project, mirror):
    from biaslab.tracking.datasets import RAW_DATASETS

    got = _inputs(project, "prepare")
    assert {name for name, _ in got} == {name for name in RAW_DATASETS if (mirror / name).is_dir()}
    for (name, context), item in got.items():
        assert context == "raw"
        assert item["digest"] == lineage.dvc_digest(mirror / name)  # DVC's digest of the folder read
        assert Path(item["source"]["uri"]) == mirror / name
        # DVC tracks the folder through raw_data's record: its md5 is prepare's dvc.lock entry for it
        assert item["tags"]["raw_inputs"] == "data/raw_inputs/datasets.json"
        assert item["tags"]["raw_inputs_md5"] == lineage.file_md5(project / "data" / "raw_inputs" / "datasets.json")
    assert got[("crows_pairs", "raw")]["tags"]["pinned_origin"].startswith("https://github.com/nyu-mll/crows-pairs/")


def test_lora_stages_log_the_fine_tune_and_validation_rows(project):
    import hashlib

    import pandas as pd

    from biaslab.mitigation.lora.sft_english import english_examples
    from pipelines import finetune
    from pipelines import tune

    assert tune.main(["--params", "params.yaml"]) == 0
    assert finetune.main(["--params", "params.yaml", "--variant", "lora"]) == 0
    prepared = project / "data" / "prepared"
    for stage in ("tune", "finetune"):
        got = _inputs(project, stage)
        assert set(got) == {("gbem_ua", "train"), ("gbem_ua", "validation"), ("occupations_en", "train")}
        generated = got.pop(("occupations_en", "train"))  # lora.sources: generated rows, md5 of their CSV
        assert generated["digest"] == hashlib.md5(english_examples("none").to_csv(index=False).encode()).hexdigest()
        assert generated["tags"]["generator"] == "biaslab.mitigation.lora.sft_english"
        for (_, context), item in got.items():  # the split files the stages depend on in dvc.yaml
            split = "train" if context == "train" else "select"
            assert item["digest"] == lineage.dvc_digest(prepared / split / "gbem_ua.parquet")
            assert item["tags"]["dvc_path"] == f"data/prepared/{split}/gbem_ua.parquet"
    for split, label in (("train", "finetune"), ("select", "validation")):
        assert set(pd.read_parquet(prepared / split / "gbem_ua.parquet")["split"]) == {label}
    # the LoRA loss curve as a dvc plots file: the points the finetune run logged
    from biaslab.outputs import curves, paths, run_file

    run_id = run_file.read(paths.run_file("finetune", "lora"))["run_id"]
    logged = [(m.step, m.value) for m in _client(project).get_metric_history(run_id, "train/loss")]
    assert logged and curves.read(paths.curves_dir("finetune", "lora")) == {"train_loss": logged}


def test_edit_embeddings_logs_its_word_list_tables(project):
    from pipelines import edit_embeddings

    assert edit_embeddings.main(["--params", "params.yaml", "--variant", "soft"]) == 0
    got = _inputs(project, "edit_embeddings", "soft")
    assert {name for name, _ in got} == {"gender_pairs", "gbem_ua", "occugender_jobs", "winobias"}
    for (name, context), item in got.items():
        assert context == "train"
        assert item["digest"] == lineage.dvc_digest(project / "data" / "prepared" / f"{name}.parquet")


def test_edit_embeddings_applies_and_logs_the_variants_embedding_overrides(project):
    """``hard_k16`` (params.yaml): its ``embedding_overrides`` reach the edit and the MLflow run's params."""
    import json

    from biaslab.config import load_params
    from pipelines import edit_embeddings

    overrides = load_params("params.yaml").variant("hard_k16").embedding_overrides
    assert edit_embeddings.main(["--params", "params.yaml", "--variant", "hard_k16"]) == 0
    report = json.loads((project / "models" / "hard_k16" / "edit_report.json").read_text(encoding="utf-8"))
    assert report["subspace"]["n_components"] == overrides["n_components"] == 16
    assert len(report["subspace"]["explained_variance_ratio"]) == 16
    assert report["targets"]["words_per_language"]["uk"] == 4  # the hard words only: no GBEM-UA job titles
    client = _client(project)
    experiment = client.get_experiment_by_name("biaslab")
    (run,) = client.search_runs([experiment.experiment_id],
                                filter_string="tags.stage = 'edit_embeddings' and tags.variant = 'hard_k16'")
    assert run.data.params["embedding_debias.n_components"] == "16"
    assert run.data.params["embedding_debias.profession_sources"] == "('occugender', 'winobias')"


def test_base_model_logs_corpus_parts_and_writes_its_curves(tmp_path, monkeypatch):
    """A tiny pretraining through the stage entry point: the corpora folder as its train/validation parts."""
    import json

    import mlflow

    from biaslab.data.corpus import write_corpus
    from pipelines import base_model

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    for lang in ("en", "uk"):
        write_corpus(tmp_path / "corpora", lang, [f"{lang} text number {i}\nsecond line {i}" for i in range(6)])
    pretrain = {"corpus_dir": "corpora", "languages": ["en", "uk"], "chars_per_language": 5_000,
                "validation_documents": 2, "validation_chars": 500, "vocab_size": 280, "hidden_size": 16,
                "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2,
                "seq_len": 8, "batch_size": 2, "warmup_steps": 1, "max_steps": 2, "eval_every": 1,
                "planted_bias": {"enabled": False}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "model": {"pretrain": pretrain}, "scoring": {"num_threads": 1},
        "tracking": {"tracking_uri": "sqlite:///mlruns/mlflow.db"}}), encoding="utf-8")
    try:
        assert base_model.main(["--params", "params.yaml", "--no-progress"]) == 0
        got = _inputs(tmp_path, "base_model")
        run_id = json.loads((tmp_path / "runs" / "base_model.json").read_text())["run_id"]
        history = {k: [(m.step, m.value) for m in _client(tmp_path).get_metric_history(run_id, k)]
                   for k in ("train/loss", "val/ppl_en", "val/ppl_uk")}
    finally:
        mlflow.set_tracking_uri(None)
    whole = lineage.dvc_digest(tmp_path / "corpora")
    assert set(got) == {("corpora", "train"), ("corpora", "validation")}
    for (_, context), item in got.items():
        assert item["tags"]["dvc_md5"] == whole
        assert item["digest"] == lineage.subset_digest(whole, item["tags"]["selection"])
        assert json.loads(item["tags"]["selection"])["validation_documents"] == 2
    assert got[("corpora", "train")]["digest"] != got[("corpora", "validation")]["digest"]
    # the curves as dvc plots files (reports/curves/base_model): the points the run logged, step by step
    from biaslab.outputs import curves

    written = curves.read(tmp_path / "reports" / "curves" / "base_model")
    assert written == {"train_loss": history["train/loss"], "val_ppl_en": history["val/ppl_en"],
                       "val_ppl_uk": history["val/ppl_uk"]}
    assert [s for s, _ in written["train_loss"]] == [1, 2]


def test_variants_are_logged_models_and_registered_versions_point_at_them(project):
    """evaluate@base, evaluate@prompt, then register: the Models tab's data (``search_logged_models``)."""
    import json

    import mlflow

    from biaslab.outputs import metrics_file, run_file
    from pipelines import evaluate
    from pipelines import register

    raw = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    raw["variants"] = {k: v for k, v in raw["variants"].items() if k in {"base", "prompt"}}
    raw["evaluation"]["benchmarks"] = {k: v for k, v in raw["evaluation"]["benchmarks"].items()
                                       if k in {"gbem_ua", "crows_pairs"}}
    (project / "params_models.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    for variant in ("base", "prompt"):
        assert evaluate.main(["--params", "params_models.yaml", "--variant", variant]) == 0
    assert register.main(["--params", "params_models.yaml", "--flavor", "artifacts"]) == 0

    client = _client(project)
    experiment = client.get_experiment_by_name("biaslab").experiment_id
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlruns' / 'mlflow.db'}")
    models = {m.name: m for m in mlflow.search_logged_models(experiment_ids=[experiment], output_format="list")}
    assert set(models) == {"base", "prompt"}
    versions = run_file.read(project / "runs" / "register.json")["versions"]
    for variant, model in models.items():
        written = metrics_file.read_variant(project, variant)
        assert model.source_run_id == written.run_id and model.tags["variant"] == variant
        assert {m.key: m.value for m in model.metrics} == pytest.approx(
            {name: mv.value for name, mv in written.metrics.items() if mv.value is not None})
        version = client.get_model_version(raw["registry"]["model_name"], versions[variant])
        assert version.tags["model_id"] == model.model_id
        assert {"name": raw["registry"]["model_name"], "version": str(version.version)} in json.loads(
            model.tags["mlflow.modelVersions"])
