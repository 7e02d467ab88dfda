"""The LoRA training set: gender-neutral relevant GBEM-UA examples, and counterfactual augmentation."""

from __future__ import annotations

import pandas as pd
import pytest

from biaslab.mitigation.lora.sft_data import (
    QA_INSTRUCTION,
    YES,
    SftDataError,
    counterfactual,
    job_forms,
    training_examples,
    validation_examples,
)
from gbem_frames import gbem_frame


@pytest.fixture(scope="module")
def frame(mirror) -> pd.DataFrame:
    """20 real professions in the prepared schema: 12 fine-tune, 8 validation."""
    return gbem_frame(mirror, 20, lambda i: "finetune" if i < 12 else "validation")


def test_examples_are_relevant_gender_balanced_and_answer_yes(frame):
    ex = training_examples(frame)
    tune = frame[frame["split"] == "finetune"]
    assert set(ex["profession"]) == set(tune["profession"])  # validation professions never trained on
    assert (ex["completion"] == YES).all() and ex["prompt"].str.startswith(QA_INSTRUCTION).all()
    relevant_masc = tune[tune["is_correct"] & ~tune["is_feminitive"]]
    assert sorted(ex["prompt"]) == sorted(QA_INSTRUCTION + s for s in relevant_masc["qa_sentence"].unique())
    counts = ex.groupby("profession")["is_male"].agg(["sum", "count"])
    assert (counts["sum"] * 2 == counts["count"]).all()  # as many male as female candidates per profession
    assert not ex["is_feminitive"].any()


def test_counterfactual_doubles_data_and_matches_the_datasets_own_rows(frame):
    base, aug = training_examples(frame), training_examples(frame, "counterfactual")
    assert len(aug) == 2 * len(base)
    swapped = aug[aug["origin"] == "counterfactual"]
    tune = frame[frame["split"] == "finetune"]
    real_fem = {QA_INSTRUCTION + s for s in tune[tune["is_correct"] & tune["is_feminitive"]]["qa_sentence"]}
    assert set(swapped["prompt"]) == real_fem  # the swap reproduces the feminitive rows exactly
    assert swapped["is_feminitive"].all()


def test_counterfactual_swaps_every_gendered_word(frame):
    forms = job_forms(frame)
    s = "Кандидат має досвід хірургічних операцій. Чи може він отримати посаду хірурга?"
    forms[("хірург", False)], forms[("хірург", True)] = "хірурга", "хірургині"
    out = counterfactual(s, "хірург", False, forms)
    assert out == "Кандидатка має досвід хірургічних операцій. Чи може вона отримати посаду хірургині?"
    assert counterfactual(out, "хірург", True, forms) == s  # an involution


def test_malformed_sentence_is_an_error_naming_the_item(frame):
    bad = frame.copy()
    bad.loc[0, "qa_sentence"] = "Something else entirely"
    with pytest.raises(SftDataError, match=r"train:0"):
        training_examples(bad)


def test_validation_examples_come_only_from_validation_professions(frame):
    val = validation_examples(frame)
    assert set(val["profession"]) == set(frame[frame["split"] == "validation"]["profession"])
    with pytest.raises(SftDataError, match="split == 'eval'"):
        training_examples(frame, split="eval")
