"""What a model directory's architecture looks like, without loading a single weight.

The model class is built on PyTorch's ``meta`` device (shapes only, no memory), which tells the
stages what they need from a checkpoint they never load: the class name, the parameter count, the
input-embedding and output-head tensor names, and whether the two are tied. Checkpoint keys may
lack or carry the base-model prefix (GPT-2's hub files say ``wte.weight`` for ``transformer.wte.weight``),
so :meth:`ModelLayout.checkpoint_key` matches a module's tensor name against the files both ways.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from biaslab.models.weights.index import SafetensorsIndex, WeightsError


@dataclass(frozen=True)
class ModelLayout:
    kind: str  # "causal" | "masked"
    architecture: str  # model class name, e.g. LlamaForCausalLM
    n_parameters: int  # tied parameters counted once
    input_embedding: str  # tensor name in the model, e.g. model.embed_tokens.weight
    output_head: str | None  # e.g. lm_head.weight; None when the model has no output embedding
    tied: bool  # the output head shares the input embedding's weight
    base_model_prefix: str
    # (target, source) tensor names tied only while the word embeddings are: untying the config unties them
    # too, e.g. RoBERTa/XLM-R's MLM decoder bias (``lm_head.decoder.bias`` = ``lm_head.bias``), which the
    # checkpoint stores once - so an untied copy must store the target itself (:func:`untie_output_head`)
    untie_losses: tuple[tuple[str, str], ...] = ()

    def checkpoint_key(self, name: str, index: SafetensorsIndex) -> str | None:
        """The key under which tensor ``name`` is stored in ``index`` (with/without the prefix), or None."""
        prefix = f"{self.base_model_prefix}." if self.base_model_prefix else ""
        candidates = [name]
        if prefix and name.startswith(prefix):
            candidates.append(name[len(prefix):])
        elif prefix:
            candidates.append(prefix + name)
        return next((c for c in candidates if c in index), None)

    def require_key(self, name: str, index: SafetensorsIndex) -> str:
        key = self.checkpoint_key(name, index)
        if key is None:
            raise WeightsError(
                f"{index.directory}: the tensor {name!r} of {self.architecture} is not in its safetensors files "
                f"(under that name or without/with the {self.base_model_prefix!r} prefix)"
            )
        return key


def model_layout(directory: str | os.PathLike[str], *, kind: str = "auto",
                 trust_remote_code: bool = False) -> ModelLayout:
    """The :class:`ModelLayout` of the model in ``directory`` (reads ``config.json`` only)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM

    from biaslab.models.load import detect_kind

    config = AutoConfig.from_pretrained(str(Path(directory)), trust_remote_code=trust_remote_code)
    if kind == "auto":
        kind = detect_kind(config)
    auto = AutoModelForMaskedLM if kind == "masked" else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config, trust_remote_code=trust_remote_code)
    names = {id(module): name for name, module in model.named_modules()}
    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    tied = head is not None and head.weight is embedding.weight
    head_name = f"{names[id(head)]}.weight" if head is not None else None
    return ModelLayout(
        kind=kind,
        architecture=type(model).__name__,
        n_parameters=sum(p.numel() for p in model.parameters()),
        input_embedding=f"{names[id(embedding)]}.weight",
        output_head=head_name,
        tied=tied,
        base_model_prefix=getattr(model, "base_model_prefix", "") or "",
        untie_losses=_untie_losses(model, config, auto, head_name, trust_remote_code) if tied else (),
    )


def _untie_losses(model, config, auto, head_name: str | None,
                  trust_remote_code: bool) -> tuple[tuple[str, str], ...]:
    """The ties of ``model`` besides the output head's that a ``tie_word_embeddings: false`` config drops."""
    import copy

    import torch

    tied = dict(getattr(model, "all_tied_weights_keys", None) or {})
    if not any(target != head_name for target in tied):
        return ()
    untied_config = copy.deepcopy(config)
    untied_config.tie_word_embeddings = False
    if getattr(untied_config, "text_config", None) is not None:
        untied_config.text_config.tie_word_embeddings = False
    with torch.device("meta"):
        untied = auto.from_config(untied_config, trust_remote_code=trust_remote_code)
    kept = dict(getattr(untied, "all_tied_weights_keys", None) or {})
    return tuple(sorted((t, s) for t, s in tied.items() if t != head_name and t not in kept))
