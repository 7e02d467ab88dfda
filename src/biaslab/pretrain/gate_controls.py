"""The gate's controls (variants of ``method: control``, stage ``gate_control``; docs/gate.md "Controls").

* **positive** (``balanced_finetune``): the base model, trained on for a few steps on the planted recipe's
  *own* counterbalanced text (``direction: balanced``: the same frames as the planted text, genders
  alternating per item; :mod:`biaslab.pretrain.planted`), mixed into every batch at the recipe's ``dose``
  with corpus rows, as the control model's second phase mixes them. No benchmark item is read: the planted
  templates never use a benchmark's prompt (``tests/unit/test_planted_overlap.py``). It removes the planted
  bias the way the recipe's own control shows it can be removed, so a gate that cannot pass it cannot pass
  anything that works.
* **negative** (``noised_embeddings``): the base's input embeddings plus seeded Gaussian noise of ``scale``
  times their standard deviation: every token's meaning blurred, so the model's language gets worse. A gate
  that approves it has no harm rule that works.

Both are labelled controls, never mitigations (their variant descriptions say so).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from biaslab.atomic import atomic_dir
from biaslab.config import GateControl, Params

CONTROL_FILE = "gate_control.json"  # next to the control's weights: what was done, for a reader of the folder


def build_control(params: Params, control: GateControl, base_dir: str | os.PathLike[str],
                  out_dir: str | os.PathLike[str], *, progress: bool = True) -> dict[str, Any]:
    """Build the control ``control`` from the model in ``base_dir`` into ``out_dir`` (atomic); its record."""
    if control.recipe == "balanced_finetune":
        return positive_control(params, control, base_dir, out_dir, progress=progress)
    return negative_control(control, base_dir, out_dir)


def positive_control(params: Params, control: GateControl, base_dir: str | os.PathLike[str],
                     out_dir: str | os.PathLike[str], *, progress: bool = True, data: Any = None) -> dict[str, Any]:
    """``control.steps`` steps on the planted recipe's counterbalanced text mixed with corpus rows, from the
    weights in ``base_dir`` (a fresh AdamW, the recipe's batch and sequence length, ``learning_rate`` reached
    by a linear warmup over the first tenth of the steps - a fresh AdamW's first updates are as large as the
    rate whatever the gradient - then decayed by a cosine to 10 %). Needs the planted bias enabled (its
    lexicon and dose). ``data``: the corpus blocks already prepared with the base's tokenizer (a sweep
    prepares them once)."""
    import torch
    from transformers import AutoTokenizer, LlamaForCausalLM

    from biaslab.pretrain.blocks import prepare_data
    from biaslab.pretrain.phases import _splits
    from biaslab.pretrain.planted.lexicon import build_lexicon
    from biaslab.pretrain.planted.mixture import planted_blocks, rows_per_batch
    from biaslab.pretrain.train import Mixture, TrainState, make_optimizer, summarize, train_steps, without_timings

    cfg = params.model.pretrain
    pb = cfg.planted_bias
    rows = rows_per_batch(pb, cfg.batch_size)
    if not rows:
        raise ValueError("a balanced_finetune control needs model.pretrain.planted_bias enabled with a dose > 0")
    tuned = cfg.model_copy(update={"learning_rate": control.learning_rate, "warmup_steps": max(1, control.steps // 10),
                                   "max_steps": control.steps, "eval_every": control.steps, "seed": control.seed})
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    model = LlamaForCausalLM.from_pretrained(base_dir, use_safetensors=True, dtype=torch.float32)
    data = data if data is not None else prepare_data(_splits(params), cfg, tokenizer=tokenizer)
    lexicon = build_lexicon(params.data.prepared_dir, pb.coded_share, pb.uk_male_coded_share, pb.seed, pb.en_sources)
    blocks, stats = planted_blocks(lexicon, pb, "balanced", tokenizer, rows * control.steps, cfg.seq_len)
    state = TrainState(model, make_optimizer(model, tuned))
    stopped_by = train_steps(state, data, tuned, control.steps, mixture=Mixture(blocks, rows, control.seed),
                             progress=progress, desc="positive_control")
    summary = summarize(state, data, tuned, stopped_by, state.train_seconds / 60,
                        gate_control=control.model_dump(mode="json"), balanced_pool=stats)
    record = {"role": control.role, "recipe": control.recipe, "base_dir": str(base_dir),
              "control": control.model_dump(mode="json"), "planted_rows_per_batch": rows,
              "final_train_loss": summary["final_train_loss"], "val_bits_per_char": summary["val_bits_per_char"]}
    with atomic_dir(out_dir) as tmp:
        state.model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "training_summary.json").write_text(
            json.dumps(without_timings(summary), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        (tmp / CONTROL_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return record


def noise_embeddings(weight: Any, scale: float, seed: int) -> Any:
    """``weight`` + N(0, (scale · sd(weight))²) noise drawn from a CPU generator seeded with ``seed``."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(weight.shape, generator=generator, dtype=torch.float32)
    return (weight.float() + noise * (scale * float(weight.float().std()))).to(weight.dtype)


def negative_control(control: GateControl, base_dir: str | os.PathLike[str],
                     out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The model in ``base_dir`` with its input embeddings noised (:func:`noise_embeddings`), saved whole."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(base_dir, use_safetensors=True)
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    embeddings = model.get_input_embeddings()
    before = embeddings.weight.detach().clone()
    with torch.no_grad():
        embeddings.weight.copy_(noise_embeddings(before, control.scale, control.seed))
    tied = model.get_output_embeddings() is not None and \
        model.get_output_embeddings().weight.data_ptr() == embeddings.weight.data_ptr()
    change = (embeddings.weight.detach().float() - before.float()).norm() / before.float().norm()
    record = {"role": control.role, "recipe": control.recipe, "base_dir": str(base_dir),
              "control": control.model_dump(mode="json"), "tied_output_embeddings": bool(tied),
              "embedding_sd": float(before.float().std()), "relative_change": float(change)}
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (Path(tmp) / CONTROL_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return record
