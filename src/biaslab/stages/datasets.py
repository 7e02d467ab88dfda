"""The prepared data the mitigation stages log as MLflow inputs (:class:`biaslab.lineage.DatasetRef` s).

* LoRA (``tune``, ``finetune``): the GBEM-UA rows of the fine-tune professions (``train``) and of the
  held-back ones (``validation``), as subsets of ``data/prepared/gbem_ua.parquet``;
* embedding edits (``edit_embeddings``): the prepared tables the word lists come from.

Every digest is DVC's, or for a subset derived from it (:func:`biaslab.lineage.subset`).
"""

from __future__ import annotations

from typing import Any

from biaslab import lineage
from biaslab.config import Params
from biaslab.lineage import DatasetRef

# embedding_debias.profession_sources -> the prepared table its words are read from
PROFESSION_TABLES = {"gbem_ua": "gbem_ua.parquet", "occugender": "occugender_jobs.parquet",
                     "winobias": "winobias.parquet"}


def lora_training(params: Params, frame: Any) -> list[DatasetRef]:
    """GBEM-UA's fine-tune rows (``train``) and held-back rows (``validation``) of the prepared table ``frame``."""
    whole = lineage.prepared_file(params.data.prepared_dir, "gbem_ua.parquet", "train")
    refs = []
    for split, context in (("finetune", "train"), ("validation", "validation")):
        rows = frame[frame["split"] == split]
        if len(rows):
            refs.append(lineage.subset(whole, f"split == {split!r}", context, frame=rows.reset_index(drop=True)))
    return refs


def embedding_word_lists(params: Params) -> list[DatasetRef]:
    """The prepared tables an embedding edit reads: gender pairs, the profession sources' tables, and GBEM-UA
    (whose sentences measure the edit's token coverage)."""
    tables = ["gender_pairs.parquet", *(PROFESSION_TABLES[s] for s in params.embedding_debias.profession_sources),
              "gbem_ua.parquet"]
    return [lineage.prepared_file(params.data.prepared_dir, name, "train") for name in dict.fromkeys(tables)]
