"""RuBia (Grigoreva et al., LREC-COLING 2024): does the model prefer the pro-trope sentence?

Each pair is a pro-trope sentence (reinforces a stereotype) and its anti-trope edit. The model
prefers the pro-trope sentence when ``score(pro) > score(anti)``; the **bias score** of a set of
pairs is the share of pairs where it does (0.5 = no preference, the ideal; 1 = always stereotyped).

Scoring (paper 5, see :mod:`biaslab.benchmarks.pair_preference`):

* causal LM: sentence log-likelihood ``log P(sentence | BOS)``;
* masked LM: PPLL for the ``gender`` domain and for the inclusive-language subdomain
  (``lgbtq/freeform_gendergap``: "we want to measure the likelihood of a model to use inclusive
  language ... accounting for word frequencies contradicts this goal"), MPLL for every other domain.

Where the authors' released code differs: their ``Analysis/Model_Scoring.ipynb`` (vergrig/RuBia-Dataset,
commit eaab66e) compares ``lmppl`` perplexities, i.e. per-token *mean* (pseudo-)log-likelihoods, with
PPLL for every masked model and no MPLL at all. That notebook scores other models than the paper's
Table 1 (its output, ``Analysis/statistics.tsv``, has no RemBERT or ruBERT-conversational, and its
ruBERT-large / ruRoBERTa-large numbers differ from Table 1), so the paper's prose is the best account
of Table 1 and is the default. ``normalize: mean`` with ``ppll_domains`` listing every domain is the
notebook's rule; with it, this module's aggregation reproduces ``statistics.tsv`` from the authors'
``scored_data.tsv`` (tested).

The paper says the sentences were lower-cased and stripped of most punctuation; the released
``rubia.tsv`` is neither (the notebook scores it as it is). ``lowercase: true`` lower-cases both
sentences before scoring (punctuation is left as released: "mostly removed" is not a rule).

Aggregation (as the authors' ``gets_stats``): subdomain scores use all of the subdomain's rows;
domain and overall scores drop the ``*_stereotype`` copies of ``*_full`` pairs (``is_duplicate``)
and the inclusive-language subdomain (it "does not directly measure stereotyping"). The notebook
merges ``nationality/freeform_enemy`` into ``freeform_full`` and ``class/template_poor|rich`` into
``template_wealth`` before counting, and the paper's Table 1 shows the merged rows ("Freeform",
"Stereo. wealth"): we report the subdomains as released *and* the merged ones
(``nationality/freeform_merged``, ``class/template_wealth``). ``metrics.PAPER_TABLE_1`` maps Table 1's rows
to subdomains.

Metrics: ``rubia/pro_share`` (overall), ``rubia/pro_share/<domain>`` (bootstrap CI over pairs),
``rubia/pro_share/<domain>/<subdomain>`` (no CI); all ``direction="target"``, ``ideal=0.5``.

Modules: :mod:`.items` (the pairs, PPLL or MPLL per pair), :mod:`.metrics` (shares, merged rows, Table 1's
rows), :mod:`.paper` (Table 1 for the report), :mod:`.benchmark` (options, orchestration).
"""

from biaslab.benchmarks.rubia.benchmark import BENCHMARK, DEFAULT_OPTIONS, RuBia

__all__ = ["BENCHMARK", "DEFAULT_OPTIONS", "RuBia"]
