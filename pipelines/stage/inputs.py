"""Stage inputs written by earlier stages, checked before a stage starts its work (a missing one names the stage to run)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from biaslab.config import Params
from biaslab.errors import MissingInputError


def prepared_table(params: Params, name: str) -> pd.DataFrame:
    """``<data.prepared_dir>/<name>``; missing -> an error that says to run ``prepare``."""
    path = Path(params.data.prepared_dir) / name
    if not path.is_file():
        raise MissingInputError(f"{path}: prepared table missing; run the prepare stage (dvc repro prepare)")
    return pd.read_parquet(path)


def base_model_dir(params: Params) -> Path:
    """``model.output_dir`` (the base model the mitigations start from); missing -> run ``base_model``."""
    path = Path(params.model.output_dir)
    if not (path / "config.json").is_file():
        raise MissingInputError(f"{path}: base model not found; run the base_model stage (dvc repro base_model)")
    return path
