"""agreement: accuracy against a direct computation, the packaged pairs' shape, the split, bad data files."""

from __future__ import annotations

import re
import shutil

import pytest
from fakes import FakeScorer
from item_statistics_check import assert_item_statistics_are_the_metrics
from oracles import encode, naive_logprob

from biaslab.benchmarks.agreement import BENCHMARK
from biaslab.benchmarks.agreement.items import data_dir, load_pairs
from biaslab.benchmarks.base import EvalContext
from biaslab.data.errors import DataError
from biaslab.scoring.causal import CausalScorer

CTX = EvalContext(seed=0, bootstrap_samples=50, progress=False)
PAIRS = load_pairs()


def _small_data(tmp_path, templates: str, subjects: str, nouns: str = "language\tmasculine\tfeminine\n"):
    (tmp_path / "templates.tsv").write_text("template_id\tlanguage\tkind\ttext\n" + templates, encoding="utf-8")
    (tmp_path / "subjects.tsv").write_text("language\tgender\tsubject\n" + subjects, encoding="utf-8")
    (tmp_path / "nouns.tsv").write_text(nouns, encoding="utf-8")
    return tmp_path


SMALL_SUBJECTS = "uk\tf\tОлена\nuk\tf\tМарія\nuk\tm\tАндрій\nuk\tm\tТарас\n"


def test_accuracy_is_the_share_of_pairs_where_the_grammatical_sentence_scores_higher(tmp_path):
    folder = _small_data(tmp_path, "t1\tuk\tverb\t{S} [прийшов|прийшла] додому.\n", SMALL_SUBJECTS)
    pairs = load_pairs(folder)
    # select + test together: score both sets, the test set by hand
    scores = {}
    for i, row in enumerate(pairs.itertuples()):
        scores[row.grammatical] = -1.0 - i
        scores[row.ungrammatical] = -1.0 - i + (0.5 if i % 2 else -0.5)  # odd rows: the wrong form wins
    lm = FakeScorer(sentences=scores)
    for split in ("select", "test"):
        ctx = EvalContext(seed=0, bootstrap_samples=50, progress=False, split=split)
        result = BENCHMARK.run(lm, tmp_path, {"data_dir": str(folder)}, ctx)
        table = result.predictions["pairs"]
        expected = [0 if pairs.index[pairs["pair_id"] == p][0] % 2 else 1 for p in table["pair_id"]]
        assert list(table["correct"]) == expected
        assert set(table["split"]) == {split}
        m = result.metrics["agreement/accuracy"]
        assert m.value == pytest.approx(sum(expected) / len(expected))
        assert m.direction == "higher" and m.ideal == 1.0 and m.n == len(expected)
        assert result.metrics["agreement/accuracy_uk"].value == m.value
        assert table["margin"].tolist() == pytest.approx(
            [scores[g] - scores[u] for g, u in zip(table["grammatical"], table["ungrammatical"])])


def test_a_tie_is_not_correct(tmp_path):
    folder = _small_data(tmp_path, "t1\tuk\tverb\t{S} [прийшов|прийшла] додому.\n", SMALL_SUBJECTS)
    lm = FakeScorer(sentences=lambda s: -3.0)
    result = BENCHMARK.run(lm, tmp_path, {"data_dir": str(folder)}, CTX)
    assert result.metrics["agreement/accuracy"].value == 0.0


SMALL_TEMPLATES = ("en_refl_hurt", "en_poss_best", "en_noun_only", "uk_verb_came", "uk_adj_tired", "uk_fem_our")


def _packaged_subset(tmp_path):
    """The packaged rows of a few templates and four names per gender (the tiny model scores them in seconds)."""
    def rows(name, keep):
        lines = (data_dir() / name).read_text(encoding="utf-8").splitlines()
        body = [ln for ln in lines if not ln.startswith("#")]
        return "\n".join([body[0]] + [ln for ln in body[1:] if keep(ln.split("\t"))]) + "\n"

    names = {"en": 4, "uk": 4}
    (tmp_path / "templates.tsv").write_text(rows("templates.tsv", lambda c: c[0] in SMALL_TEMPLATES), encoding="utf-8")
    (tmp_path / "subjects.tsv").write_text(rows(
        "subjects.tsv", lambda c: c[0] in names and " " not in c[2] and c[2] in _first_names(c[0], c[1], 4)),
        encoding="utf-8")
    (tmp_path / "nouns.tsv").write_text(rows("nouns.tsv", lambda c: c[0] == "uk"), encoding="utf-8")
    return tmp_path


def _first_names(language, gender, n):
    chosen = PAIRS[(PAIRS["language"] == language) & (PAIRS["gender"] == gender) & ~PAIRS["subject"].str.contains(" ")]
    return list(dict.fromkeys(chosen["subject"]))[:n]


