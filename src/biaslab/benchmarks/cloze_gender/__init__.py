"""ClozeGender (Sabir & Sharma 2025, arXiv 2507.02679): GenderLex, the authors' WinoBias/Winogender, CrowS-Pairs.

Two scoring modes, as in the authors' two scripts (github.com/ahmedssabir/GenderLex, ``code/``):

* **ClozeLast** (GenderLex, ``clozegender_metric.py``): the pronoun is the last word. For each row
  ``P_m = P(" " + last word of sent_m | prefix)`` and ``P_w`` likewise (the prefix is the sentence minus its
  last word and must be the same for both sides); ``CGS = P^(1 − sim(pronoun, context word))``. Per subject
  folder (occupation / someone / person) × context type (noun / verb / occ): to-him ratio, human-bias match,
  KL, WEAT, and per folder the combined column (Table 2). The pronoun of each side is read from its sentence,
  so swapping ``sent_m`` and ``sent_w`` mirrors every number.
* **Mean probability** (``meanpro_metric.py``): the pronoun may be anywhere, so a sentence is scored as a
  whole: ``sentence_prob: authors`` (default) = the arithmetic mean of token probabilities without the ``"."``
  token, ``geometric`` = exp(mean token log-prob). Used for the authors' extracted WinoBias / Winogender
  sentences (Table 4, dataset ``genderlex_wino``, optional), CrowS-Pairs gender pairs (Table 5) and
  biaslab's own WinoBias / Winogender metrics on the original datasets.

Every definition follows the paper's tables (checked against the published numbers where the authors'
per-row outputs give them); the differences and their options are in ``docs/fidelity.md``. For masked LMs
the scorer computes P([MASK] = pronoun) and pseudo-log-likelihoods instead (``docs/cloze_gender.md``).

Modules: :mod:`.options` (datasets, defaults, checks), :mod:`.items` (prepared tables, ClozeLast items),
:mod:`.scoring` (the scorer requests), :mod:`.collector` (metric values with CIs), :mod:`.genderlex`
(Tables 2/4 metrics), :mod:`.crows` (Table 5), :mod:`.winobias_winogender` (biaslab's own metrics),
:mod:`.paper` (the paper's tables for the report), :mod:`.benchmark` (orchestration).

Run: ``BENCHMARK.run(scorer, Path("data/prepared"), {"vectors": "model"}, EvalContext())``.
"""

from biaslab.benchmarks.cloze_gender.benchmark import BENCHMARK, ClozeGenderBenchmark
from biaslab.benchmarks.cloze_gender.options import DATASETS, DEFAULTS, NAME

__all__ = ["BENCHMARK", "DATASETS", "DEFAULTS", "NAME", "ClozeGenderBenchmark"]
