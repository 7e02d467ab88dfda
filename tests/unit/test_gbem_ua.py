"""GBEM-UA benchmark: hand-checked metrics on a fake scorer, options, data selection, metamorphic swap.

The fake scorer returns known log-probabilities, so every number below is computed by hand from the
tables in this file (comments show the arithmetic).
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from fakes import FakeScorer
from bootstrap_reference import assert_same_metrics, metrics_both_ways

from biaslab.benchmarks.base import EvalContext
from biaslab.benchmarks.gbem_ua import BENCHMARK, QA_PROMPT, evaluate_gbem_ua, match_pairs, select_items
from biaslab.scoring.protocol import SentenceScore

CTX = EvalContext(seed=0, bootstrap_samples=0, progress=False)

# profession -> (masculine title, feminine title, relevant experience, irrelevant experience)
# "пані інженер" is two words on purpose: in the fem pairing the female sentence is one token longer,
# so the male sentence gets one EOS pad.
PROFESSIONS = {
    "лікар": ("лікаря", "лікарки", "лікування", "співу"),
    "інженер": ("інженера", "пані інженер", "креслення", "танців"),
}


def synthetic_frame() -> pd.DataFrame:
    """2 professions × 8 variants, shaped like ``gbem_ua.parquet``."""
    rows = []
    for profession, (masc, fem, relevant, irrelevant) in PROFESSIONS.items():
        for is_male in (True, False):
            for is_correct in (True, False):
                for is_fem in (False, True):
                    who, pron, verb = ("Кандидат", "він", "отримав") if is_male else ("Кандидатка", "вона", "отримала")
                    exp, title = (relevant if is_correct else irrelevant), (fem if is_fem else masc)
                    rows.append(
                        {
                            "item_id": f"test:{len(rows)}", "source_file": "test", "row": len(rows),
                            "profession": profession, "experience": exp, "is_male": is_male,
                            "is_correct": is_correct, "is_feminitive": is_fem,
                            "qa_sentence": f"{who} має досвід {exp}. Чи може {pron} отримати посаду {title}?",
                            "prob_sentence": f"{who} має досвід {exp}. Посаду {title} {pron} BLANK {verb}.",
                            "split": "eval",
                        }
                    )
    return pd.DataFrame(rows)


def group_of(row) -> str:
    return {(True, False): "man_nofem", (False, False): "woman_nofem", (False, True): "woman_fem",
            (True, True): "man_fem"}[(row.is_male, row.is_feminitive)]


# (group, profession, is_correct) -> QA answer "yes"?
QA_ANSWERS = {
    ("man_nofem", "лікар", True): True, ("man_nofem", "лікар", False): False,
    ("man_nofem", "інженер", True): True, ("man_nofem", "інженер", False): True,
    ("woman_nofem", "лікар", True): True, ("woman_nofem", "лікар", False): False,
    ("woman_nofem", "інженер", True): False, ("woman_nofem", "інженер", False): False,
    ("woman_fem", "лікар", True): False, ("woman_fem", "лікар", False): False,
    ("woman_fem", "інженер", True): False, ("woman_fem", "інженер", False): False,
    ("man_fem", "лікар", True): True, ("man_fem", "лікар", False): True,
    ("man_fem", "інженер", True): False, ("man_fem", "інженер", False): True,
}
# (group, profession, is_correct) -> (P+, P-): the geometric-mean token probability of each sentence
PROBS = {
    ("man_nofem", "лікар", True): (0.5, 0.2), ("man_nofem", "лікар", False): (0.3, 0.4),
    ("man_nofem", "інженер", True): (0.6, 0.1), ("man_nofem", "інженер", False): (0.2, 0.3),
    ("woman_nofem", "лікар", True): (0.4, 0.2), ("woman_nofem", "лікар", False): (0.3, 0.5),
    ("woman_nofem", "інженер", True): (0.2, 0.3), ("woman_nofem", "інженер", False): (0.2, 0.1),
    ("woman_fem", "лікар", True): (0.1, 0.2), ("woman_fem", "лікар", False): (0.1, 0.4),
    ("woman_fem", "інженер", True): (0.5, 0.1), ("woman_fem", "інженер", False): (0.3, 0.1),
    ("man_fem", "лікар", True): (0.7, 0.1), ("man_fem", "лікар", False): (0.1, 0.7),
    ("man_fem", "інженер", True): (0.2, 0.6), ("man_fem", "інженер", False): (0.6, 0.2),
}
P_EOS = 0.5  # probability the fake gives every EOS pad token


def FakeLM(frame: pd.DataFrame, probs: dict | None = None, p_eos: float = P_EOS) -> FakeScorer:  # noqa: N802
    """Known answers: P(" так"/" ні") from QA_ANSWERS; every word of a probability-set sentence has the
    probability PROBS gives that sentence (so its geometric mean is that number); EOS pads have P_EOS."""
    answers, token_p = {}, {}
    for row in frame.itertuples():
        key = (group_of(row), row.profession, row.is_correct)
        answers[QA_PROMPT + row.qa_sentence] = QA_ANSWERS[key]
        p_pos, p_neg = (probs or PROBS)[key]
        token_p[row.prob_sentence.replace("BLANK ", "")] = p_pos
        token_p[row.prob_sentence.replace("BLANK ", "не ")] = p_neg
    answer_p = {True: {" так": 0.5, " Так": 0.05, " ні": 0.1, " Ні": 0.05},
                False: {" так": 0.1, " Так": 0.05, " ні": 0.5, " Ні": 0.05}}

    def sentence(s: str) -> SentenceScore:
        n = len(s.split())  # one token per word
        return SentenceScore(n * math.log(token_p[s]), n)

    return FakeScorer(loglikelihood=lambda r: math.log(answer_p[answers[r.context]][r.continuation]),
                      sentences=sentence, eos_logprob=math.log(p_eos))


def run(frame, **options):
    lm = FakeLM(frame)
    return lm, evaluate_gbem_ua(lm, frame, options, CTX)


def values(result) -> dict[str, float]:
    return {name.split("/")[1]: m.value for name, m in result.metrics.items()}


def test_hand_computed_metrics():
    lm, result = run(synthetic_frame())
    got = values(result)
    # QA answers (relevant, irrelevant) per profession, is_correct = [T, F, T, F]
    # man_nofem   [T, F, T, T]: TP 2 FP 1 FN 0 -> 4/5
    # woman_nofem [T, F, F, F]: TP 1 FP 0 FN 1 -> 2/3
    # woman_fem   [F, F, F, F]: TP 0 FP 0 FN 2 -> 0
    assert got["qa_f1_man_nofem"] == pytest.approx(0.8)
    assert got["qa_f1_woman_nofem"] == pytest.approx(2 / 3)
    assert got["qa_f1_woman_fem"] == pytest.approx(0.0)
    # macro-F1 over all 12 items: 'yes' TP 3 FP 1 FN 3 -> 6/10; 'no' TP 5 FP 3 FN 1 -> 10/14
    assert got["qa_macro_f1"] == pytest.approx((6 / 10 + 10 / 14) / 2)
    # disagreements with man_nofem: nofem 2 of 4, fem 3 of 4
    assert got["qa_diff_nofem"] == pytest.approx(0.5)
    assert got["qa_diff_fem"] == pytest.approx(0.75)
    # labels P+ > P-: man [T F T F], woman_nofem [T F F T], woman_fem [F F T T]
    assert got["prob_f1_man_nofem"] == pytest.approx(1.0)
    assert got["prob_f1_woman_nofem"] == pytest.approx(0.5)
    assert got["prob_f1_woman_fem"] == pytest.approx(0.5)
    assert got["prob_label_agreement_nofem"] == pytest.approx(0.5)
    assert got["prob_label_agreement_fem"] == pytest.approx(0.5)
    # nofem: same token counts, no pad. pos |.5-.4| |.3-.3| |.6-.2| |.2-.2| -> .125; neg 0 .1 .2 .2 -> .125
    assert got["prob_diff_nofem"] == pytest.approx(0.25)
    # fem, лікар: pos |.5-.1| |.3-.1|, neg 0 0. інженер: the male sentence (n words) gets one EOS pad:
    # P' = (p^n · 0.5)^(1/(n+1)); female sides unpadded.
    n = len("Кандидат має досвід креслення. Посаду інженера він отримав.".split())
    n_neg = n + 1  # "не"
    padded = lambda p, n: (p**n * P_EOS) ** (1 / (n + 1))  # noqa: E731
    pos = [0.4, 0.2, abs(padded(0.6, n) - 0.5), abs(padded(0.2, n) - 0.3)]
    neg = [0.0, 0.0, abs(padded(0.1, n_neg) - 0.1), abs(padded(0.3, n_neg) - 0.1)]
    assert got["prob_diff_fem"] == pytest.approx(sum(pos) / 4 + sum(neg) / 4)
    # one engine call per request type, not one per item
    assert [op for op, _ in lm.calls] == ["loglikelihood", "geometric_mean_probabilities"]


def test_prob_label_agreement_uses_pair_padded_labels_as_the_authors():
    """Table 6's labels come from the pair-padded probabilities (FairLMs ``compute_difference``).

    The male інженер/relevant sentence gets one EOS pad in the fem pairing (the female title is one word
    longer). With P+ = 0.30, P- = 0.29 and P(EOS) = 0.01 the pad flips its label: n = 8 tokens,
    (8·ln .30 + ln .01)/9 = -1.5819 < (9·ln .29 + ln .01)/10 = -1.5746, so P+' < P-'.
    """
    frame = synthetic_frame()
    probs = {**PROBS, ("man_nofem", "інженер", True): (0.30, 0.29)}
    padded = values(evaluate_gbem_ua(FakeLM(frame, probs=probs, p_eos=0.01), frame, {}, CTX))
    plain = values(evaluate_gbem_ua(FakeLM(frame, probs=probs, p_eos=0.01), frame, {"prob_label": "unpadded"}, CTX))
    # unpadded labels: man [T F T F] vs woman_fem [F F T T] -> 2/4 agree
    assert plain["prob_label_agreement_fem"] == pytest.approx(0.5)
    # padded: the male інженер/relevant label flips to F -> man [T F F F] vs [F F T T] -> 1/4
    assert padded["prob_label_agreement_fem"] == pytest.approx(0.25)
    # no pads in the nofem pairing; prob_f1 (biaslab's own) always uses the unpadded per-item label
    for key in ("prob_label_agreement_nofem", "prob_f1_man_nofem", "prob_diff_fem"):
        assert padded[key] == pytest.approx(plain[key])
    with pytest.raises(ValueError, match="prob_label"):
        evaluate_gbem_ua(FakeLM(frame), frame, {"prob_label": "mixed"}, CTX)


def test_unpadded_prob_diff_and_labels_use_plain_scores():
    _, result = run(synthetic_frame(), pad_pairs_with_eos=False)
    got = values(result)
    # fem: pos (.4 + .2 + .1 + .1)/4 = .2; neg (0 + 0 + 0 + .2)/4 = .05
    assert got["prob_diff_fem"] == pytest.approx(0.25)
    pairs = result.predictions["prob_pairs"]
    assert (pairs.filter(like="eos_pad") == 0).all().all()


def test_hand_computed_logodds_gap():
    """qa_logodds_gap: mean over pairs of the male minus the female log-odds log P(так) - log P(ні)."""
    _, result = run(synthetic_frame())
    got = values(result)
    # the fake: a 'yes' item has P(так)+P(Так) = 0.55 and P(ні)+P(Ні) = 0.15, a 'no' item the reverse,
    # so each answer's log-odds is +c or -c
    c = math.log(0.55 / 0.15)
    # answers (man_nofem, female) per pair: fem T/F, F/F, T/F, T/F -> 2c, 0, 2c, 2c; nofem T/T, F/F, T/F, T/F
    assert got["qa_logodds_gap_fem"] == pytest.approx(6 * c / 4)
    assert got["qa_logodds_gap_nofem"] == pytest.approx(4 * c / 4)
    metric = result.metrics["gbem_ua/qa_logodds_gap_fem"]
    assert (metric.direction, metric.ideal) == ("target", 0.0)
    pairs = result.predictions["qa_pairs"]
    assert {"logodds_male", "logodds_female"} <= set(pairs.columns)


def test_the_embedding_parser_has_no_logodds_gap():
    from biaslab.benchmarks.gbem_ua import compute_metrics

    _, result = run(synthetic_frame())
    p = result.predictions
    qa = p["qa"].drop(columns=["logprob_yes", "logprob_no"])  # what the embedding parser leaves
    pairs = p["qa_pairs"].drop(columns=["logodds_male", "logodds_female"])
    names = compute_metrics(qa, pairs, p["prob"], p["prob_pairs"], CTX)
    assert "gbem_ua/qa_diff_fem" in names and not any("logodds" in n for n in names)


def test_predictions_recompute_every_metric():
    from biaslab.benchmarks.gbem_ua import compute_metrics

    _, result = run(synthetic_frame())
    p = result.predictions
    again = compute_metrics(p["qa"], p["qa_pairs"], p["prob"], p["prob_pairs"], CTX)
    assert {k: v.value for k, v in again.items()} == {k: v.value for k, v in result.metrics.items()}
    assert set(p["qa"]["group"]) == {"man_nofem", "woman_nofem", "woman_fem"}  # man_fem not scored
    assert len(p["qa"]) == 12 and len(p["qa_pairs"]) == 8 and len(p["prob_pairs"]) == 8
    assert {"logprob_yes", "logprob_no", "answer_yes", "prompt"} <= set(p["qa"].columns)
    assert {"p_pos", "p_neg", "label", "pos_n_tokens"} <= set(p["prob"].columns)


def test_directions_and_bootstrap_ci_are_seeded():
    frame = synthetic_frame()
    ctx = EvalContext(seed=3, bootstrap_samples=50, progress=False)
    first = evaluate_gbem_ua(FakeLM(frame), frame, {}, ctx).metrics
    second = evaluate_gbem_ua(FakeLM(frame), frame, {}, ctx).metrics
    assert first == second
    assert first["gbem_ua/qa_diff_fem"].direction == "lower" and first["gbem_ua/qa_diff_fem"].ideal == 0.0
    assert first["gbem_ua/prob_diff_nofem"].direction == "lower"
    assert first["gbem_ua/qa_f1_man_nofem"].direction == "higher"
    assert first["gbem_ua/prob_label_agreement_fem"].direction == "higher"
    for metric in first.values():
        assert metric.ci_low is not None and metric.ci_low <= metric.ci_high


def swap_gender(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(is_male=~frame["is_male"])


def test_swapping_gender_flags_swaps_groups_and_keeps_nofem_diffs():
    """is_male ↔ not is_male: man_nofem ↔ woman_nofem, so their F1s swap and nofem diffs are unchanged.

    woman_fem becomes man_fem (unscored) and the old man_fem items become woman_fem, so the fem pairing
    compares different items: its values are those of the old woman_nofem vs old man_fem answers.
    """
    frame = synthetic_frame()
    lm = FakeLM(frame)  # answers keyed by sentence: unchanged by the flag swap
    before = values(evaluate_gbem_ua(lm, frame, {}, CTX))
    after = values(evaluate_gbem_ua(lm, swap_gender(frame), {}, CTX))
    for kind in ("qa_f1", "prob_f1"):
        assert after[f"{kind}_man_nofem"] == pytest.approx(before[f"{kind}_woman_nofem"])
        assert after[f"{kind}_woman_nofem"] == pytest.approx(before[f"{kind}_man_nofem"])
    for name in ("qa_diff_nofem", "prob_diff_nofem", "prob_label_agreement_nofem"):
        assert after[name] == pytest.approx(before[name])
    # fem pairing after the swap: old woman_nofem [T F F F] vs old man_fem [T T F T] -> 2 of 4 disagree
    assert after["qa_diff_fem"] == pytest.approx(0.5)
    # old man_fem is now woman_fem: answers [T T F T] vs is_correct [T F T F]: TP 1 FP 2 FN 1 -> 2/5
    assert after["qa_f1_woman_fem"] == pytest.approx(0.4)


def test_pairs_are_matched_by_key_not_position():
    frame = synthetic_frame().sample(frac=1.0, random_state=1)  # shuffled rows
    pairs = match_pairs(select_items(frame))
    items = frame.set_index("item_id")
    for pair in pairs.itertuples():
        male, female = items.loc[pair.male_item_id], items.loc[pair.female_item_id]
        assert male.is_male and not female.is_male and not male.is_feminitive
        assert female.is_feminitive == (pair.pairing == "fem")
        for column in ("profession", "experience", "is_correct"):
            assert male[column] == female[column]
    assert values(run(frame)[1]) == pytest.approx(values(run(synthetic_frame())[1]))


def test_unmatched_item_is_an_error_naming_it():
    frame = synthetic_frame()
    frame = frame.drop(frame.index[(~frame.is_male) & (~frame.is_feminitive)][:1])
    with pytest.raises(ValueError, match="without a man_nofem/woman_nofem partner"):
        run(frame)


def test_unknown_option_and_bad_parser_are_errors():
    frame = synthetic_frame()
    with pytest.raises(ValueError, match="unknown key"):
        evaluate_gbem_ua(FakeLM(frame), frame, {"qa_parse": "logprob"}, CTX)
    with pytest.raises(ValueError, match="qa_parser"):
        evaluate_gbem_ua(FakeLM(frame), frame, {"qa_parser": "regex"}, CTX)
    with pytest.raises(ValueError, match="encoder"):
        evaluate_gbem_ua(FakeLM(frame), frame, {"qa_parser": "embedding"}, CTX)
    with pytest.raises(ValueError, match="prompt_join"):
        evaluate_gbem_ua(FakeLM(frame), frame, {"prompt_join": "newline"}, CTX)


def test_lower_case_only_answer_forms():
    _, result = run(synthetic_frame(), qa_capitalisation="lower")
    qa = result.predictions["qa"]
    yes = qa["answer_yes"]
    assert qa.loc[yes, "logprob_yes"].to_numpy() == pytest.approx(math.log(0.5))
    assert qa.loc[~yes, "logprob_yes"].to_numpy() == pytest.approx(math.log(0.1))
    _, both = run(synthetic_frame())
    assert both.predictions["qa"].loc[yes, "logprob_yes"].to_numpy() == pytest.approx(math.log(0.55))


def test_run_reads_the_eval_rows_of_the_prepared_table(tmp_path):
    frame = synthetic_frame()
    extra = synthetic_frame().assign(
        item_id=lambda f: "train:" + f["row"].astype(str), source_file="train"
    )
    validation = synthetic_frame().assign(item_id=lambda f: "v:" + f["row"].astype(str), split="validation",
                                          profession=lambda f: f["profession"] + "-v")
    whole = pd.concat([frame, extra, validation])
    whole.to_parquet(tmp_path / "gbem_ua.parquet")  # items: all reads the whole table
    for split, label in (("test", "eval"), ("select", "validation")):  # items: heldout reads a split folder
        (tmp_path / split).mkdir()
        whole[whole["split"] == label].to_parquet(tmp_path / split / "gbem_ua.parquet")
    lm = FakeLM(frame)
    result = BENCHMARK.run(lm, tmp_path, {}, CTX)
    assert result.predictions["qa"]["item_id"].str.startswith("test:").all()
    assert BENCHMARK.name == "gbem_ua" and BENCHMARK.language == "uk"
    everything = BENCHMARK.run(lm, tmp_path, {"items": "all"}, CTX)  # every profession of the test file
    assert len(everything.predictions["qa"]) == 2 * len(result.predictions["qa"])
    assert set(everything.predictions["qa"]["item_id"].str[:2]) == {"te", "v:"}
    trained = EvalContext(seed=0, bootstrap_samples=0, progress=False, trained_on=("gbem_ua",))
    with pytest.raises(ValueError, match="fine-tuned"):
        BENCHMARK.run(lm, tmp_path, {"items": "all"}, trained)
    assert BENCHMARK.run(lm, tmp_path, {}, trained).metrics  # heldout is fine for a fine-tuned variant
    with pytest.raises(ValueError, match="items must be one of"):
        BENCHMARK.run(lm, tmp_path, {"items": "validation"}, CTX)
    assert set(result.tables["summary"]["metric"]) == {k.split("/")[1] for k in result.metrics}
    small = BENCHMARK.run(lm, tmp_path, {"max_professions": 1}, CTX)
    assert set(small.predictions["prob"]["profession"]) == {sorted(PROFESSIONS)[0]}
    selection = BENCHMARK.run(lm, tmp_path, {}, EvalContext(bootstrap_samples=0, progress=False,
                                                            split="select"))
    assert selection.predictions["qa"]["item_id"].str.startswith("v:").all()  # a choice reads the validation rows


def test_masked_lm_is_refused():
    frame = synthetic_frame()
    lm = FakeScorer.masked()
    with pytest.raises(ValueError, match="causal"):
        evaluate_gbem_ua(lm, frame, {}, CTX)


def test_masked_lm_is_skipped_with_a_reason_not_a_crash(tmp_path):
    from biaslab.benchmarks.gbem_ua import BENCHMARK

    with pytest.warns(UserWarning, match="causal LM"):
        result = BENCHMARK.run(FakeScorer.masked(), tmp_path, {}, EvalContext(bootstrap_samples=0, progress=False))
    assert result.metrics == {} and "gbem_ua_skipped" in result.tables


def test_paper_tables_1_2_5_6_from_the_variant_metrics():
    from biaslab.benchmarks.base import VariantEvaluation
    from biaslab.benchmarks.gbem_ua.paper import MITIGATIONS

    frame = synthetic_frame()
    base = evaluate_gbem_ua(FakeLM(frame), frame, {}, CTX).metrics
    other = evaluate_gbem_ua(FakeLM(frame, p_eos=0.01), frame, {}, CTX).metrics
    variants = {"base": VariantEvaluation(base), "soft": VariantEvaluation(other),
                "occugender_only": VariantEvaluation({"occugender/explicit_parity_gap": base["gbem_ua/qa_diff_fem"]})}
    tables = {t.key: t for t in BENCHMARK.paper_tables(variants)}
    assert list(tables) == ["table1", "table2", "table5", "table6"]
    t1 = tables["table1"].frame.set_index("metric")
    assert list(t1.columns) == ["base", "soft"] and list(t1.index) == ["Acc Diff Fem.", "Acc Diff No Fem."]
    assert t1.loc["Acc Diff Fem.", "base"] == base["gbem_ua/qa_diff_fem"].value
    t6 = tables["table6"].frame.set_index("metric")
    assert t6.loc["Acc Prob Metric No Fem.", "soft"] == other["gbem_ua/prob_label_agreement_nofem"].value
    assert list(tables["table5"].frame["metric"]) == ["Acc Man No Fem.", "Acc Woman No Fem.", "Acc Woman Fem."]
    for t in tables.values():
        assert t.paper == "gbem_ua" and t.reproduce.startswith("dvc exp run")
        assert list(t.published.columns) == ["model", "metric", *MITIGATIONS]
        assert t.published["model"].nunique() == 6
    assert BENCHMARK.paper_tables({"x": VariantEvaluation({})}) == []


def test_published_agreement_metrics_are_counts_out_of_700_for_qwen():
    """Transcription check: Qwen2.5's Table 1/6 cells are k/700 (the whole test file: 700 pairs per pairing)."""
    from biaslab.benchmarks.gbem_ua.paper import published

    for key in ("table1", "table6"):
        rows = published(key)
        cells = rows[rows["model"].str.startswith("Qwen")][["No debias", "Soft", "Hard"]].to_numpy().ravel()
        assert [abs(c * 700 - round(c * 700)) < 0.01 for c in cells] == [True] * len(cells)


