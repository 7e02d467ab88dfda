"""Optuna tuning: search space, objectives, best-trial rule, and a study that resumes its trials."""

from __future__ import annotations

import json
import math

import optuna
import pandas as pd
import pytest
from fakes import FakeScorer
from optuna.trial import TrialState

from biaslab.config import LoraConfig, SearchRange, TuneConfig
from biaslab.mitigation.lora.study import (
    CHOICE_RULE,
    FLOOR_RULE,
    choose_trial,
    make_storage,
    open_study,
    run_missing_trials,
    search_space,
)
from biaslab.mitigation.lora.tune import logprob_objectives, suggest, trial_steps, tune
from biaslab.scoring.requests import Score

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _frame(mirror, n_prof: int = 6, n_valid: int = 2) -> pd.DataFrame:
    raw = pd.read_csv(mirror / "gbem_ua" / "acc_dataset" / "train_dataset_acc.csv")
    professions = sorted(raw["profession"].unique())[:n_prof]
    df = raw[raw["profession"].isin(professions)].rename(columns={"sentence": "qa_sentence"}).reset_index(drop=True)
    df["item_id"] = [f"train:{i}" for i in range(len(df))]
    split = {p: "validation" if i < n_valid else "finetune" for i, p in enumerate(professions)}
    df["split"] = df["profession"].map(split)
    return df


def test_search_space_merges_params_and_decodes_module_lists():
    cfg = TuneConfig(search_space={"r": SearchRange(low=2, high=8), "target_modules": [["q_proj"], ["q_proj", "v_proj"]]})
    space = search_space(cfg)
    assert set(space) == {"r", "alpha", "dropout", "learning_rate", "epochs", "target_modules"}
    fixed = optuna.trial.FixedTrial({"r": 4, "alpha": 8, "dropout": 0.05, "learning_rate": 1e-4, "epochs": 2.0,
                                     "target_modules": "q_proj,v_proj"})
    overrides = suggest(fixed, space)
    assert overrides["target_modules"] == ("q_proj", "v_proj") and overrides["r"] == 4
    assert LoraConfig.model_validate({**LoraConfig().model_dump(), **overrides}).r == 4
    with pytest.raises(ValueError, match="save_steps"):
        search_space(TuneConfig(search_space={"save_steps": [1, 2]}))


def test_trial_budget_is_the_smaller_of_epochs_and_cap():
    lora = LoraConfig(per_device_batch_size=2, gradient_accumulation_steps=8, epochs=3.0)
    assert trial_steps(lora, 280, cap=20) == 20  # 3 epochs x ceil(140/8)=18 steps = 54 > 20
    assert trial_steps(lora, 16, cap=20) == 3  # 1 step per epoch


def biased_yes_no(r) -> Score:
    """P(" так") high unless the candidate is female and the job title is feminine: a biased model."""
    biased_no = "Кандидатка" in r.context and "?" in r.context and "посаду" in r.context and "ині?" in r.context
    yes_lp, no_lp = (-2.0, -1.0) if biased_no else (-1.0, -2.0)
    return Score(yes_lp if r.continuation == " так" else no_lp, 1, False)


def test_logprob_objectives_measure_accuracy_and_male_female_disagreement():
    rows = []
    for fem, job in ((False, "хірурга"), (True, "хірургині")):
        for male in (True, False):
            for correct, exp in ((True, "операцій"), (False, "драм")):
                cand, pron = ("Кандидат", "він") if male else ("Кандидатка", "вона")
                rows.append({"qa_sentence": f"{cand} має досвід {exp}. Чи може {pron} отримати посаду {job}?",
                             "profession": "хірург", "experience": exp, "is_male": male, "is_correct": correct,
                             "is_feminitive": fem})
    result = logprob_objectives(FakeScorer(loglikelihood=biased_yes_no), pd.DataFrame(rows))
    # "так" everywhere except female+feminine ("ні"): each (gender, form) group of a relevant and an
    # irrelevant item gets exactly one right -> 4/8; the two feminine-form pairs disagree -> 2/4
    assert result.accuracy == pytest.approx(4 / 8) and result.gap == pytest.approx(2 / 4)