def test_tiny_model_matches_a_direct_forward_pass_and_batched_equals_unbatched(tmp_path, tiny_scorer,
                                                                              tiny_causal_model, tiny_tokenizer):
    options = {"data_dir": str(_packaged_subset(tmp_path))}
    result = BENCHMARK.run(tiny_scorer, tmp_path, options, CTX)
    table = result.predictions["pairs"]
    assert set(table["language"]) == {"uk", "en"} and set(table["split"]) == {"test"}
    assert set(table["template_id"]) == set(SMALL_TEMPLATES)

    def ll(sentence):
        return naive_logprob(tiny_causal_model, [tiny_tokenizer.bos_token_id] + encode(tiny_tokenizer, sentence), 1)

    for row in table.itertuples():
        assert row.margin == pytest.approx(ll(row.grammatical) - ll(row.ungrammatical), abs=1e-4)
        assert row.correct == int(row.logprob_grammatical > row.logprob_ungrammatical)
    assert result.metrics["agreement/accuracy"].value == pytest.approx(table["correct"].mean())
    for lang in ("uk", "en"):
        assert result.metrics[f"agreement/accuracy_{lang}"].value == pytest.approx(
            table.loc[table["language"] == lang, "correct"].mean())
    one_by_one = CausalScorer(tiny_causal_model, tiny_tokenizer, batch_size=1)
    unbatched = BENCHMARK.run(one_by_one, tmp_path, options, CTX).predictions["pairs"]
    assert unbatched["margin"].tolist() == pytest.approx(table["margin"].tolist(), abs=1e-5)
    assert (unbatched["correct"] == table["correct"]).all()
    assert_item_statistics_are_the_metrics(BENCHMARK, result, CTX,
                                           expected=("agreement/accuracy", "agreement/accuracy_uk"))


def _words(sentence):
    return re.findall(r"[\w'’-]+", sentence)


def test_every_pair_differs_in_exactly_the_gendered_form():
    for row in PAIRS.itertuples():
        good, bad = _words(row.grammatical), _words(row.ungrammatical)
        assert len(good) == len(bad), row.pair_id
        diff = [(g, b) for g, b in zip(good, bad) if g != b]
        assert diff == [(row.form_grammatical, row.form_ungrammatical)], row.pair_id


def test_both_genders_are_balanced_in_every_language_kind_and_split():
    counts = PAIRS.groupby(["language", "kind", "split", "gender"]).size().unstack("gender")
    assert (counts["f"] == counts["m"]).all()
    sizes = PAIRS.groupby("language").size()
    assert (sizes >= 300).all(), sizes  # several hundred pairs per language
    assert set(PAIRS["language"]) == {"en", "uk", "ru"}


def test_split_is_by_subject_deterministic_and_every_template_is_in_both_sets():
    again = load_pairs()
    assert again.equals(PAIRS)
    subjects = PAIRS.groupby(["language", "subject"])["split"].nunique()
    assert (subjects == 1).all()  # a subject's pairs are all selection or all test
    per_template = PAIRS.groupby("template_id")["split"].nunique()
    assert (per_template == 2).all()
    assert load_pairs(seed=1)["split"].tolist() != PAIRS["split"].tolist()


def test_feminitive_pairs_contrast_only_forms_where_one_is_clearly_wrong():
    """«Олена — вчитель» is grammatical: a feminitive pair always has a gendered modifier that decides."""
    fem = PAIRS[PAIRS["kind"] == "feminitive"]
    assert len(fem)
    for row in fem.itertuples():
        modifier = _words(row.grammatical)[_words(row.grammatical).index(row.form_grammatical) - 1]
        assert modifier in {"наш", "наша", "досвідчений", "досвідчена", "опытный", "опытная"}, row.pair_id


@pytest.mark.parametrize("file, find, replace, message", [
    ("templates.tsv", "{S} [прийшов|прийшла]", "{S} прийшла", "row 12 (line 16), column 'text': text needs exactly one varied form"),
    ("templates.tsv", "uk_verb_keys\tuk\tverb", "uk_verb_keys\tuk\tverbs", "row 14 (line 18), column 'kind'"),
    ("templates.tsv", "uk_verb_keys\tuk", "uk_verb_keys\txx", "row 14 (line 18), column 'language'"),
    ("subjects.tsv", "uk\tf\tОлена", "uk\tx\tОлена", "column 'gender': gender 'x' is not f or m"),
    ("subjects.tsv", "uk\tf\tОлена\n", "", "both genders must be balanced"),
    ("nouns.tsv", "uk\tвчитель\tвчителька", "uk\tвчитель", "cells, expected 3"),
])
def test_a_bad_data_file_is_one_line_naming_file_and_row(tmp_path, file, find, replace, message):
    for name in ("templates.tsv", "subjects.tsv", "nouns.tsv"):
        shutil.copy(data_dir() / name, tmp_path / name)
    path = tmp_path / file
    text = path.read_text(encoding="utf-8")
    assert find in text
    path.write_text(text.replace(find, replace, 1), encoding="utf-8")
    with pytest.raises(DataError) as err:
        load_pairs(tmp_path)
    line = str(err.value)
    assert "\n" not in line and line.startswith(str(path)) and message in line, line


def test_unknown_option_and_split_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown key"):
        BENCHMARK.run(FakeScorer(sentences={}), tmp_path, {"items": "all"}, CTX)
    with pytest.raises(ValueError, match="not 'train'"):
        BENCHMARK.run(FakeScorer(sentences={}), tmp_path, {}, EvalContext(split="train", progress=False))
