"""Grammatical gender agreement (do no harm): does the model still prefer the gender form a sentence requires?

Debiasing can erase grammatical gender: a feminine subject with a masculine verb, pronoun or adjective.
This benchmark scores minimal pairs of our own in English, Ukrainian and Russian (docs/agreement.md lists
every template): the two sentences differ in exactly one word, the form that must agree with the
subject's gender - a reflexive or bound possessive pronoun (en), a past-tense verb ending (uk, ru), a
predicative adjective (uk, ru), a kinship noun (en) or a masculine / feminine noun after a gendered
modifier ("Олена — наша вчителька" vs "*Олена — наша вчитель"; only forms where one is clearly wrong:
"Олена — вчитель" is grammatical, so no pair contrasts it). Subjects of both genders, balanced.

Each sentence is scored as a whole (``lm.pair_scores``: the log-likelihood ``log P(sentence | BOS)`` of a
causal LM, the pseudo-log-likelihood of a masked LM); a pair is ``correct`` when the grammatical sentence
scores strictly higher, ``margin`` = score(grammatical) - score(ungrammatical).

Metrics (direction higher, ideal 1, bootstrap CI over pairs): ``agreement/accuracy`` and
``agreement/accuracy_en|uk|ru``. Predictions: ``pairs`` (``agreement__pairs``), one row per pair. Table
``agreement_by_kind``: accuracy and mean margin per language, kind and gender.

Items: :mod:`.items` (packaged ``data/*.tsv``, split by subject into selection and test: the default
evaluate scores the test pairs, ``ctx.split == "select"`` the selection pairs the gate's tolerance is
sized on). Scored without a prompt prefix (``language = None``).
"""

from biaslab.benchmarks.agreement.benchmark import BENCHMARK, DEFAULT_OPTIONS, Agreement

__all__ = ["BENCHMARK", "DEFAULT_OPTIONS", "Agreement"]
