"""The workspace a stage belongs to, when DVC runs it in a temporary copy.

``dvc exp run --queue`` (and ``--temp``) runs the pipeline in a copy at ``<workspace>/.dvc/tmp/exps/<tmp>/``
(DVC's ``TempDirExecutor``: ``mkdtemp`` under the repository's ``.dvc/tmp/exps``; ``DVC_ROOT`` names the copy,
not the workspace, and DVC sets no variable naming the original) and deletes the copy afterwards. A params
path that names something *outside* the pipeline's outputs - the data mirror ``../shared/datasets``, the
MLflow store ``sqlite:///mlruns/mlflow.db`` - is therefore resolved against the workspace the experiment was
queued from (:func:`origin_workspace`), so the copy finds the mirror and its runs land in the workspace's
store, not in one DVC deletes. Outputs (``models/…``, ``metrics/…``) stay relative to the copy: DVC collects
them from there into the experiment.
"""

from __future__ import annotations

import os
from pathlib import Path

EXPERIMENT_COPY_PARENTS = (".dvc", "tmp", "exps")
"""A DVC temporary experiment copy is ``<workspace>/.dvc/tmp/exps/<name>``."""


def origin_workspace(root: str | os.PathLike[str] = ".") -> Path:
    """The workspace ``root`` was copied from when it is a DVC temporary experiment copy, else ``root`` (absolute)."""
    root = Path(root).resolve()
    parents = root.parents
    if len(parents) > len(EXPERIMENT_COPY_PARENTS) and \
            tuple(p.name for p in list(parents)[2::-1]) == EXPERIMENT_COPY_PARENTS:
        origin = parents[3]
        if (origin / ".dvc").is_dir():
            return origin
    return root


def outside_path(path: str | os.PathLike[str], root: str | os.PathLike[str] = ".") -> Path:
    """A params path to something outside the pipeline's outputs: absolute as given; relative to ``root`` as
    given (unchanged), except inside a DVC experiment copy, where it is resolved against the original workspace."""
    path = Path(path)
    if path.is_absolute():
        return path
    origin = origin_workspace(root)
    return path if origin == Path(root).resolve() else origin / path
