"""What the promotion gate reads about a variant: its metrics and its per-item predictions.

The gate (:mod:`biaslab.registry.gate`) is a pure function of two variants' evidence, the candidate's and
the base's. Where that evidence comes from is this module's business, behind one protocol:

* :class:`LocalEvidence` - the evaluate stage's files in a workspace (``metrics/<v>.json``,
  ``data/predictions/<v>/<benchmark>__<table>.parquet``): what ``biaslab summary`` and a single-user
  ``biaslab promote`` read;
* :class:`RunEvidence` - the evaluate run of each variant on the tracking server, found by the run id recorded at registration,
  implements the same protocol, so on a team server the gate never reads a file or tag a worker could edit.

``source`` says exactly what was read (file digests, or run ids), so a promotion can record its inputs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from biaslab.outputs import metrics_file, paths

if TYPE_CHECKING:
    import pandas as pd

    from biaslab.outputs.metrics_file import VariantMetrics


class GateEvidence(Protocol):
    """One project's evaluation results, variant by variant."""

    def metrics(self, variant: str) -> VariantMetrics:
        """The variant's metrics (``metrics/<v>.json`` as :func:`biaslab.outputs.metrics_file.read` reads it)."""

    def predictions(self, variant: str) -> dict[str, pd.DataFrame]:
        """``<benchmark>__<table>`` -> the per-item rows the metrics were computed from."""

    def source(self, variant: str) -> dict[str, str]:
        """What was read for ``variant``: ``{name: sha256 or run id}``, recorded with a promotion."""


def _sha256(path: Path) -> str:
    from biaslab.serving.manifest import sha256_file

    return sha256_file(path)


class LocalEvidence:
    """The evaluate stage's outputs in the workspace ``root``."""

    def __init__(self, root: str | os.PathLike[str] = ".") -> None:
        self.root = Path(root)

    def metrics(self, variant: str) -> VariantMetrics:
        return metrics_file.read(self.root / paths.metrics_file(variant), variant)

    def predictions(self, variant: str) -> dict[str, pd.DataFrame]:
        import pandas as pd

        folder = self.root / paths.predictions_dir(variant)
        return {p.stem: pd.read_parquet(p) for p in sorted(folder.glob("*.parquet"))}

    def source(self, variant: str) -> dict[str, str]:
        files = [self.root / paths.metrics_file(variant),
                 *sorted((self.root / paths.predictions_dir(variant)).glob("*.parquet"))]
        return {p.relative_to(self.root).as_posix(): _sha256(p) for p in files if p.is_file()}


