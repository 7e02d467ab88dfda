"""The Optuna study that LoRA tuning shares between workers: its storage (journal:<path> or an RDB URL), a name that changes with everything that makes trials comparable, per-trial seeded sampling, exactly n_trials across concurrent workers (dead workers' trials failed and retried: Optuna's heartbeat on an RDB, process liveness on a journal), the choice of the trial to use and the Pareto plot. See :mod: for the search itself."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.config import LoraConfig, SearchRange, TuneConfig
from biaslab.mitigation.lora.train import TUNABLE_KEYS, hyperparameters


# --------------------------------------------------------------------------- study
DEFAULT_SEARCH_SPACE: dict[str, list[Any] | SearchRange] = {
    "r": [4, 8, 16, 32],
    "alpha": [4, 8, 16, 32],
    "dropout": SearchRange(low=0.0, high=0.3),
    "learning_rate": SearchRange(low=1e-5, high=1e-3, log=True),
    "epochs": [1.0, 2.0, 3.0],
    "target_modules": [["q_proj", "k_proj", "v_proj"], ["q_proj", "v_proj"]],
}


STORAGE_ENV = "BIASLAB_OPTUNA_STORAGE"


CHOICE_RULE = ("pareto-optimal trials with gap <= median Pareto gap; highest accuracy "
               "(ties: lower gap, lower trial number)")


FLOOR_RULE = ("trials with accuracy >= base accuracy - accuracy_tolerance; lowest gap "
              "(ties: higher accuracy, lower trial number)")


# --------------------------------------------------------------------------- search space
def search_space(cfg: TuneConfig) -> dict[str, list[Any] | SearchRange]:
    """Defaults with ``tune.search_space`` merged over them; keys must be tunable LoRA fields."""
    unknown = sorted(set(cfg.search_space) - set(TUNABLE_KEYS))
    if unknown:
        raise ValueError(f"params.yaml tune.search_space: unknown key(s) {unknown}; tunable: {list(TUNABLE_KEYS)}")
    space = {**DEFAULT_SEARCH_SPACE, **cfg.search_space}
    for name, spec in space.items():
        if isinstance(spec, list) and not spec:
            raise ValueError(f"params.yaml tune.search_space.{name}: empty list of choices")
    return space


def make_storage(spec: str, root: str | Path = ".", cfg: TuneConfig | None = None):
    """``journal:<path>`` -> a file journal (relative to ``root``) shared by workers; else an RDB URL.

    The environment variable ``BIASLAB_OPTUNA_STORAGE`` wins over params, so workers on other machines
    (docker-compose.yml) can share one PostgreSQL study without editing params.yaml. An RDB storage gets
    Optuna's own heartbeat (``cfg.heartbeat_seconds``, ``cfg.heartbeat_grace_seconds``) and
    ``RetryHeartbeatStaleTrialCallback(max_retry=cfg.trial_retries)``: a trial whose worker stopped beating is
    failed and re-queued with the same parameters. Optuna 5's ``JournalStorage`` has no heartbeat; see
    :func:`reap_dead_trials` for what a journal study does instead.
    """

    import optuna

    spec = os.environ.get(STORAGE_ENV) or spec
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    if spec.startswith("journal:"):
        path = Path(spec[len("journal:"):])
        path = path if path.is_absolute() else Path(root) / path
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    cfg = cfg or TuneConfig()
    with warnings.catch_warnings():  # the heartbeat arguments are "experimental" since Optuna 2.9
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(spec, heartbeat_interval=cfg.heartbeat_seconds,
                                          grace_period=cfg.heartbeat_grace_seconds,
                                          heartbeat_stale_trial_callback=retry_callback(cfg.trial_retries))


def retry_callback(max_retry: int):
    """Optuna's ``RetryHeartbeatStaleTrialCallback``: a dead worker's trial comes back as WAITING, same params."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=max_retry)


