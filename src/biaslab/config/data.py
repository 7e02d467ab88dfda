"""The ``data`` section of params.yaml: the mirror, the prepared tables, splits and samples."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from biaslab.config.section import Section
from biaslab.config.section import DATA_DIR_ENV


# --------------------------------------------------------------------------- data
class GbemUaSplit(Section):
    """How GBEM-UA professions are split (by profession, so evaluation professions are never trained on)."""

    finetune_fraction: float = Field(0.5, gt=0, lt=1, description="share of professions used for fine-tuning")
    validation_fraction: float = Field(
        0.2, gt=0, lt=1, description="share of fine-tune professions held back for Optuna validation"
    )
    seed: int = 0


class SampleConfig(Section):
    """Reduced benchmark sizes for smoke runs (``make gpu-smoke``): see :mod:`biaslab.data.sample`."""

    per_group: int = Field(ge=1, description="units (profession, occupation, pair) kept per reported group")
    seed: int = 0


class LmHeldoutConfig(Section):
    """Held-out text of the ``lm_quality`` benchmark (see ``biaslab.data.lm_heldout``)."""

    texts_dir: str | None = Field(
        None, description="null = corpus text the default model never trained on; else a folder in the corpora layout")
    languages: tuple[str, ...] = Field(
        ("en", "uk", "ru"), description="[] = no held-out text (prepare writes none; lm_quality is skipped)")
    max_chars: int = Field(100_000, gt=0, description="held-out characters per language")
    chunk_chars: int = Field(
        300, ge=50, description="characters per scored chunk (cut at line breaks); within the default model's "
                                "128-token training length")


class SplitsConfig(Section):
    """The seeded, stratified selection/test split of OccuGender jobs and lm_quality documents (biaslab.data.splits)."""

    occugender_selection_fraction: float = Field(
        0.5, gt=0, lt=1, description="share of the jobs of each group (stratified by BLS share) used for selection")
    lm_heldout_selection_fraction: float = Field(
        0.5, gt=0, lt=1, description="share of each language's held-out documents (whole; stratified by origin) for selection")
    seed: int = 0


class DataConfig(Section):
    mirror_dir: str = Field("../shared/datasets", description="local mirror read first; env BIASLAB_DATA_DIR wins")
    prepared_dir: str = "data/prepared"
    allow_download: bool = Field(True, description="fall back to the pinned remote source if the mirror lacks a file")
    gbem_ua: GbemUaSplit = GbemUaSplit()
    splits: SplitsConfig = SplitsConfig()
    sample: SampleConfig | None = Field(
        None, description="null = the full tables; {per_group, seed} = a smaller copy of every benchmark table")
    lm_heldout: LmHeldoutConfig = LmHeldoutConfig()

    def resolved_mirror_dir(self) -> Path:
        """The mirror directory, with ``BIASLAB_DATA_DIR`` taking precedence over params; a relative one is
        resolved against the original workspace inside a DVC experiment copy (:mod:`biaslab.config.workspace`)."""
        from biaslab.config.workspace import outside_path

        return outside_path(os.environ.get(DATA_DIR_ENV) or self.mirror_dir)