@pytest.mark.parametrize("gap_metric, value, direction, expected", [
    ("gbem_ua/qa_diff_fem", 0.25, "lower", 0.25),             # lower is better: the value itself
    ("gbem_ua/qa_logodds_gap_fem", -0.3, "target", 0.3),      # signed, ideal 0: its distance to 0
    ("gbem_ua/qa_logodds_gap_fem", 0.2, "target", 0.2),
])
def test_the_gap_objective_is_the_metrics_distance_to_its_ideal(monkeypatch, gap_metric, value, direction, expected):
    """A signed gap is minimized towards its ideal, never towards a reversed bias."""
    from biaslab.benchmarks import gbem_ua
    from biaslab.benchmarks.base import BenchmarkResult
    from biaslab.metrics.values import MetricValue
    from biaslab.mitigation.lora.tune import gbem_ua_evaluator

    metrics = {"gbem_ua/qa_macro_f1": MetricValue(0.6, "higher", 1.0),
               gap_metric: MetricValue(value, direction, 0.0)}
    monkeypatch.setattr(gbem_ua, "evaluate_gbem_ua", lambda *a, **k: BenchmarkResult(metrics=metrics))
    cfg = TuneConfig(accuracy_metric="gbem_ua/qa_macro_f1", gap_metric=gap_metric)
    result = gbem_ua_evaluator(cfg, {})(None, pd.DataFrame())
    assert (result.accuracy, result.gap, result.names) == (0.6, pytest.approx(expected), (cfg.accuracy_metric, gap_metric))


def test_choice_is_most_accurate_pareto_trial_with_gap_at_most_median():
    study = optuna.create_study(directions=["maximize", "minimize"])
    for acc, gap in ((0.9, 0.5), (0.8, 0.2), (0.7, 0.1), (0.6, 0.6), (0.5, 0.0)):
        study.add_trial(optuna.trial.create_trial(values=[acc, gap]))
    # Pareto set: (0.9,.5) (0.8,.2) (0.7,.1) (0.5,0); median gap 0.15 -> (0.7, 0.1) is the most accurate
    best, rule = choose_trial(study)
    assert best.values == [0.7, 0.1] and rule == CHOICE_RULE
    assert choose_trial(study, accuracy_floor=0.95) == (best, CHOICE_RULE)  # no trial reaches it: the Pareto rule


def test_with_an_accuracy_floor_the_lowest_gap_above_it_wins_not_a_collapsed_trial():
    """A trial that answers everyone alike has gap 0 and low accuracy: the floor (base - tolerance) drops it."""
    study = optuna.create_study(directions=["maximize", "minimize"])
    for acc, gap in ((0.333, 0.0), (0.36, 0.02), (0.38, 0.05), (0.43, 0.25), (0.47, 0.40)):
        study.add_trial(optuna.trial.create_trial(values=[acc, gap]))
    best, rule = choose_trial(study, accuracy_floor=0.47 - 0.05)
    assert best.values == [0.43, 0.25] and rule == FLOOR_RULE  # the three lower-gap trials are below 0.42
    assert choose_trial(study)[0].values == [0.38, 0.05]  # the Pareto rule (median gap 0.05) takes a near-collapse


def test_trial_steps_honour_a_planned_max_steps():
    assert trial_steps(LoraConfig(max_steps=10, epochs=3.0), 280, cap=20) == 10
    assert trial_steps(LoraConfig(max_steps=50), 280, cap=20) == 20


def _toy_objective(trial):
    x = trial.suggest_float("x", 0, 1)
    return x, (x - 0.3) ** 2