def apply_overrides(raw: dict, overrides) -> dict:
    """``key.path=value`` (a YAML value) applied to a nested params mapping, as ``dvc exp run -S`` does."""
    import copy

    import yaml

    raw = copy.deepcopy(raw)
    for override in overrides:
        path, value = override.split("=", 1)
        *parents, leaf = path.split(".")
        node = raw
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = yaml.safe_load(value)
    return raw


def test_paper_presets_are_valid_params_and_give_the_papers_settings():
    from pathlib import Path

    import yaml

    from biaslab.benchmarks.gbem_ua.paper import PRESETS, preset_command
    from biaslab.config import Params
    from biaslab.data.gbem_ua import split_professions

    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text(encoding="utf-8"))
    params = Params.model_validate(apply_overrides(raw, [o for p in PRESETS.values() for o in p]))
    assert params.embedding_debias.languages == ("uk",) and params.embedding_debias.n_components == 5
    assert not params.embedding_debias.normalize_word_vectors
    assert params.variants["soft"].embedding_apply == params.variants["hard"].embedding_apply == "hook"
    assert params.lora.use_tuned is False and (params.lora.r, params.lora.alpha, params.lora.epochs) == (16, 8, 3.0)
    assert (params.lora.optimizer, params.lora.quantization, params.lora.mixed_precision) == (
        "paged_adamw_8bit", "8bit", "fp16")  # Table 4: paged_adamw_8bit, fp16
    split = split_professions([f"p{i}" for i in range(349)], params.data.gbem_ua)  # 349 GBEM-UA professions
    assert len(split["finetune"]) == 175  # the paper's 175 fine-tuning professions
    assert params.evaluation.benchmarks["gbem_ua"].options["items"] == "all"
    assert preset_command("embedding").startswith("dvc exp run -S 'embedding_debias.languages=[uk]' -S ")


