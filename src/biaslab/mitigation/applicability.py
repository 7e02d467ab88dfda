"""Which mitigations apply to which kind of model, and why not when they do not.

The LoRA mitigation (``tune`` + ``finetune``) is the GBEM-UA paper's: supervised fine-tuning of a
*causal* LM on prompt → answer completions with the loss on the answer tokens, its hyper-parameters
chosen by Optuna on GBEM-UA QA metrics (or the internal yes/no log-probability check), which are
next-token answers. A masked LM (BERT, XLM-R) has no next-token objective and GBEM-UA is skipped for it
(``biaslab.benchmarks.gbem_ua``), so there is no faithful training objective and nothing to tune on; an
adapter trained with the masked-LM objective would be a different mitigation that no seed paper describes.
For a masked LM the two stages therefore do not train: they record :data:`LORA_ON_MASKED_LM` as the
reason, the ``lora`` variant directory says it was skipped (:mod:`biaslab.outputs.variant_dir`), and
evaluation, registry and report carry the reason instead of numbers. The prompt and embedding
mitigations apply to both kinds.
"""

from __future__ import annotations

import os
from pathlib import Path

LORA_ON_MASKED_LM = (
    "LoRA skipped: the model is a masked LM. The LoRA mitigation is GBEM-UA's supervised fine-tuning of a "
    "causal LM on prompt -> answer completions, tuned on GBEM-UA QA metrics that need next-token answers; a "
    "masked LM has neither (GBEM-UA is skipped for it), so there is nothing faithful to train or to tune on."
)


def model_kind(model_dir: str | os.PathLike[str], kind: str = "auto", *, trust_remote_code: bool = False) -> str:
    """``"causal"`` or ``"masked"`` for the model in ``model_dir`` (``kind`` = ``model.kind`` wins unless auto).

    Reads only the config (no weights), with the same rule as loading (:func:`biaslab.models.load.detect_kind`).
    """
    if kind != "auto":
        return kind
    from transformers import AutoConfig

    from biaslab.models.load import detect_kind

    config = AutoConfig.from_pretrained(str(Path(model_dir)), trust_remote_code=trust_remote_code)
    return detect_kind(config)


def lora_skip_reason(model_dir: str | os.PathLike[str], kind: str = "auto", *,
                     trust_remote_code: bool = False) -> str | None:
    """Why LoRA does not apply to the model in ``model_dir`` (``None``: it applies)."""
    if model_kind(model_dir, kind, trust_remote_code=trust_remote_code) == "masked":
        return LORA_ON_MASKED_LM
    return None


def write_skipped_tune(output_dir: str | os.PathLike[str], reason: str) -> Path:
    """``<output_dir>/best_params.json`` saying the study did not run: ``{"skipped": reason, "params": {}}``.

    ``params`` is empty, so a reader of the tuned overrides (:func:`biaslab.mitigation.lora.train.tuned_overrides`)
    finds none.
    """
    import json

    from biaslab.atomic import atomic_write_text

    path = Path(output_dir) / "best_params.json"
    atomic_write_text(path, json.dumps({"skipped": reason, "params": {}}, indent=2) + "\n")
    return path


def write_skipped_variant(output_dir: str | os.PathLike[str], *, base: str, method: str, reason: str) -> Path:
    """The variant directory of a mitigation that does not apply: only a manifest ``{"base", "method", "skipped"}``."""
    from biaslab.atomic import atomic_dir
    from biaslab.outputs import variant_dir

    with atomic_dir(output_dir) as tmp:
        variant_dir.write_manifest(tmp, base=base, method=method, skipped=reason)
    return Path(output_dir)
