"""The base of every params section: unknown keys are errors, values are immutable."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ConfigDict

DATA_DIR_ENV = "BIASLAB_DATA_DIR"


class Section(BaseModel):
    """Base for every params section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


SectionT = TypeVar("SectionT", bound=Section)