class RunEvidence:
    """The evaluate runs on the tracking server: ``run_ids`` maps variant -> the evaluate run recorded at
    registration (a param of the version's registering run, which nobody can change afterwards).

    Reads the run's ``metrics.json`` artifact (every metric's record: value, CI, direction, ideal) and its
    ``predictions/*.json`` tables, never a tag or a workspace file; ``source`` gives the run id and the sha256
    of each artifact as read, so a promotion records exactly which bytes its gate saw.
    """

    METRICS = "metrics.json"  # biaslab.tracking.runs.METRICS_ARTIFACT
    PREDICTIONS = "predictions"

    def __init__(self, client: Any, run_ids: dict[str, str], workdir: str | os.PathLike[str] | None = None) -> None:
        """``workdir``: where the artifacts are downloaded (the caller removes it); default a new temporary folder."""
        self.client, self.run_ids = client, dict(run_ids)
        self.workdir = Path(workdir) if workdir is not None else None
        self._read: dict[str, dict[str, str]] = {}
        self._dirs: dict[str, Path] = {}
        self._metrics: dict[str, VariantMetrics] = {}
        self._predictions: dict[str, dict[str, pd.DataFrame]] = {}

    def _run_id(self, variant: str) -> str:
        run_id = self.run_ids.get(variant)
        if not run_id:
            from biaslab.registry.errors import RegistryError

            raise RegistryError(f"variant {variant!r}: no evaluate run recorded at registration; run "
                                f"`dvc repro evaluate@{variant} register` and promote the new version")
        return run_id

    def _download(self, variant: str, artifact: str) -> Path | None:
        import tempfile

        from mlflow.exceptions import MlflowException

        run_id = self._run_id(variant)
        if variant not in self._dirs:
            self._dirs[variant] = (Path(tempfile.mkdtemp(prefix=f"evidence-{variant}-", dir=self.workdir)))
        folder = self._dirs[variant]
        try:
            local = Path(self.client.download_artifacts(run_id, artifact, str(folder)))
        except (MlflowException, OSError):
            return None
        files = [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.is_file())
        seen = self._read.setdefault(variant, {"evaluate_run_id": run_id})
        for path in files:
            seen[f"runs:/{run_id}/{path.relative_to(folder).as_posix()}"] = _sha256(path)
        return local

    def metrics(self, variant: str) -> VariantMetrics:
        import json

        from biaslab.outputs.metrics_file import VariantMetrics, metric_from_record
        from biaslab.registry.errors import RegistryError
        from biaslab.tracking import evidence as bound

        if variant in self._metrics:
            return self._metrics[variant]
        local = self._download(variant, self.METRICS)
        run_id = self._run_id(variant)
        if local is None or not local.is_file():
            raise RegistryError(f"variant {variant!r}: evaluate run {run_id} has no {self.METRICS} artifact")
        raw = json.loads(local.read_text(encoding="utf-8"))
        run = self.client.get_run(run_id)
        fingerprint = run.data.params.get(bound.FINGERPRINT) or run.data.tags.get("model_fingerprint")  # param: bound
        self._metrics[variant] = VariantMetrics(variant, {name: metric_from_record(r) for name, r in raw.items()},
                                                model_fingerprint=fingerprint, run_id=run_id)
        return self._metrics[variant]

    def predictions(self, variant: str) -> dict[str, pd.DataFrame]:
        """The run's prediction tables, downloaded, hashed and parsed once per variant: the gate, the re-scoring
        sample, the derived-column check and the binding check all read the bytes the binding check hashed
        (a copy of each table, so no reader changes another's)."""
        if variant not in self._predictions:
            self._predictions[variant] = self._read_predictions(variant)
        return {name: frame.copy() for name, frame in self._predictions[variant].items()}

    def _read_predictions(self, variant: str) -> dict[str, pd.DataFrame]:
        import json

        import pandas as pd

        local = self._download(variant, self.PREDICTIONS)
        if local is None or not local.is_dir():
            return {}
        tables = {}
        for path in sorted(local.glob("*.json")):
            body = json.loads(path.read_text(encoding="utf-8"))  # mlflow.log_table: {"columns": [...], "data": [...]}
            tables[path.stem] = pd.DataFrame(body["data"], columns=body["columns"])
        return tables

    def source(self, variant: str) -> dict[str, str]:
        return dict(self._read.get(variant) or {"evaluate_run_id": self._run_id(variant)})

    def binding_problems(self, variant: str, experiment_id: str | None, experiment: str) -> list[str]:
        """Why the variant's evaluate run is not evidence a promoter can trust on a team server (empty: it is): it
        must be a finished evaluate run of the evaluations experiment ``experiment`` (id ``experiment_id``: only
        evaluators write there), and the artifacts read must be the ones its params bind
        (:mod:`biaslab.tracking.evidence`)."""
        from biaslab.tracking import evidence as bound

        run_id = self._run_id(variant)
        run = self.client.get_run(run_id)
        where = f"evaluate run {run_id} of {variant!r}"
        problems = []
        if experiment_id is None or run.info.experiment_id != experiment_id:
            problems.append(f"{where} is in experiment {run.info.experiment_id}, not the evaluations experiment "
                            f"{experiment!r} where only evaluators write")
        if run.info.status != "FINISHED":
            problems.append(f"{where} is {run.info.status}, not FINISHED")
        if run.data.tags.get("stage") != "evaluate":
            problems.append(f"{where} is no evaluate run (stage {run.data.tags.get('stage')!r})")
        self.metrics(variant)
        self.predictions(variant)
        prefix = f"runs:/{run_id}/"
        read = {k[len(prefix):]: v for k, v in self._read.get(variant, {}).items() if k.startswith(prefix)}
        problems += [f"{where}: {p}" for p in bound.binding_problems(run.data.params, read, variant)]
        return problems

    def items(self, variant: str) -> str | None:
        """The hash of the test items the variant's evaluate run scored (its bound param)."""
        from biaslab.tracking import evidence as bound

        return self.client.get_run(self._run_id(variant)).data.params.get(bound.ITEMS)

