"""The datasets a pretrained model saw, as MLflow inputs of the ``base_model`` / ``control_model`` runs.

The corpora's train and validation documents (:func:`biaslab.data.provenance.corpus_datasets`), and the
planted text as its own input, identified by the answer key the model folder stores (``planted_bias.json``:
the params, lexicon and statistics of the generated sentences). Digests are DVC's (see :mod:`biaslab.lineage`).
"""

from __future__ import annotations

import json
from pathlib import Path

from biaslab import lineage
from biaslab.config import Params
from biaslab.lineage import DatasetRef


def pretraining(params: Params, model_dir: str | Path) -> list[DatasetRef]:
    """The corpora splits and the planted text ``model_dir`` was trained on (none for a snapshot of ``model.source``)."""
    from biaslab.data import sources
    from biaslab.data.provenance import corpus_datasets
    from biaslab.outputs import paths

    if params.model.source:
        return []
    cfg = params.model.pretrain
    refs = corpus_datasets(cfg.corpus_dir or sources.corpus_dir(params.data, cfg.languages), cfg,
                           record=paths.raw_inputs_file("corpora"))  # what the stage depends on in dvc.yaml
    planted = planted_text(model_dir)
    return refs + ([planted] if planted is not None else [])


def planted_text(model_dir: str | Path) -> DatasetRef | None:
    """The planted sentences a model was trained on (context ``train``); ``None`` when it saw none."""
    from biaslab.pretrain.phases import PLANTED_FILE

    path = Path(model_dir) / PLANTED_FILE
    if not path.is_file():
        return None
    key = json.loads(path.read_text(encoding="utf-8"))
    if not key.get("enabled"):
        return None
    settings = key.get("params", {})
    tags = {"dvc_path": path.as_posix(), "direction": key.get("direction"), "dose": settings.get("dose"),
            "strength": settings.get("strength"), "generator": "biaslab.pretrain.planted"}
    return DatasetRef("planted_text", path.as_posix(), lineage.file_md5(path), "train", None,
                      {k: str(v) for k, v in tags.items() if v is not None})
