"""What the promotion gate reads about a variant: its metrics and its per-item predictions.

The gate (:mod:`biaslab.registry.gate`) is a pure function of two variants' evidence, the candidate's and
the base's. Where that evidence comes from is this module's business, behind one protocol:

* :class:`LocalEvidence` - the evaluate stage's files in a workspace (``metrics/<v>.json``,
  ``data/predictions/<v>/<benchmark>__<table>.parquet``): what ``biaslab summary`` and a single-user
  ``biaslab promote`` read;
* a server-side reader (the evaluate run of each variant, found by the run id recorded at registration)
  implements the same protocol, so on a team server the gate never reads a file or tag a worker could edit.

``source`` says exactly what was read (file digests, or run ids), so a promotion can record its inputs.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

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
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