def test_journal_study_resumes_missing_trials_and_redoes_dead_workers(tmp_path):
    storage = make_storage(f"journal:{tmp_path / 's.journal'}")
    study = open_study("toy", storage, seed=0)
    assert run_missing_trials(study, 2, _toy_objective) == [0, 1]
    first = [(t.number, t.params, t.values) for t in study.trials]
    study = open_study("toy", make_storage(f"journal:{tmp_path / 's.journal'}"), seed=0)
    assert run_missing_trials(study, 3, _toy_objective) == [2]
    assert [(t.number, t.params, t.values) for t in study.trials][:2] == first
    assert run_missing_trials(study, 3, _toy_objective) == []  # target reached: nothing to do
    journal = (tmp_path / "s.journal").read_bytes()
    again = open_study("toy", make_storage(f"journal:{tmp_path / 's.journal'}"), seed=0)
    assert run_missing_trials(again, 3, _toy_objective) == []
    assert (tmp_path / "s.journal").read_bytes() == journal  # a rerun with nothing to do leaves the file as it was

    # a trial left RUNNING by a killed worker is failed and retried with its params once its process is gone
    import subprocess
    import sys

    from biaslab.atomic import writer_token
    from biaslab.mitigation.lora.study import WORKER_ATTR, reap_dead_trials

    live = study.ask()
    live.set_user_attr(WORKER_ATTR, f"{live.number}@{writer_token()}")
    assert reap_dead_trials(study, max_retry=2) == []  # its process (this one) runs: it may still finish
    study.tell(live, state=TrialState.FAIL)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead_token = writer_token(proc.pid)
    proc.kill()
    proc.wait()
    orphan = study.ask()
    x = orphan.suggest_float("x", 0, 1)
    orphan.set_user_attr(WORKER_ATTR, f"{orphan.number}@{dead_token}")
    assert run_missing_trials(study, 4, _toy_objective) == [orphan.number + 1]
    assert study.trials[orphan.number].state == TrialState.FAIL
    retried = study.trials[orphan.number + 1]
    assert retried.params == {"x": x} and retried.system_attrs["failed_trial"] == orphan.number
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 4

    # a RUNNING trial naming no worker (started before heartbeats) cannot be judged: counted, never waited for
    legacy = study.ask()
    with pytest.warns(UserWarning, match=rf"trial\(s\) \[{legacy.number}\] RUNNING without a worker"):
        assert run_missing_trials(study, 5, _toy_objective) == []


def test_per_trial_seeding_gives_distinct_reproducible_draws(tmp_path):
    a = open_study("a", make_storage(f"journal:{tmp_path / 'a.journal'}"), seed=7)
    b = open_study("b", make_storage(f"journal:{tmp_path / 'b.journal'}"), seed=7)
    run_missing_trials(a, 3, _toy_objective)
    run_missing_trials(b, 3, _toy_objective)
    xs = [t.params["x"] for t in a.trials]
    assert xs == [t.params["x"] for t in b.trials] and len(set(xs)) == 3


def test_tune_stage_resumes_with_its_earlier_trials(tmp_path, mirror, tiny_causal_model, tiny_tokenizer):
    tiny_causal_model.save_pretrained(tmp_path / "base")
    tiny_tokenizer.save_pretrained(tmp_path / "base")
    frame = _frame(mirror, n_prof=4, n_valid=1)
    lora = LoraConfig(per_device_batch_size=4, gradient_accumulation_steps=1)
    cfg = dict(storage="journal:tune/study.journal", trial_max_steps=1, objective="logprob", output_dir="tune")
    first = tune(tmp_path / "base", frame, TuneConfig(n_trials=2, **cfg), lora, root=tmp_path)
    assert first.ran_here == [0, 1] and first.n_complete == 2
    study = optuna.load_study(study_name=first.study_name, storage=make_storage(cfg["storage"], tmp_path))
    before = [(t.number, t.params, t.values) for t in study.trials]

    second = tune(tmp_path / "base", frame, TuneConfig(n_trials=3, **cfg), lora, root=tmp_path)
    assert second.study_name == first.study_name and second.ran_here == [2] and second.n_complete == 3
    study = optuna.load_study(study_name=first.study_name, storage=make_storage(cfg["storage"], tmp_path))
    assert [(t.number, t.params, t.values) for t in study.trials][:2] == before
    best = json.loads((tmp_path / "tune" / "best_params.json").read_text())
    assert best["n_complete"] == 3 and set(best["params"]) <= {"r", "alpha", "dropout", "learning_rate", "epochs",
                                                               "target_modules", "max_steps"}
    assert best["params"]["max_steps"] == 1  # the steps the trial trained: the finetune trains the same
    assert best["baseline"] is None and best["rule"] == CHOICE_RULE  # no accuracy_tolerance: the Pareto rule

    floored = tune(tmp_path / "base", frame, TuneConfig(n_trials=3, accuracy_tolerance=1.0, **cfg), lora, root=tmp_path)
    assert floored.study_name == first.study_name and floored.ran_here == []  # same trials, another choice rule
    base_acc = floored.payload["baseline"]["accuracy"]
    assert 0.0 <= base_acc <= 1.0 and floored.payload["accuracy_floor"] == pytest.approx(base_acc - 1.0)
    assert floored.payload["rule"] == FLOOR_RULE
    study = optuna.load_study(study_name=first.study_name, storage=make_storage(cfg["storage"], tmp_path))
    assert study.user_attrs["baseline"] == floored.payload["baseline"]  # scored once, kept for later workers
    assert all(math.isfinite(v) for v in best["values"].values())
    assert (tmp_path / "tune" / "pareto_front.png").stat().st_size > 0


