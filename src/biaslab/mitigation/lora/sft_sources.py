"""The LoRA training set: prompt-completion examples from the sources named in ``lora.sources``.

* ``gbem_ua`` — GBEM-UA "gender-neutral relevant" QA examples of the fine-tune professions
  (:mod:`biaslab.mitigation.lora.sft_data`);
* ``occupations_en`` — English occupation/pronoun examples on occupations no benchmark uses
  (:mod:`biaslab.mitigation.lora.sft_english`).

Both honour ``lora.augmentation``; rows are sorted (prompt, completion) so the set never depends on
the order of the inputs (the Trainer shuffles with its own seed).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from biaslab.mitigation.lora.sft_data import Augmentation, SftDataError

SOURCES = ("gbem_ua", "occupations_en")


def check_sources(sources: Sequence[str]) -> None:
    """``lora.sources`` must be non-empty and name only :data:`SOURCES` (the error names the bad ones)."""
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown or not sources:
        raise SftDataError(f"lora.sources: unknown or empty {unknown or list(sources)}; choose from {list(SOURCES)}")


def training_set(frame: pd.DataFrame, augmentation: Augmentation, sources: Sequence[str]) -> pd.DataFrame:
    """Every example of ``sources`` (``frame`` = the prepared GBEM-UA table), with a ``source`` column."""
    from biaslab.mitigation.lora.sft_data import training_examples
    from biaslab.mitigation.lora.sft_english import english_examples

    check_sources(sources)
    parts = []
    if "gbem_ua" in sources:
        parts.append(training_examples(frame, augmentation).assign(source="gbem_ua"))
    if "occupations_en" in sources:
        parts.append(english_examples(augmentation).assign(source="occupations_en"))
    examples = pd.concat(parts, ignore_index=True)
    return examples.sort_values(["prompt", "completion"], kind="stable").reset_index(drop=True)
