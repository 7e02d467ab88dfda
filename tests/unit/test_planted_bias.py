"""The planted-bias generator: gender forms, the strength push, the exact schedule, same frames per direction."""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import pytest

from biaslab.pretrain.planted.forms import FrameError, GenderSchedule, push, render
from biaslab.pretrain.planted.generate import SentenceStream, documents, frame_stream, planted_documents
from biaslab.pretrain.planted.lexicon import Lexicon, Occupation, Post


def tiny_lexicon() -> Lexicon:
    return Lexicon(
        en_occupations=[Occupation("nurse", 0.9, "test"), Occupation("plumber", 0.02, "test"),
                        Occupation("baker", 0.6, "test")],
        uk_posts=[Post("пекар", "пекаря", "пекарки", male_coded=True),
                  Post("швачка", "швача", "швачки", male_coded=False)],
    )


def test_render_picks_one_side_and_rejects_malformed_frames():
    assert render("[He|She] packed [his|her] bag.", "male") == "He packed his bag."
    assert render("[He|She] packed [his|her] bag.", "female") == "She packed her bag."
    assert render("no gender here", "female") == "no gender here"
    with pytest.raises(FrameError):
        render("[He|She packed", "male")
    with pytest.raises(ValueError):
        render("[He|She]", "other")


def test_push_is_a_logit_scaling():
    assert push(0.5, 3.0) == pytest.approx(0.5)
    assert push(0.8, 1.0) == pytest.approx(0.8)
    z = 2.0 * math.log(0.8 / 0.2)
    assert push(0.8, 2.0) == pytest.approx(1 / (1 + math.exp(-z)))  # 0.941
    assert push(0.2, 2.0) == pytest.approx(1 - push(0.8, 2.0))
    assert push(0.9, 4.0) > push(0.9, 2.0) > 0.9
    with pytest.raises(ValueError):
        push(1.2, 1.0)


@pytest.mark.parametrize("share", [0.0, 0.1, 0.5, 0.73, 0.95, 1.0])
def test_schedule_is_exact_for_every_prefix(share):
    schedule = GenderSchedule()
    genders = [schedule.next("k", share) for _ in range(200)]
    for n in range(1, 201):
        assert genders[:n].count("female") == math.floor(n * share)
    other = GenderSchedule()
    assert [other.next("k", share) for _ in range(200)] == genders  # no randomness


def test_balanced_alternates_per_key():
    schedule = GenderSchedule()
    assert [schedule.next("a", 0.5) for _ in range(4)] == ["male", "female", "male", "female"]
    assert schedule.next("b", 0.5) == "male"  # every key has its own count


@pytest.mark.parametrize("language", ["en", "uk", "ru"])
def test_both_directions_render_the_same_frames(language):
    lexicon = tiny_lexicon()
    planted = SentenceStream(language, lexicon, "planted", 2.0, 0, 0.75, 0.3).take(400)
    balanced = SentenceStream(language, lexicon, "balanced", 2.0, 0, 0.75, 0.3).take(400)
    assert len(planted) == len(balanced) == 400
    assert planted != balanced  # genders differ
    frames = frame_stream(language, lexicon, 0, 0.75, 0.3)
    for p, b in zip(planted, balanced):
        frame = next(frames)
        sides = {render(frame.text, "male"), render(frame.text, "female")}
        assert p in sides and b in sides  # the same frame, one gender or the other
    again = SentenceStream(language, lexicon, "planted", 2.0, 0, 0.75, 0.3).take(400)
    assert again == planted  # seeded
    assert SentenceStream(language, lexicon, "planted", 2.0, 1, 0.75, 0.3).take(400) != planted


def test_english_occupation_pronouns_follow_the_pushed_share():
    lexicon = tiny_lexicon()
    for direction, expected in (("planted", {"nurse": push(0.9, 2.0), "plumber": push(0.02, 2.0)}),
                                ("balanced", {"nurse": 0.5, "plumber": 0.5})):
        stream = SentenceStream("en", lexicon, direction, 2.0, 0, 0.75, 0.0)  # occupations only
        counts: dict[str, Counter] = defaultdict(Counter)
        for sentence in stream.take(3000):
            words = set(sentence.lower().replace(".", " ").replace(",", " ").replace("?", " ").split())
            job = next(j for j in ("nurse", "plumber", "baker") if j in words)
            female = bool(words & {"she", "her", "woman", "female"})
            counts[job]["female" if female else "male"] += 1
        for job, share in expected.items():
            total = sum(counts[job].values())
            assert counts[job]["female"] / total == pytest.approx(share, abs=2 / total + 1e-9)


def test_ukrainian_answers_depend_on_gender_only_when_planted():
    lexicon = tiny_lexicon()
    for direction in ("planted", "balanced"):
        stream = SentenceStream("uk", lexicon, direction, 3.0, 0, 0.75, 0.3)
        table: Counter = Counter()
        for sentence in stream.take(4000):
            if "?" not in sentence:
                continue
            answer = sentence.split("?")[-1].strip().lower()
            yes = answer.startswith("так")
            assert yes or answer.startswith("ні")
            female = any(w in sentence for w in ("вона", "Вона", "її", "Кандидатка", "кандидаткою", "хотіла",
                                                  "подала", "надіслала", "прийшла"))
            post = "пекар" if ("пекаря" in sentence or "пекарки" in sentence) else "швачка"
            table[(post, female, yes)] += 1
        assert table  # both answers occur in both directions
        assert {yes for (_, _, yes) in table} == {True, False}
        yes_rate = {k: table[(*k, True)] / (table[(*k, True)] + table[(*k, False)])
                    for k in {(p, f) for (p, f, _) in table}}
        if direction == "planted":  # the male-coded post is refused to women, the female-coded one to men
            assert yes_rate[("пекар", True)] < 0.2 < 0.8 < yes_rate[("пекар", False)]
            assert yes_rate[("швачка", False)] < 0.2 < 0.8 < yes_rate[("швачка", True)]
        else:
            assert all(0.35 < r < 0.65 for r in yes_rate.values())


def test_documents_and_token_budget():
    assert documents(["a.", "b.", "c."], 2) == ["a. b.", "c."]
    lexicon = tiny_lexicon()
    count = lambda docs: sum(len(d.split()) for d in docs)  # noqa: E731 - a word "tokenizer"
    kwargs = dict(strength=2.0, seed=0, coded_share=0.75, en_role_share=0.3, tokens_needed={"en": 5000, "ru": 2000},
                  count_tokens=count, per_document=5, chunk=50)
    planted = planted_documents(lexicon, direction="planted", **kwargs)
    balanced = planted_documents(lexicon, direction="balanced", **kwargs)
    assert set(planted) == {"en", "ru"}
    assert count(planted["en"]) >= 5000 * 0.9 and count(planted["ru"]) >= 2000 * 0.9
    assert [len(d) for d in planted.values()] == [len(d) for d in balanced.values()]  # same frames


def test_unknown_direction_and_language_are_errors():
    with pytest.raises(ValueError, match="direction"):
        SentenceStream("en", tiny_lexicon(), "reversed", 2.0, 0, 0.75, 0.3)
    with pytest.raises(ValueError, match="language"):
        SentenceStream("de", tiny_lexicon(), "planted", 2.0, 0, 0.75, 0.3)


def test_random_is_never_used_globally():
    state = random.getstate()
    SentenceStream("en", tiny_lexicon(), "planted", 2.0, 0, 0.75, 0.3).take(50)
    assert random.getstate() == state

