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

    draws: str | None = Field(
        None, description="draws.jsonl of bench/planted_draws.py --aa (committed): the report's headline counts "
                          "families by the across-draw test on it (biaslab.calibration.draws); null = one draw only")
    draws_recipe: str = Field("committed", description="the recipe of the draws file the headline reads")
    margins_draws: str | None = Field(
        None, description="the draws file whose A/A pairs sized registry.spill_over_margins: the report counts a "
                          "false refusal of those pairs as in-sample, of any other file's as out of sample")
    draws_alpha: float = Field(0.05, gt=0, lt=1, description="the across-draw test's level (one-sided)")

    @model_validator(mode="after")
    def _spike_grid(self) -> "CalibrateConfig":
        d = self.spike_deltas
        if len(d) < 2 or d[0] != 0 or any(b <= a for a, b in zip(d, d[1:])):
            raise ValueError(f"calibrate.spike_deltas must start at 0 and increase strictly (at least two values), got {d}")
        return self


LEGACY_RULES = ("better_than_base_beyond_ci", "not_worse_than_base_minus", "at_most", "at_least")
"""Point-estimate rules on two metrics files (kept for projects that state them; the default gate uses none)."""
PAIRED_RULES = ("paired_bias_reduction", "paired_non_inferior", "paired_no_spill_over", "answer_floor")
"""Rules computed from the per-item predictions of the variant and the base on the same items (docs/gate.md)."""


class GateCondition(Section):
    """One rule of the promotion gate (docs/gate.md says what each computes)."""

    metric: str
    rule: Literal["better_than_base_beyond_ci", "not_worse_than_base_minus", "at_most", "at_least",
                  "paired_bias_reduction", "paired_non_inferior", "paired_no_spill_over", "answer_floor"]
    tolerance: float = 0.0
    min_share: float = Field(0.0, ge=0, le=1, description=(
        "better_than_base_beyond_ci / paired_bias_reduction: the variant must also remove at least this share of "
        "the base's distance from the metric's ideal, so a significant nudge is not a debiasing"))
    reference: str = Field("", description="what the tolerance or floor is sized against (shown in the gate's table)")
    table: str | None = Field(None, description="answer_floor: the predictions table <benchmark>__<table>")
    column: str | None = Field(None, description="answer_floor: the column of that table holding the answer")
    floor: float | None = Field(None, gt=0, lt=1, description="answer_floor: the least share of the variant's test "
                                                             "items every answer must get")
    answer_names: dict[str, str] = Field(default_factory=dict, description=(
        "answer_floor: how the table names each answer value (str of the value -> name), e.g. True: так"))

    @model_validator(mode="after")
    def _fields_of_the_rule(self) -> "GateCondition":
        if self.min_share and self.rule not in ("better_than_base_beyond_ci", "paired_bias_reduction"):
            raise ValueError(f"registry.gate {self.metric}: min_share applies only to rules "
                             f"better_than_base_beyond_ci and paired_bias_reduction, not {self.rule}")
        answer_fields = {"table": self.table, "column": self.column, "floor": self.floor,
                         "answer_names": self.answer_names or None}
        if self.rule == "answer_floor":
            missing = [k for k, v in answer_fields.items() if v is None and k != "answer_names"]
            if missing:
                raise ValueError(f"registry.gate {self.metric}: rule answer_floor needs {missing}")
        elif any(v is not None for v in answer_fields.values()):
            raise ValueError(f"registry.gate {self.metric}: table/column/floor/answer_names apply only to rule "
                             "answer_floor")
        if self.rule in ("paired_non_inferior", "paired_no_spill_over") and self.tolerance < 0:
            raise ValueError(f"registry.gate {self.metric}: a non-inferiority tolerance or margin is >= 0")
        return self


class GateBootstrap(Section):
    """The paired bootstrap of the gate's rules: enough resamples that the verdicts do not move with the seed."""

    samples: int = Field(4000, ge=200, description="resamples of the test items per rule")
    seed: int = 0
    confidence: float = Field(0.95, gt=0, lt=1)


class SpillOverMargin(Section):
    """One family's spill-over margin: how far its primary metric's badness may rise (docs/gate.md)."""

    tolerance: float = Field(ge=0, description="the largest |A/A difference| of re-seeded controls (bench/gate_tolerances.py)")
    reference: str = Field("", description="what it was sized on (items, pairs, command)")


class RegistryConfig(Section):
    model_name: str = "biaslab-debiased"
    gate: list[GateCondition] = Field(default_factory=list)
    bootstrap: GateBootstrap = GateBootstrap()
    spill_over: bool = Field(True, description=(
        "add a paired_no_spill_over rule for the primary metric (first of each calibrate.families entry) of every "
        "enabled family that no paired_bias_reduction rule names"))
    spill_over_margins: dict[str, SpillOverMargin] = Field(default_factory=dict, description=(
        "calibrate.families family -> its spill-over non-inferiority margin; a family without one gets margin 0 "
        "(any rise beyond the paired CI refuses)"))
    promotions_experiment: str = Field("biaslab-promotions", description=(
        "where `biaslab promote` records every gate decision; only promoters write there on a team server"))
    evaluations_experiment: str = Field("biaslab-evaluations", description=(
        "on a team server, where the evaluator's evaluate runs live (workers read it): the only evidence "
        "`biaslab promote` accepts there"))
    champion_model: str = Field("biaslab-champion", description=(
        "the production registered model: `biaslab promote` copies each approved version there (alias champion); "
        "only promoters write it, workers read it"))

    @model_validator(mode="after")
    def _champion_is_separate(self) -> "RegistryConfig":
        if self.champion_model == self.model_name:
            raise ValueError(f"registry.champion_model must differ from registry.model_name ({self.model_name!r}): "
                             "workers write the candidates, only promoters the champion")
        return self


class TrackingConfig(Section):
    tracking_uri: str = "sqlite:///mlruns/mlflow.db"
    artifact_location: str = "mlruns/artifacts"
    experiment: str = "biaslab"