def study_name(cfg: TuneConfig, lora: LoraConfig, base_fingerprint: str, train: pd.DataFrame,
               valid: pd.DataFrame, options: dict[str, Any] | None = None,
               training: dict[str, Any] | None = None,
               formatting: dict[str, Any] | None = None) -> str:
    """``<study_name>-<hash>``: everything except n_trials/storage that makes trials comparable.

    ``training`` is the resolved :class:`~biaslab.mitigation.lora.training_plan.TrainingPlan`: a GPU worker
    in bf16 and a CPU worker in float32 do not share a study. ``formatting`` (``add_bos``,
    ``prompt_format``) enters the key only when it is not the default, so studies of the default setting
    keep their names.
    """
    space = {k: (v.model_dump() if isinstance(v, SearchRange) else v) for k, v in search_space(cfg).items()}
    key = {
        "space": space, "trial_max_steps": cfg.trial_max_steps, "objective": cfg.objective,
        "metrics": [cfg.accuracy_metric, cfg.gap_metric], "seed": cfg.seed, "options": options or {},
        "lora": {k: v for k, v in hyperparameters(lora).items() if k not in space},
        "base": base_fingerprint, "training": training or {},
        "train": sorted(train["prompt"] + "\t" + train["completion"]), "valid": sorted(valid["qa_sentence"]),
    }
    if formatting and formatting != {"add_bos": "auto", "prompt_format": "raw"}:
        key["formatting"] = formatting
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str, ensure_ascii=False).encode())
    return f"{cfg.study_name}-{digest.hexdigest()[:10]}"


def trial_seeded_sampler(seed: int):
    """TPE (with constant liar for parallel workers) whose draws for trial n are seeded ``seed + n``."""
    import optuna

    class TrialSeededTPESampler(optuna.samplers.TPESampler):
        def before_trial(self, study, trial):
            self._rng.rng.seed(seed + trial.number)
            self._random_sampler._rng.rng.seed(seed + trial.number)
            super().before_trial(study, trial)

    return TrialSeededTPESampler(seed=seed, constant_liar=True)


def open_study(name: str, storage: Any, seed: int = 0):
    """The study ``name``: loaded when the storage has it, else created (two workers may race: then loaded).

    Loading first matters for the journal storage: ``create_study`` appends a create record to the journal
    file even when ``load_if_exists`` then finds the study, so every rerun of the tune stage changed
    ``models/tune`` (and so reran every finetune after it) although no trial ran.
    """
    import optuna

    sampler = trial_seeded_sampler(seed)
    try:
        return optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    except KeyError:  # no study of that name yet
        return optuna.create_study(study_name=name, storage=storage, directions=["maximize", "minimize"],
                                   sampler=sampler, load_if_exists=True)


WORKER_ATTR = "worker"
"""User attr ``<trial number>@<writer token>`` of a journal study's trial: the process running it. The trial
number is part of it because a retried trial inherits its predecessor's user attrs."""


class _Surplus(Exception):
    """Closes a trial asked for when ``n_trials`` were already complete or running elsewhere."""


def claimed(study: Any) -> list[Any]:
    """Trials that count towards ``n_trials``: complete, or running (a dead worker's are failed first)."""
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))


def _owner(trial: Any) -> str | None:
    """The writer token of the process running ``trial`` (its :data:`WORKER_ATTR`), or None when it names none."""
    number, _, token = str(trial.user_attrs.get(WORKER_ATTR, "")).partition("@")
    return token if number == str(trial.number) and token else None


def reap_dead_trials(study: Any, max_retry: int) -> list[int]:
    """Fail the RUNNING trials of dead workers and re-queue them (Optuna's retry callback); returns their numbers.

    RDB storage: Optuna's own ``fail_stale_trials`` (no heartbeat for ``grace_period`` seconds), which runs the
    storage's retry callback. Journal storage (no heartbeat in Optuna 5): a trial whose :data:`WORKER_ATTR`
    names a process of this host that is gone (:func:`biaslab.atomic.writer_alive`; pid and start time, no
    clock) is failed and handed to the same callback. A journal worker on another host cannot be judged: use
    an RDB storage for several machines.
    """
    import copy

    import optuna
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    from biaslab.atomic import writer_alive

    storage = study._storage
    running = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    if isinstance(storage, optuna.storages.RDBStorage):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
        return sorted(t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
                      if t.number in running)
    retry = retry_callback(max_retry)
    reaped = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if writer_alive(_owner(trial) or "") is not False:
            continue
        try:
            if not storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL):
                continue
        except UpdateFinishedTrialError:  # another worker reaped it first
            continue
        retry(study, copy.deepcopy(storage.get_trial(trial._trial_id)))
        reaped.append(trial.number)
    return reaped


