"""``tracking.configure`` marks the experiment as model development (new and existing experiments), and the
UI address it hands out opens MLflow's runs table in the model-training view."""

from __future__ import annotations

import pytest

from biaslab.tracking import runs as tracking
from biaslab.config import TrackingConfig
from biaslab.tracking.run_description import NOTE_TAG, describe, fit_note


@pytest.fixture
def store(tmp_path, monkeypatch):
    import mlflow

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    yield tmp_path
    mlflow.set_tracking_uri(None)


def test_new_experiment_is_tagged_model_development(store):
    import mlflow

    experiment_id = tracking.configure(TrackingConfig(experiment="fresh"), root=store)
    tags = mlflow.MlflowClient().get_experiment(experiment_id).tags
    assert tags["mlflow.experimentKind"] == "custom_model_development"


def test_existing_untagged_experiment_gets_the_tag(store):
    import mlflow

    db = store / "mlruns" / "mlflow.db"
    db.parent.mkdir(parents=True)
    mlflow.set_tracking_uri(f"sqlite:///{db}")
    old_id = mlflow.create_experiment("old", artifact_location=(store / "art").as_uri())
    assert "mlflow.experimentKind" not in mlflow.MlflowClient().get_experiment(old_id).tags

    assert tracking.configure(TrackingConfig(experiment="old"), root=store) == old_id
    assert mlflow.MlflowClient().get_experiment(old_id).tags["mlflow.experimentKind"] == "custom_model_development"


def test_genai_tag_is_replaced(store):
    """An experiment someone switched to the GenAI view in the UI is put back (this project trains models)."""
    import mlflow

    experiment_id = tracking.configure(TrackingConfig(experiment="switched"), root=store)
    mlflow.MlflowClient().set_experiment_tag(experiment_id, "mlflow.experimentKind", "genai_development")
    tracking.configure(TrackingConfig(experiment="switched"), root=store)
    assert mlflow.MlflowClient().get_experiment(experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"


def test_ui_address_and_command(store):
    experiment_id = tracking.configure(TrackingConfig(experiment="ui"), root=store)
    assert tracking.ui_url("http://127.0.0.1:5000/", experiment_id) == (
        f"http://127.0.0.1:5000/#/experiments/{experiment_id}/runs?workflowType=machine_learning")
    command = tracking.ui_command(TrackingConfig(experiment="ui"), store, port=5123)
    assert command[1:4] == ["-m", "mlflow", "ui"]
    assert command[command.index("--backend-store-uri") + 1] == f"sqlite:///{store / 'mlruns' / 'mlflow.db'}"
    assert command[command.index("--port") + 1] == "5123"
    assert command[command.index("--default-artifact-root") + 1] == (store / "mlruns" / "artifacts").as_uri()


def test_datasets_are_logged_with_dvc_digest_source_and_context(store):
    import json

    import mlflow
    import pandas as pd

    from biaslab.tracking import datasets as lineage
    from biaslab.tracking import datasets as provenance

    tracking.configure(TrackingConfig(experiment="lineage"), root=store)
    frame = pd.DataFrame({"profession": ["a", "b", "c"], "split": ["finetune", "finetune", "validation"]})
    prepared = store / "data" / "prepared"
    prepared.mkdir(parents=True)
    frame.to_parquet(prepared / "gbem_ua.parquet")
    (store / "mirror" / "rubia").mkdir(parents=True)
    (store / "mirror" / "rubia" / "rubia.tsv").write_text("a\tb\n")
    whole = lineage.prepared_file(prepared, "gbem_ua.parquet", "train")
    refs = [
        lineage.subset(whole, "split == 'finetune'", "train", frame=frame[frame.split == "finetune"]),
        lineage.subset(whole, "split == 'validation'", "validation", frame=frame[frame.split == "validation"]),
        provenance.raw_dataset(store / "mirror", "rubia"),
    ]
    with tracking.stage_run("tune") as run:
        tracking.log_datasets(refs)
    inputs = mlflow.get_run(run.info.run_id).inputs.dataset_inputs
    got = {(i.dataset.name, i.dataset.digest): {t.key: t.value for t in i.tags} for i in inputs}
    assert set(got) == {(r.name, r.digest) for r in refs}
    train = got[("gbem_ua", refs[0].digest)]
    assert train["mlflow.data.context"] == "train" and train["selection"] == "split == 'finetune'"
    assert got[("gbem_ua", refs[1].digest)]["mlflow.data.context"] == "validation"
    assert got[("rubia", refs[2].digest)]["mlflow.data.context"] == "raw"
    by_name = {(i.dataset.name, i.dataset.digest): i.dataset for i in inputs}
    table = by_name[("gbem_ua", refs[0].digest)]
    assert json.loads(table.profile)["num_rows"] == 2 and "profession" in table.schema
    assert json.loads(table.source)["uri"].endswith("data/prepared/gbem_ua.parquet")
    assert by_name[("rubia", refs[2].digest)].digest == lineage.dvc_digest(store / "mirror" / "rubia")


def test_a_run_description_is_the_note_the_ui_shows_and_a_long_one_is_cut_to_fit(store):
    """``describe`` writes the tag the run's Overview page renders; a text over MLflow's tag limit is cut
    before a section heading and names the artifact that holds all of it."""
    import mlflow
    from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

    tracking.configure(TrackingConfig(experiment="notes"), root=store)
    long = "# Report\n\nintro\n\n## Verdict\n\n" + "| a | b |\n" * 200 + "\n## Every metric\n\n" + "x" * MAX_TAG_VAL_LENGTH
    with tracking.stage_run("calibrate") as run:
        describe(long, whole="calibration.md")
    note = mlflow.MlflowClient().get_run(run.info.run_id).data.tags[NOTE_TAG]
    assert len(note) <= MAX_TAG_VAL_LENGTH
    assert note.startswith("# Report") and "## Verdict" in note and "## Every metric" not in note
    assert note.endswith("all of it: artifact `calibration.md`.*\n")


def test_fit_note_keeps_a_short_text_and_otherwise_cuts_at_a_section_or_else_a_line():
    assert fit_note("# a\n\nshort\n", "r.md", limit=100) == "# a\n\nshort\n"
    sections = "# a\n\none\n\n## b\n\n" + "two " * 30
    cut = fit_note(sections, "r.md", limit=100)
    assert cut.startswith("# a\n\none\n\n*… cut") and len(cut) <= 100
    lines = "\n".join(f"line {i}" for i in range(40))
    cut = fit_note(lines, None, limit=60)
    assert cut.endswith("*… (cut)*\n") and cut.startswith("line 0\nline 1") and len(cut) <= 60
    assert all(line.startswith("line ") or line in ("", "*… (cut)*") for line in cut.split("\n"))  # whole lines
    with pytest.raises(ValueError, match="no room"):
        fit_note("x" * 50, "a-long-artifact-name.md", limit=20)
