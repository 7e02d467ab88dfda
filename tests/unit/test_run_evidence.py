"""The promoter's view of an evaluate run's prediction tables (:class:`biaslab.registry.evidence.RunEvidence`).

One promote reads the tables four times (the gate, the re-scoring sample, the derived-column check, the binding
check). They must all read the bytes the binding check hashed: one download per variant, not one per reader, so
a table rewritten on the server between two reads cannot reach one check and not another.
"""

from __future__ import annotations

import json
from pathlib import Path

RUN = "0123456789abcdef"


class _Client:
    """An MLflow client whose run has one ``predictions/`` table; counts downloads, and rewrites the stored table
    after the first one (what a writer racing the promoter would do)."""

    def __init__(self) -> None:
        self.downloads = 0
        self.value = 1.0

    def download_artifacts(self, run_id: str, artifact: str, dst: str) -> str:
        assert run_id == RUN and artifact == "predictions"
        self.downloads += 1
        folder = Path(dst) / artifact
        folder.mkdir(parents=True, exist_ok=True)
        body = {"columns": ["item", "logprob"], "data": [[0, self.value], [1, -2.5]]}
        (folder / "agreement__pairs.json").write_text(json.dumps(body), encoding="utf-8")
        self.value += 1.0  # the next download would see other bytes
        return str(folder)


def test_the_tables_are_downloaded_and_hashed_once_and_every_reader_gets_its_own_copy(tmp_path):
    from biaslab.registry.evidence import RunEvidence

    client = _Client()
    evidence = RunEvidence(client, {"soft": RUN}, workdir=tmp_path)
    first = evidence.predictions("soft")
    first["agreement__pairs"].loc[0, "logprob"] = 99.0  # one reader's change stays its own
    second = evidence.predictions("soft")

    assert client.downloads == 1
    assert second["agreement__pairs"]["logprob"].tolist() == [1.0, -2.5]  # the first download's bytes
    hashed = {k for k in evidence.source("soft") if k.startswith("runs:/")}
    assert hashed == {f"runs:/{RUN}/predictions/agreement__pairs.json"}


def test_a_run_without_prediction_tables_reads_as_none_and_is_asked_once(tmp_path):
    from biaslab.registry.evidence import RunEvidence

    class Empty(_Client):
        def download_artifacts(self, run_id, artifact, dst):
            from mlflow.exceptions import MlflowException

            self.downloads += 1
            raise MlflowException("no such artifact")

    client = Empty()
    evidence = RunEvidence(client, {"soft": RUN}, workdir=tmp_path)
    assert evidence.predictions("soft") == {} and evidence.predictions("soft") == {}
    assert client.downloads == 1
