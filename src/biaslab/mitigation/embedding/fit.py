"""Build an embedding-debiased variant directory (the ``edit_embeddings`` stage's library call).

    base model ─► gender subspace B [k, d] (gender_pairs.parquet, params languages; rows read from the files)
               ─► target words (soft | hard) ─► token rows + span sequences
               ─► apply = "rows":       variant.json {"base", "method", ...} + embedding_rows.safetensors (the edited
                                          target rows; the default: the checkpoint edit stored as the edit)
                  apply = "checkpoint": copy the base's files, untie head, overwrite the target rows
                  apply = "hook":       variant.json {"base", "method", ...} + embedding_hook.safetensors
               ─► edit_report.json (components, explained variance, rows edited, shared sub-word share)

The directory is written atomically (``atomic_dir``). The report has no timestamps, so the same inputs
give byte-identical outputs (and the same model fingerprint).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.atomic import atomic_dir
from biaslab.config import EmbeddingDebiasConfig
from biaslab.errors import MissingInputError
from biaslab.mitigation.embedding.coverage import edit_coverage
from biaslab.mitigation.embedding.subspace import gender_subspace
from biaslab.mitigation.embedding.targets import build_targets
from biaslab.mitigation.embedding.words import WordEncoder
from biaslab.outputs import variant_dir

REPORT_FILE = "edit_report.json"


def read_pairs(prepared_dir: Path, languages: tuple[str, ...]) -> dict[str, list[tuple[str, str]]]:
    """``{language: distinct (male, female) pairs}`` from ``gender_pairs.parquet``, in file order."""
    path = prepared_dir / "gender_pairs.parquet"
    if not path.is_file():
        raise MissingInputError(f"{path}: prepared table missing; run the prepare stage (dvc repro prepare)")
    frame = pd.read_parquet(path)
    out = {}
    for language in languages:
        rows = frame[frame["language"] == language]
        out[language] = list(dict.fromkeys(zip(rows["male"].str.strip(), rows["female"].str.strip())))
    return out


def eval_sentences(prepared_dir: Path) -> list[str]:
    """GBEM-UA evaluation sentences: ``qa_sentence`` and ``prob_sentence`` with ``BLANK `` removed."""
    frame = pd.read_parquet(prepared_dir / "gbem_ua.parquet")
    frame = frame[frame["split"] == "eval"]
    return list(frame["qa_sentence"]) + list(frame["prob_sentence"].str.replace("BLANK ", "", regex=False))


def fit_embedding_variant(
    *, base_dir: str | os.PathLike[str], cfg: EmbeddingDebiasConfig, mode: str, apply: str,
    prepared_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], base_ref: str | None = None,
    kind: str = "auto", trust_remote_code: bool = False,
) -> dict[str, Any]:
    """Fit the subspace on ``base_dir``'s input embeddings, write the variant to ``out_dir``; return the report.

    The model is never loaded: the embedding rows the fit needs are read from the safetensors files,
    the rows edit stores the edited target rows (:func:`.edit.edit_rows`) and a checkpoint edit patches them
    into a byte copy (:func:`.edit.edit_checkpoint`), so the variant keeps the base's dtype and the stage's
    memory does not grow with the model. ``base_ref`` is the base path recorded in the report and a rows or
    hook variant's ``variant.json`` (default: ``base_dir``).
    """
    import torch
    from transformers import AutoTokenizer

    from biaslab.mitigation.embedding.edit import edit_checkpoint, edit_rows
    from biaslab.models.embedding_hook import save_hook
    from biaslab.mitigation.embedding.rows import EmbeddingRows
    from biaslab.models.weights.index import SafetensorsIndex
    from biaslab.models.weights.layout import model_layout

    prepared_dir, base_ref = Path(prepared_dir), str(base_ref if base_ref is not None else base_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(base_dir), trust_remote_code=trust_remote_code)
    layout = model_layout(base_dir, kind=kind, trust_remote_code=trust_remote_code)
    index = SafetensorsIndex(base_dir)
    rows = EmbeddingRows.from_checkpoint(index, layout.require_key(layout.input_embedding, index))
    encoder = WordEncoder(tokenizer)
    pairs = read_pairs(prepared_dir, cfg.languages)
    subspace = gender_subspace([p for ps in pairs.values() for p in ps], rows, encoder,
                               cfg.n_components, cfg.normalize_word_vectors)
    words, tokens = build_targets(encoder, prepared_dir, cfg, mode)
    coverage = edit_coverage(tokenizer, eval_sentences(prepared_dir), tokens.row_ids, tokens.sequences)
    basis = torch.from_numpy(subspace.basis)
    report: dict[str, Any] = {
        "mode": mode, "apply": apply, "base": base_ref,
        "subspace": {"n_components": cfg.n_components, "n_pairs": subspace.n_pairs,
                     "pairs_per_language": {k: len(v) for k, v in pairs.items()},
                     "explained_variance_ratio": subspace.explained_variance_ratio.tolist(),
                     "dropped_pairs": subspace.dropped, "embedding_rows_read": rows.rows_read},
        "targets": {"words_per_language": {k: len(v) for k, v in words.items()}, "n_words": tokens.n_words,
                    "rows_edited": len(tokens.row_ids), "span_sequences": len(tokens.sequences),
                    "vocab_size": len(tokenizer)},
        "coverage_gbem_ua_eval": coverage,
    }
    with atomic_dir(out_dir) as tmp:
        if apply == "rows":
            report |= edit_rows(base_dir, tmp, layout, basis, tokens.row_ids)
            variant_dir.write_manifest(tmp, base=base_ref, method="embedding", mode=mode, apply="rows")
        elif apply == "checkpoint":
            report |= edit_checkpoint(base_dir, tmp, layout, basis, tokens.row_ids)
        elif apply == "hook":
            save_hook(tmp, basis, tokens.sequences, tokens.row_ids, len(tokenizer))
            variant_dir.write_manifest(tmp, base=base_ref, method="embedding", mode=mode, apply="hook")
        else:
            raise ValueError(f"embedding_apply must be 'rows', 'checkpoint' or 'hook', got {apply!r}")
        (tmp / "target_words.json").write_text(json.dumps(words, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        (tmp / REPORT_FILE).write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return report


def report_metrics(report: dict[str, Any]) -> dict[str, float]:
    """Flat numeric view of a report for MLflow (``explained_variance_ratio.0`` …)."""
    metrics = {f"explained_variance_ratio.{i}": v
               for i, v in enumerate(report["subspace"]["explained_variance_ratio"])}
    metrics["n_pairs"] = report["subspace"]["n_pairs"]
    metrics.update({k: report["targets"][k] for k in ("n_words", "rows_edited", "span_sequences")})
    metrics.update({f"eval.{k}": v for k, v in report["coverage_gbem_ua_eval"].items()})
    if "max_residual_projection" in report:
        metrics["max_residual_projection"] = report["max_residual_projection"]
    return {k: float(v) for k, v in metrics.items()}
