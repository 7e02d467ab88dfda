"""Optuna multi-objective search over LoRA hyper-parameters: accuracy up, gender gap down.

    python -m pipelines.tune                 # the DVC stage (also: a worker; start more to share the study)

Each trial samples LoRA hyper-parameters (``tune.search_space`` over :data:`DEFAULT_SEARCH_SPACE`),
trains an adapter on the fine-tune professions for at most ``trial_max_steps`` optimizer steps and
scores the *validation* professions (never the evaluation ones) on two objectives:

* ``objective: gbem_ua`` - the benchmark's own metrics (``accuracy_metric`` maximized, ``gap_metric``
  minimized; defaults are the registry gate's QA F1 and QADiff) via
  ``biaslab.benchmarks.gbem_ua.evaluate_gbem_ua``;
* ``objective: logprob`` - an internal check needing nothing but the scorer: accuracy of
  "P(' так') > P(' ні')" against ``is_correct``, and the share of male/female item pairs (same
  profession, experience and job-title form) whose answers disagree (QADiff's definition).

The study (:mod:`biaslab.mitigation.lora.study`: storage, name, concurrency, choice) lives in shared storage (``journal:<path>`` = an append-only file with a lock, or any RDB
URL), is opened with ``load_if_exists``, and ``n_trials`` is the **total** of completed trials: a rerun
or a second worker runs only the missing ones. Its name is ``study_name`` + a hash of everything that
makes trials comparable (search space, trial budget, objective, fixed LoRA keys, base model, data), so
a changed configuration starts a new study instead of mixing incomparable trials.

Exactly ``n_trials``, even with concurrent workers: a worker only asks for a trial while fewer than
``n_trials`` are complete or running, and a trial whose number ranks beyond ``n_trials`` among those
(two workers asked at the same instant) is closed at once as ``FAIL`` with user attr ``surplus``. A killed
worker's RUNNING trial is failed and re-queued with the same parameters (Optuna's
``RetryHeartbeatStaleTrialCallback``, at most ``trial_retries`` times): on an RDB storage once its heartbeat
(``heartbeat_seconds``) has been silent for ``heartbeat_grace_seconds``; on a journal (no heartbeat in
Optuna 5) once its process on this host is gone. A worker returns when the study is complete.
Sampling is seeded per trial (``seed + trial.number``), so workers never draw the same parameters and a
rerun draws what the first run would have.

Every trial records the optimizer steps it trained as ``max_steps`` in its LoRA overrides, so the
finetune stage trains what the study scored: a trial capped at 20 steps stands for 20 steps, not for the
``epochs`` it sampled. (The default model's run showed why: the best 20-step trial answered both «так»
and «ні»; three full epochs of the same settings answered everyone «так».)

Choice of the trial written to ``<output_dir>/best_params.json`` (:func:`choose_trial`):

* with ``accuracy_tolerance`` (the registry gate's rule: accuracy may fall at most that much below the
  base's), the base model is scored on the validation professions once per study (the study's user attr
  ``baseline``); among the trials whose accuracy is at least the base's minus the tolerance, the one with
  the smallest gap (ties: higher accuracy, lower trial number). A trial that closes the gap by answering
  everyone alike falls below that floor, as it would at the gate.
* without it, or when no trial reaches the floor: among the Pareto-optimal trials, those whose gap is at
  most the median gap of the Pareto set; of these the most accurate (ties: smaller gap, then lower trial
  number).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.atomic import atomic_write_text
from biaslab.config import LoraConfig, SearchRange, TuneConfig
from biaslab.mitigation.lora.train import hyperparameters, with_overrides
from biaslab.mitigation.lora.training_plan import (
    Capabilities,
    TrainingPlan,
    free_memory,
    load_for_training,
    plan_training,
)
from biaslab.run_log import RunLog
from biaslab.mitigation.lora.study import (
    choose_trial,
    make_storage,
    open_study,
    plot_pareto,
    run_missing_trials,
    search_space,
    study_name,
)

INT_KEYS = ("r", "alpha")
ACCURACY, GAP = "accuracy", "gap"


@dataclass(frozen=True)
class Objectives:
    accuracy: float  # maximized
    gap: float  # minimized
    names: tuple[str, str]  # the metrics they are, e.g. ("gbem_ua/qa_f1_man_nofem", "gbem_ua/qa_diff_fem")


Evaluator = Callable[[Any, pd.DataFrame], Objectives]


def _encode(choice: Any) -> Any:
    # Optuna choices must be None/bool/int/float/str: a list of module names becomes "q_proj,v_proj"
    return ",".join(choice) if isinstance(choice, (list, tuple)) else choice


def suggest(trial: Any, space: dict[str, list[Any] | SearchRange]) -> dict[str, Any]:
    """Sample LoRA overrides for one trial (``target_modules`` decoded back to a tuple)."""
    overrides: dict[str, Any] = {}
    for name in sorted(space):
        spec = space[name]
        if isinstance(spec, SearchRange):
            if name in INT_KEYS:
                value: Any = trial.suggest_int(name, int(spec.low), int(spec.high), log=spec.log)
            else:
                value = trial.suggest_float(name, spec.low, spec.high, log=spec.log)
        else:
            value = trial.suggest_categorical(name, [_encode(c) for c in spec])
        overrides[name] = tuple(value.split(",")) if name == "target_modules" else value
    return overrides


# --------------------------------------------------------------------------- objectives
def logprob_objectives(lm: Any, frame: pd.DataFrame) -> Objectives:
    """Accuracy of P(' так') > P(' ні') vs ``is_correct``, and male/female answer disagreement."""
    from biaslab.mitigation.lora.sft_data import NO, YES, qa_prompt
    from biaslab.scoring.requests import Request

    frame = frame.reset_index(drop=True)
    prompts = [qa_prompt(s) for s in frame["qa_sentence"]]
    scores = lm.loglikelihood([Request(p, c) for p in prompts for c in (YES, NO)])
    yes = pd.Series([scores[2 * i].logprob > scores[2 * i + 1].logprob for i in range(len(frame))])
    accuracy = float((yes == frame["is_correct"].astype(bool)).mean())
    answers = frame.assign(yes=yes).drop_duplicates(["profession", "experience", "is_feminitive", "is_male"])
    paired = answers.pivot_table(index=["profession", "experience", "is_feminitive"], columns="is_male",
                                 values="yes", aggfunc="first").dropna()
    gap = float((paired[True] != paired[False]).mean()) if len(paired) else math.nan
    return Objectives(accuracy, gap, ("tune/qa_accuracy", "tune/qa_gender_disagreement"))


def gbem_ua_evaluator(cfg: TuneConfig, options: dict[str, Any], seed: int = 0) -> Evaluator:
    """The GBEM-UA benchmark's metrics on any frame (bootstrap off: only point values are needed)."""
    from biaslab.benchmarks.base import EvalContext
    from biaslab.benchmarks.gbem_ua import evaluate_gbem_ua

    ctx = EvalContext(seed=seed, bootstrap_samples=0, progress=False)

    def evaluate(lm: Any, frame: pd.DataFrame) -> Objectives:
        metrics = evaluate_gbem_ua(lm, frame, dict(options), ctx).metrics
        missing = [m for m in (cfg.accuracy_metric, cfg.gap_metric) if m not in metrics]
        if missing:
            raise KeyError(f"params.yaml tune: metric(s) {missing} not produced by gbem_ua; has {sorted(metrics)}")
        # the gap is minimized as its distance to the ideal: the value of a lower-is-better metric,
        # |value - ideal| of a target metric (a signed gap such as qa_logodds_gap_fem: ideal 0)
        return Objectives(metrics[cfg.accuracy_metric].value, metrics[cfg.gap_metric].distance_to_ideal(),
                          (cfg.accuracy_metric, cfg.gap_metric))

    return evaluate


