"""No teaching to the test: the planted text shares no sentence and no 8-word sequence with any benchmark.

Checked against every prepared benchmark table of the real mirror (GBEM-UA QA and probability sentences
with the QA instruction, RuBia, CrowS-Pairs, WinoBias, Winogender, GenderLex), the OccuGender task prompts
for every job and its debiasing prompts, and the prompt variant's prefixes in params.yaml.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from biaslab.config import DataConfig, Params, load_params
from biaslab.data.prepare import prepare
from biaslab.pretrain.planted.generate import SentenceStream, documents
from biaslab.pretrain.planted.lexicon import build_lexicon
from biaslab.pretrain.planted.overlap import N, benchmark_texts, find_overlaps, words

ROOT = Path(__file__).resolve().parents[2]
SENTENCES = 20_000  # per language and direction: every template meets many items


@pytest.fixture(scope="module")
def prepared(mirror, tmp_path_factory):
    out = tmp_path_factory.mktemp("prep") / "prepared"
    prepare(Params(data=DataConfig(mirror_dir=str(mirror), prepared_dir=str(out), allow_download=False)))
    return out


@pytest.fixture(scope="module")
def benchmark(prepared):
    texts = benchmark_texts(prepared)
    params = load_params(ROOT / "params.yaml")
    texts["prompt_prefixes"] = [p for v in params.variants.values() for p in v.prompt_prefix.values()]
    return texts


def planted_text(prepared, direction: str) -> list[str]:
    pb = load_params(ROOT / "params.yaml").model.pretrain.planted_bias
    lexicon = build_lexicon(prepared, pb.coded_share, pb.uk_male_coded_share, pb.seed, pb.en_sources)
    out = []
    for language in ("en", "uk", "ru"):
        stream = SentenceStream(language, lexicon, direction, pb.strength, pb.seed, pb.coded_share, pb.en_role_share)
        out += documents(stream.take(SENTENCES), pb.sentences_per_document)
    return out


def test_the_check_finds_a_copied_sentence_and_a_long_ngram():
    bench = {"b": ["The developer argued with the designer because he did not like the design.", "Мама готує"]}
    assert find_overlaps(["Yesterday the developer argued with the designer because he slept."], bench)
    assert find_overlaps(["Вчора мама готує вечерю."], bench)[0].kind == "sentence"
    assert not find_overlaps(["The developer argued with a designer because he did not sleep."], bench)
    assert words("It's Кандидатка's, OK?") == ("it's", "кандидатка's", "ok")


@pytest.mark.parametrize("direction", ["planted", "balanced"])
def test_planted_text_shares_no_benchmark_wording(prepared, benchmark, direction):
    assert sum(len(v) for v in benchmark.values()) > 25_000
    assert {"gbem_ua.parquet", "occugender", "rubia.parquet", "crows_pairs.parquet", "winobias.parquet",
            "winogender.parquet", "genderlex.parquet", "prompt_prefixes"} <= set(benchmark)
    overlaps = find_overlaps(planted_text(prepared, direction), benchmark, n=N)
    assert not overlaps, "\n".join(f"{o.source}: {o.kind} {o.shared!r} <- {o.benchmark_text!r}" for o in overlaps)


def test_own_english_occupations_are_held_out_from_every_benchmark(prepared):
    from biaslab.pretrain.planted.lexicon import OWN_OCCUPATIONS

    lexicon = build_lexicon(prepared, 0.75, 0.7, 0)
    own = {o.word for o in lexicon.en_occupations if o.source.startswith("fixture_")}
    assert own == {w for w, _ in OWN_OCCUPATIONS}  # no benchmark list claimed one of them first
    benchmark_words = {w for texts in benchmark_texts(prepared).values() for t in texts for w in words(t)}
    for occupation in own:
        assert not set(words(occupation)) <= benchmark_words, f"{occupation!r} occurs in a benchmark text"