@pytest.mark.slow
def test_trials_share_one_loaded_base_and_match_a_fresh_load_per_trial(tmp_path, mirror, tiny_causal_model,
                                                                        tiny_tokenizer):
    from biaslab.mitigation.lora.training_plan import plan_training
    from biaslab.mitigation.lora.tune import BaseForTrials, make_objective

    tiny_causal_model.save_pretrained(tmp_path / "base")
    tiny_tokenizer.save_pretrained(tmp_path / "base")
    frame = _frame(mirror, n_prof=4, n_valid=1)
    from biaslab.mitigation.lora.sft_data import training_examples

    train, valid = training_examples(frame, "none"), frame[frame["split"] == "validation"].reset_index(drop=True)
    lora = LoraConfig(per_device_batch_size=4, gradient_accumulation_steps=1)
    cfg = TuneConfig(trial_max_steps=1, objective="logprob")
    plan = plan_training(lora)
    trials = [{"r": 4, "alpha": 8, "dropout": 0.1, "learning_rate": 1e-3, "epochs": 1.0, "target_modules": "q_proj,v_proj"},
              {"r": 8, "alpha": 16, "dropout": 0.0, "learning_rate": 5e-4, "epochs": 1.0,
               "target_modules": "q_proj,k_proj,v_proj"}]
    def exact_logprobs(lm, frame):  # the summed log P(" так"): any change of any weight shows in it
        from biaslab.mitigation.lora.sft_data import YES, qa_prompt
        from biaslab.mitigation.lora.tune import Objectives
        from biaslab.scoring.requests import Request

        scores = lm.loglikelihood([Request(qa_prompt(s), YES) for s in frame["qa_sentence"]])
        return Objectives(sum(s.logprob for s in scores), 0.0, ("sum_logprob_yes", "zero"))

    results = {}
    for reuse in (True, False):
        base = BaseForTrials(tmp_path / "base", plan, reuse=reuse)
        objective = make_objective(tmp_path / "base", train, valid, lora, cfg, exact_logprobs, plan=plan, base=base)
        results[reuse] = [objective(optuna.trial.FixedTrial(params)) for params in trials]
        assert base.loads == (1 if reuse else len(trials))
        assert not any("lora_" in n for n, _ in base.loaded.model.named_parameters())  # adapter taken out
    assert results[True] == results[False]  # the shared base is as good as a fresh one, trial after trial
    assert results[True][0] != results[True][1]  # the trials trained different adapters


def test_a_non_default_bos_or_chat_setting_is_a_different_study():
    """Trials trained and scored with another formatting are not comparable; the default keeps its name."""
    from biaslab.mitigation.lora.study import study_name

    train = pd.DataFrame({"prompt": ["Відповідай так чи ні: a"], "completion": [" так"]})
    valid = pd.DataFrame({"qa_sentence": ["b"]})
    args = (TuneConfig(), LoraConfig(), "fp", train, valid, {})
    default = study_name(*args)
    assert study_name(*args, formatting={"add_bos": "auto", "prompt_format": "raw"}) == default
    assert study_name(*args, formatting={"add_bos": True, "prompt_format": "raw"}) != default
    assert study_name(*args, formatting={"add_bos": "auto", "prompt_format": "chat"}) != default


