"""Stage inputs written by earlier stages, checked before a stage starts its work (a missing one names the stage to run)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from biaslab.config import Params
from biaslab.errors import MissingInputError


def mitigation_frame(params: Params, name: str = "gbem_ua.parquet") -> pd.DataFrame:
    """The train and select items of ``name`` (``<data.prepared_dir>/train/`` and ``select/``): what ``tune`` and
    ``finetune`` read. Never a test item: :func:`biaslab.data.splits.read_split_table` refuses one, naming the
    file; a missing file says to run ``prepare``."""
    from biaslab.data.splits import read_mitigation_frame

    return read_mitigation_frame(params.data.prepared_dir, name)


def base_model_dir(params: Params) -> Path:
    """``model.output_dir`` (the base model the mitigations start from); missing -> run ``base_model``."""
    path = Path(params.model.output_dir)
    if not (path / "config.json").is_file():
        raise MissingInputError(f"{path}: base model not found; run the base_model stage (dvc repro base_model)")
    return path