def make_evaluator(cfg: TuneConfig, options: dict[str, Any] | None = None, seed: int = 0) -> Evaluator:
    return logprob_objectives if cfg.objective == "logprob" else gbem_ua_evaluator(cfg, options or {}, seed)


# --------------------------------------------------------------------------- one trial
def trial_steps(lora: LoraConfig, n_examples: int, cap: int) -> int:
    """min(cap, the steps ``lora`` plans): ``max_steps`` when positive, else ``epochs`` x steps per epoch
    (ceil(ceil(n / batch) / grad_accum))."""
    if lora.max_steps > 0:
        return max(1, min(cap, lora.max_steps))
    per_epoch = math.ceil(math.ceil(n_examples / lora.per_device_batch_size) / lora.gradient_accumulation_steps)
    return max(1, min(cap, math.ceil(per_epoch * lora.epochs)))


class BaseForTrials:
    """The base model, loaded once per worker and shared by its trials (``reuse=False``: once per trial).

    A trial wraps the base in a LoRA ``PeftModel`` (PEFT injects adapter layers into the base's
    modules); :meth:`release` takes them out again with ``unload()`` (no merge: the base weights were
    frozen and are untouched), drops the trial's references and frees memory (``gc.collect()``, and
    ``torch.cuda.empty_cache()`` on a GPU). A trial that fails drops the shared base, so the next one
    loads a clean copy. ``loads`` counts the loads (tests).
    """

    def __init__(self, base_dir: str | Path, plan: TrainingPlan, reuse: bool = True):
        self.base_dir, self.plan, self.reuse = base_dir, plan, reuse
        self.loaded: Any = None
        self.loads = 0

    def get(self) -> Any:
        if self.loaded is None or not self.reuse:
            self.loaded = None
            free_memory(self.plan.device)
            self.loaded = load_for_training(self.base_dir, self.plan)
            self.loads += 1
        return self.loaded

    def release(self, adapted: Any) -> None:
        """Remove the trial's adapter from the shared base and free the trial's memory."""
        base = adapted.unload()
        if any("lora_" in name for name, _ in base.named_parameters()):
            raise RuntimeError("tune: LoRA layers left in the shared base model after unload()")
        self.loaded.model = base
        free_memory(self.plan.device)

    def discard(self) -> None:
        self.loaded = None
        free_memory(self.plan.device)


