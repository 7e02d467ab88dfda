"""The ``calibrate``, ``registry`` and ``tracking`` sections: the instrument check, the promotion gate and the run store."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from biaslab.config.section import Section


class CalibrateConfig(Section):
    """The known-answer check of the planted bias (stages ``control`` and ``calibrate``, docs/planted_bias.md)."""

    control_dir: str = Field("models/control", description="the counterbalanced control model")
    families: dict[str, dict[str, Literal["increase", "decrease"]]] = Field(
        default_factory=dict,
        description="family -> {headline metric: expected change from control to planted}; the first metric "
                    "of a family is its primary metric")
    mitigation_metrics: list[str] = Field(
        default_factory=list, description="metrics whose planted effect each mitigation's removed share is reported on")
    quality_metrics: list[str] = Field(default_factory=list, description="LM-quality metrics shown per variant")
    spike_deltas: list[float] = Field(
        default_factory=lambda: [0.0, 0.1, 0.25, 0.5, 1.0, 2.0],
        description="spike-in self-test: nats added to every stereotype-consistent option (docs/spike_in.md); "
                    "starts at 0, increasing")

    @model_validator(mode="after")
    def _spike_grid(self) -> "CalibrateConfig":
        d = self.spike_deltas
        if len(d) < 2 or d[0] != 0 or any(b <= a for a, b in zip(d, d[1:])):
            raise ValueError(f"calibrate.spike_deltas must start at 0 and increase strictly (at least two values), got {d}")
        return self


class GateCondition(Section):
    metric: str
    rule: Literal["better_than_base_beyond_ci", "not_worse_than_base_minus", "at_most", "at_least"]
    tolerance: float = 0.0
    min_share: float = Field(0.0, ge=0, le=1, description=(
        "better_than_base_beyond_ci only: the variant must also remove at least this share of the base's distance "
        "from the metric's ideal (point estimates), so a significant nudge is not a debiasing"))

    @model_validator(mode="after")
    def _min_share_rule(self) -> "GateCondition":
        if self.min_share and self.rule != "better_than_base_beyond_ci":
            raise ValueError(f"registry.gate {self.metric}: min_share applies only to rule "
                             f"better_than_base_beyond_ci, not {self.rule}")
        return self


class RegistryConfig(Section):
    model_name: str = "biaslab-debiased"
    gate: list[GateCondition] = Field(default_factory=list)
    promotions_experiment: str = Field("biaslab-promotions", description=(
        "where `biaslab promote` records every gate decision; only promoters write there on a team server"))


class TrackingConfig(Section):
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_location: str = "mlruns/artifacts"
    experiment: str = "biaslab"