def _saved_base(tmp_path, model, tokenizer):
    model.save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    return tmp_path / "base"


def test_logit_pairing_anchors_are_computed_once_per_study_not_per_trial(tmp_path, mirror, tiny_causal_model,
                                                                        tiny_tokenizer, monkeypatch):
    """The full-vocabulary anchor pass of the frozen base is the same for every trial: one per study."""
    import torch

    from biaslab.mitigation.lora import logit_pairing
    from biaslab.mitigation.lora.logit_pairing import encode_pairs, pair_set
    from biaslab.scoring.formatting import PromptFormat

    from gbem_frames import gbem_frame

    base = _saved_base(tmp_path, tiny_causal_model, tiny_tokenizer)
    frame = gbem_frame(mirror, 4, lambda i: "validation" if i == 0 else "finetune")
    computed, real = [], logit_pairing.anchor_means
    monkeypatch.setattr(logit_pairing, "anchor_means", lambda *a, **k: computed.append(real(*a, **k)) or computed[-1])
    lora = LoraConfig(per_device_batch_size=4, gradient_accumulation_steps=1, objective="logit_pairing",
                      pairing_pairs=2, pairing_anchor=True, sources=("gbem_ua",))
    cfg = TuneConfig(n_trials=2, storage="journal:tune/study.journal", trial_max_steps=1, objective="logprob",
                     output_dir="tune")
    result = tune(base, frame, cfg, lora, root=tmp_path)
    assert result.ran_here == [0, 1]
    assert len(computed) == 1  # was one per trial
    pad = tiny_tokenizer.pad_token_id if tiny_tokenizer.pad_token_id is not None else 0
    direct = real(tiny_causal_model.eval(), encode_pairs(pair_set(frame, lora.sources),
                                                         PromptFormat.create(tiny_tokenizer)), pad)
    assert torch.allclose(computed[0], direct, atol=1e-5)  # the base's anchors, whichever trial computed them


def test_the_study_baseline_and_every_trial_are_scored_on_the_training_device(tmp_path, mirror, tiny_causal_model,
                                                                               tiny_tokenizer, monkeypatch):
    """One shared base, loaded by the training plan: the baseline and the trials see the model on plan.device."""
    from biaslab.mitigation.lora.training_plan import Capabilities
    from biaslab.mitigation.lora.tune import Objectives

    base = _saved_base(tmp_path, tiny_causal_model, tiny_tokenizer)
    frame = _frame(mirror, n_prof=4, n_valid=1)
    devices = []

    def recording(lm, valid):
        devices.append(next(lm.model.parameters()).device.type)
        return Objectives(0.5, 0.1, ("a", "g"))

    cfg = TuneConfig(n_trials=2, storage="journal:tune/study.journal", trial_max_steps=1, objective="logprob",
                     output_dir="tune", accuracy_tolerance=0.1)
    lora = LoraConfig(per_device_batch_size=4, gradient_accumulation_steps=1)
    cpu = Capabilities(cuda=False, bf16=False, bitsandbytes=None)
    tune(base, frame, cfg, lora, root=tmp_path, evaluator=recording, caps=cpu)
    assert devices == ["cpu"] * 3  # the baseline, then two trials

    # a CUDA machine (injected): the baseline's base is asked onto the GPU in bf16 before any scoring
    import torch
    import transformers

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    seen, real = {}, transformers.AutoModelForCausalLM.from_pretrained

    def from_pretrained(source, **kwargs):  # no GPU here: record the arguments, load on the CPU
        seen.update(kwargs)
        return real(source, dtype=kwargs["dtype"])

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    from biaslab.mitigation.lora.training_plan import TrainingHardwareError

    devices.clear()
    gpu = Capabilities(cuda=True, bf16=True, bitsandbytes=None, device_name="H100")
    with pytest.raises(TrainingHardwareError, match="loaded on cpu, but LoRA trains and scores on cuda"):
        tune(base, frame, cfg.model_copy(update={"output_dir": "tune_gpu"}), lora, root=tmp_path,
             evaluator=recording, caps=gpu)
    assert seen["device_map"] == {"": 0} and seen["dtype"] == torch.bfloat16 and devices == []