def make_objective(base_dir: str | Path, train: pd.DataFrame, valid: pd.DataFrame, lora: LoraConfig,
                   cfg: TuneConfig, evaluate: Evaluator, *, plan: TrainingPlan | None = None,
                   base: BaseForTrials | None = None, add_bos: str | bool = "auto",
                   prompt_format: str = "raw", log: RunLog | None = None,
                   pairs: pd.DataFrame | None = None, anchors: Any = None) -> Callable[[Any], tuple[float, float]]:
    """Trial -> (accuracy, gap): train a LoRA on the shared base, score validation, log a nested run.

    Training examples and validation prompts are tokenised with the evaluation's formatting
    (``add_bos``, ``prompt_format``), so a trial is scored on what it was trained on. With ``log`` and
    an active run (the tune stage's), each trial is a nested run ``trial-<n>`` with its params, curves
    and objectives. ``pairs``: the counterfactual pairs of ``lora.objective: logit_pairing``; ``anchors``: the
    study's :class:`~biaslab.mitigation.lora.logit_pairing.AnchorCache` (the base's anchors, computed once).

    Every trial trains and is scored on ``plan.device`` (the shared base is loaded there), as is the study's
    baseline (:func:`study_baseline`).
    """
    from biaslab.config import ScoringConfig

    space = search_space(cfg)
    plan = plan or plan_training(lora)
    base = base or BaseForTrials(base_dir, plan)
    scoring = ScoringConfig(add_bos=add_bos)  # formatting only: no result cache for adapted trial models

    def objective(trial: Any) -> tuple[float, float]:
        from biaslab.mitigation.lora.train import train_lora
        from biaslab.models.load import make_scorer
        from biaslab.scoring.formatting import PromptFormat

        overrides = suggest(trial, space)
        trial_cfg = with_overrides(lora, overrides)
        steps = trial_steps(trial_cfg, len(train), cfg.trial_max_steps)
        overrides["max_steps"] = steps  # what this trial trained and is scored on: the finetune trains the same
        trial.set_user_attr("lora_overrides", {k: list(v) if isinstance(v, tuple) else v for k, v in overrides.items()})
        loaded = base.get()
        tracked = log is not None and log.active_run_id() is not None
        nested = (log.stage_run("tune", nested=True, run_name=f"trial-{trial.number}",
                                tags={"optuna_trial": trial.number, "optuna_study": trial.study.study_name})
                  if tracked else contextlib.nullcontext())
        try:
            with nested as run:  # a nested MLflow run under the active `tune` run, or nothing when tracking is off
                run_id = run.info.run_id if run is not None else None
                if run_id:
                    trial.set_user_attr("mlflow_run_id", run_id)
                    log.log_params({"trial": trial.number, "steps": steps, **hyperparameters(trial_cfg)})
                with tempfile.TemporaryDirectory(prefix=f"trial-{trial.number}-") as work:
                    fmt = PromptFormat.create(loaded.tokenizer, add_bos, prompt_format)
                    outcome = train_lora(loaded.model, loaded.tokenizer, train, trial_cfg, work, max_steps=steps,
                                         checkpoints=False, curve_prefix="trial", plan=plan, fmt=fmt,
                                         log=log if tracked else None, pairs=pairs, anchor_cache=anchors)
                result = evaluate(make_scorer(dataclasses.replace(loaded, model=outcome.model), scoring,
                                              prompt_format=prompt_format), valid)
                if run_id:
                    log.log_metric(f"objective/{ACCURACY}", result.accuracy)
                    log.log_metric(f"objective/{GAP}", result.gap)
                    log.set_tags({"objective.accuracy": result.names[0], "objective.gap": result.names[1]})
            adapted = outcome.model
            del outcome
            base.release(adapted)
        except BaseException:
            base.discard()
            raise
        trial.set_user_attr("objective_names", list(result.names))
        if not (math.isfinite(result.accuracy) and math.isfinite(result.gap)):
            raise ValueError(f"trial {trial.number}: non-finite objective {result}")
        return result.accuracy, result.gap

    return objective