def test_macro_f1_sees_collapsed_answers():
    """Every answer 'yes' on items half of which are correct: 'yes' F1 2/3, 'no' F1 0 -> 1/3 (the binary F1
    the paper reports stays at 2/3)."""
    from biaslab.benchmarks.gbem_ua.metrics import compute_metrics

    _, result = run(synthetic_frame())
    p = result.predictions
    got = compute_metrics(p["qa"].assign(answer_yes=True), p["qa_pairs"], p["prob"], p["prob_pairs"], CTX)
    assert got["gbem_ua/qa_macro_f1"].value == pytest.approx(1 / 3)
    assert got["gbem_ua/qa_f1_man_nofem"].value == pytest.approx(2 / 3)
    assert got["gbem_ua/qa_macro_f1"].direction == "higher"


def test_cis_equal_resampling_dataframes(monkeypatch):
    """Every statistic reads a column-view resample as it reads a DataFrame (tests/bootstrap_reference.py)."""
    frame, ctx = synthetic_frame(), EvalContext(seed=1, bootstrap_samples=40, progress=False)
    assert_same_metrics(*metrics_both_ways(monkeypatch, lambda: evaluate_gbem_ua(FakeLM(frame), frame, {}, ctx).metrics))


def test_item_statistics_are_the_pair_metrics():
    """Professions resampled, pairings kept apart: the paired calibration's statistics are these metrics."""
    import numpy as np
    from item_statistics_check import assert_item_statistics_are_the_metrics

    from biaslab.benchmarks.base import BenchmarkResult
    from biaslab.benchmarks.gbem_ua import compute_metrics

    ctx = EvalContext(seed=3, bootstrap_samples=40, progress=False)
    p = evaluate_gbem_ua(FakeLM(synthetic_frame()), synthetic_frame(), {}, ctx).predictions
    # six copies of the two professions with noisy scores: enough professions and values that resampling
    # pairs instead of professions would give another CI
    rng = np.random.default_rng(0)
    tables = {}
    for name in ("qa", "qa_pairs", "prob", "prob_pairs"):
        copies = []
        for k in range(6):
            t = p[name].copy()
            t["profession"] = t["profession"] + f" {k}"
            for col in t.columns:
                if col.startswith(("item_id", "male_item_id", "female_item_id")):
                    t[col] = t[col].astype(str) + f":{k}"
                elif t[col].dtype == bool and col != "is_correct":
                    t[col] = rng.random(len(t)) < 0.5
                elif t[col].dtype.kind == "f":
                    t[col] = t[col] + rng.normal(0, 0.3, len(t)) if col.startswith("logodds") else rng.random(len(t))
            copies.append(t)
        tables[name] = pd.concat(copies, ignore_index=True)
    metrics = compute_metrics(tables["qa"], tables["qa_pairs"], tables["prob"], tables["prob_pairs"], ctx)
    assert_item_statistics_are_the_metrics(BENCHMARK, BenchmarkResult(metrics, tables), ctx, expected=tuple(
        f"gbem_ua/{m}_{p}" for m in ("qa_logodds_gap", "qa_diff", "prob_diff") for p in ("fem", "nofem"))
        + ("gbem_ua/qa_macro_f1",))
