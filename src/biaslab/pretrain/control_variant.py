"""The planted bias's control model as a variant: its reserved name, when there is none, params with it.

The control (stage ``control_model``, :mod:`biaslab.pretrain.control`) is the default model's training with
the planted sentences' genders counterbalanced; the calibrate stage (:mod:`pipelines.calibrate`)
evaluates it as an extra ``method: none`` variant named ``control``. Both stages, and ``base_model`` (whose
shared checkpoint only exists with a planted bias), ask :func:`no_planted_bias` first. This module is kept
free of training and comparison code so that none of those stages depends on the others' code.
"""

from __future__ import annotations

from biaslab.config import ConfigError, Params, VariantConfig

CONTROL = "control"


def no_planted_bias(params: Params) -> str | None:
    """Why there is nothing to calibrate on (a hub model, or the planted bias disabled), or None."""
    if params.model.source:
        return f"model.source is {params.model.source!r}: a snapshotted model has no planted bias to calibrate on"
    if not params.model.pretrain.planted_bias.enabled:
        return "model.pretrain.planted_bias.enabled is false: the default model has no planted bias"
    return None


def with_control(params: Params) -> Params:
    """``params`` with the control model as an extra ``method: none`` variant named ``control``."""
    if CONTROL in params.variants:
        raise ConfigError(f"params.yaml variants: {CONTROL!r} is reserved for the calibrate stage's control model")
    control = VariantConfig(method="none", model_dir=params.calibrate.control_dir,
                            description="counterbalanced control of the planted bias (calibrate stage)")
    return params.model_copy(update={"variants": {**params.variants, CONTROL: control}})