def study_baseline(study: Any, base: BaseForTrials, valid: pd.DataFrame, evaluate: Evaluator, *,
                   add_bos: str | bool = "auto", prompt_format: str = "raw") -> dict[str, float]:
    """The base model's objectives on the validation professions (the accuracy floor's reference).

    Scored once per study and kept as the study's user attr ``baseline``: a rerun or a second worker
    reads it instead of scoring again (the study's name already pins the base model and the data).
    """
    from biaslab.config import ScoringConfig
    from biaslab.models.load import make_scorer

    cached = study.user_attrs.get("baseline")
    if cached is not None:
        return cached
    result = evaluate(make_scorer(base.get(), ScoringConfig(add_bos=add_bos), prompt_format=prompt_format), valid)
    baseline = {ACCURACY: float(result.accuracy), GAP: float(result.gap)}
    study.set_user_attr("baseline", baseline)
    return baseline


# --------------------------------------------------------------------------- the stage
@dataclass
class TuneResult:
    study_name: str
    best_trial: int
    best_params: dict[str, Any]
    values: dict[str, float]
    n_complete: int
    ran_here: list[int]
    best_params_path: Path
    pareto_path: Path
    payload: dict[str, Any]  # what best_params.json holds


def tune(base_dir: str | Path, frame: pd.DataFrame, cfg: TuneConfig, lora: LoraConfig, *,
         root: str | Path = ".", options: dict[str, Any] | None = None,
         evaluator: Evaluator | None = None, add_bos: str | bool = "auto", prompt_format: str = "raw",
         log: RunLog | None = None, caps: Capabilities | None = None) -> TuneResult:
    """Run this worker's share of the study, then write best_params.json and the Pareto plot.

    ``add_bos`` / ``prompt_format``: the evaluation's ``scoring.add_bos`` / ``evaluation.prompt_format``.
    ``log``: where the trials' nested runs go (the tune stage passes :mod:`biaslab.tracking.runs`; None = none).
    ``caps``: the machine (default: probed), so tests decide the device. The baseline, every trial's training
    and its scoring run on the plan's device (one shared base, loaded there); logit pairing's anchors are
    computed once for the study (:class:`~biaslab.mitigation.lora.logit_pairing.AnchorCache`).
    """
    from optuna.trial import TrialState

    from biaslab.mitigation.lora.logit_pairing import AnchorCache, pair_set
    from biaslab.mitigation.lora.sft_sources import training_set
    from biaslab.outputs.variant_dir import fingerprint_dir

    root = Path(root)
    plan = plan_training(lora, caps)  # fails here, before any trial, when the machine cannot run the LoRA options
    train = training_set(frame, lora.augmentation, lora.sources)
    pairs = pair_set(frame, lora.sources) if lora.objective == "logit_pairing" else None
    valid = frame[frame["split"] == "validation"].reset_index(drop=True)
    if valid.empty:
        raise ValueError("gbem_ua: no rows with split == 'validation' to tune on; check data.gbem_ua fractions")
    fingerprint = fingerprint_dir(base_dir)
    name = study_name(cfg, lora, fingerprint, train, valid, options, plan.describe(),
                      {"add_bos": add_bos, "prompt_format": prompt_format})
    anchors = (AnchorCache(json.dumps([fingerprint, plan.describe(), add_bos, prompt_format], default=str))
               if pairs is not None and lora.pairing_anchor else None)
    storage = make_storage(cfg.storage, root, cfg)
    study = open_study(name, storage, cfg.seed)
    evaluate = evaluator or make_evaluator(cfg, options, cfg.seed)
    base = BaseForTrials(base_dir, plan)
    baseline = (study_baseline(study, base, valid, evaluate, add_bos=add_bos, prompt_format=prompt_format)
                if cfg.accuracy_tolerance is not None else None)
    floor = None if baseline is None else baseline[ACCURACY] - cfg.accuracy_tolerance
    objective = make_objective(base_dir, train, valid, lora, cfg, evaluate, plan=plan, base=base, add_bos=add_bos,
                               prompt_format=prompt_format, log=log, pairs=pairs, anchors=anchors)
    ran = run_missing_trials(study, cfg.n_trials, objective, cfg.trial_retries)
    best, rule = choose_trial(study, floor)
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    names = tuple(best.user_attrs.get("objective_names", (ACCURACY, GAP)))
    out = root / cfg.output_dir
    pareto_path = out / "pareto_front.png"
    fig = plot_pareto(study, names, pareto_path, best)
    payload = {
        "study_name": name, "trial": best.number, "params": best.user_attrs["lora_overrides"],
        "values": {ACCURACY: best.values[0], GAP: best.values[1]}, "objective_names": list(names),
        "rule": rule, "baseline": baseline, "accuracy_floor": floor, "n_complete": len(complete),
        "pareto_trials": sorted(t.number for t in study.best_trials),
    }
    best_path = out / "best_params.json"
    atomic_write_text(best_path, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return TuneResult(name, best.number, payload["params"], payload["values"], len(complete), ran,
                      best_path, pareto_path, payload)
