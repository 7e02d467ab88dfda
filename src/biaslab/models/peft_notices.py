"""Silence the one PEFT notice no biaslab user can act on, wherever PEFT wraps a model.

PEFT (0.21, as locked) reads transformers' deprecated ``is_gradient_checkpointing`` when it wraps a model (a
trainer given a ``peft_config``, ``PeftModel.from_pretrained``); transformers 5 answers with a FutureWarning
naming ``is_activation_checkpointing``. It appeared in every tuning trial, finetune and LoRA evaluation log.
The filter is scoped to the wrapping call, so every other warning still reaches the user.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

DEPRECATION_MESSAGE = "`is_gradient_checkpointing` is deprecated"


@contextmanager
def quiet_checkpointing_deprecation() -> Iterator[None]:
    """Within the block, ignore transformers' FutureWarning about ``is_gradient_checkpointing`` only."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=DEPRECATION_MESSAGE, category=FutureWarning)
        yield