def run_missing_trials(study: Any, n_trials: int, objective: Callable[[Any], tuple[float, float]],
                       max_retry: int = 2, poll_seconds: float = 1.0) -> list[int]:
    """Run trials until ``n_trials`` are complete; returns the numbers run here.

    Each trial runs through ``study.optimize(n_trials=1)``, so an RDB storage's heartbeat thread beats for
    it. While the rest are running in other workers this one waits (``poll_seconds``), reaping dead workers'
    trials (:func:`reap_dead_trials`) and running their retries, so a worker returns only once the study is
    complete, whoever dies.
    """
    from optuna.trial import TrialState

    from biaslab.atomic import writer_token

    ran: list[int] = []
    while True:
        reap_dead_trials(study, max_retry)
        if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) >= n_trials:
            return ran
        if len(claimed(study)) >= n_trials:  # the missing ones are running elsewhere
            if not any(_owner(t) for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))):
                unowned = [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))]
                warnings.warn(f"study {study.study_name}: trial(s) {unowned} RUNNING without a worker that can be "
                              "judged (started before heartbeats); not waiting for them - fail them with "
                              "optuna's storage API to have them redone", stacklevel=2)
                return ran
            time.sleep(poll_seconds)
            continue
        done: list[int] = []

        def guarded(trial: Any) -> tuple[float, float]:
            rank = sum(1 for t in claimed(study) if t.number < trial.number)
            if rank >= n_trials:  # another worker asked at the same instant and got the last slot
                trial.set_user_attr("surplus", True)
                raise _Surplus(f"trial {trial.number}: {n_trials} trials already complete or running")
            trial.set_user_attr(WORKER_ATTR, f"{trial.number}@{writer_token()}")
            try:
                values = objective(trial)
            except (Exception, KeyboardInterrupt):
                raise  # Optuna fails the trial and re-raises
            except BaseException:  # SIGTERM's Terminated: Optuna would leave the trial RUNNING
                study.tell(trial, state=TrialState.FAIL)
                raise
            done.append(trial.number)
            return values

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            study.optimize(guarded, n_trials=1, catch=(_Surplus,))
        if not done:  # surplus: another worker holds the last slot
            continue
        ran.extend(done)


def choose_trial(study: Any, accuracy_floor: float | None = None) -> tuple[Any, str]:
    """The trial for best_params.json and the rule that chose it (:data:`FLOOR_RULE`, else :data:`CHOICE_RULE`)."""
    from optuna.trial import TrialState

    if accuracy_floor is not None:
        feasible = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                    if t.values[0] >= accuracy_floor]
        if feasible:
            return min(feasible, key=lambda t: (t.values[1], -t.values[0], t.number)), FLOOR_RULE
    pareto = study.best_trials
    if not pareto:
        raise RuntimeError(f"study {study.study_name}: no completed trial to choose from")
    median_gap = statistics.median(t.values[1] for t in pareto)
    candidates = [t for t in pareto if t.values[1] <= median_gap]
    return min(candidates, key=lambda t: (-t.values[0], t.values[1], t.number)), CHOICE_RULE


def plot_pareto(study: Any, names: tuple[str, str], path: Path, chosen: Any = None):
    """Pareto front (matplotlib), the chosen trial starred, saved atomically to ``path``; returns the figure."""
    import matplotlib

    matplotlib.use("Agg")
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        ax = optuna.visualization.matplotlib.plot_pareto_front(study, target_names=list(names))
    if chosen is not None:
        ax.scatter([chosen.values[0]], [chosen.values[1]], marker="*", s=250, c="gold", edgecolors="black",
                   zorder=5, label=f"chosen: trial {chosen.number}")
        ax.legend()
    fig = ax.figure
    fig.tight_layout()
    from biaslab.atomic import atomic_file

    with atomic_file(path) as tmp:  # unique temp name: several workers may save the plot at once
        fig.savefig(tmp, dpi=120)
    return fig
