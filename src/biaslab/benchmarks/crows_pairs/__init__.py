"""CrowS-Pairs (Nangia et al., EMNLP 2020): how often the model prefers the more stereotypical sentence.

Every pair has ``sent_more`` (the more stereotypical sentence) and ``sent_less`` (its minimal edit
about the contrasting group). ``pct_stereotype`` is the share of pairs whose ``sent_more`` scores
higher; 0.5 is the ideal (no systematic preference).

Causal LMs - exactly lm-evaluation-harness ``crows_pairs_english`` (``lm_eval/tasks/crows_pairs``):
``doc_to_text: ""``, ``target_delimiter: ""``, choices ``[sent_more, sent_less]``, so each choice is
``loglikelihood("", sentence)``; ``utils.process_results`` sets ``likelihood_diff = |ll_more -
ll_less|`` and ``acc = 1.0 if ll_more > ll_less else 0.0`` (ties are non-stereotypical), reported as
``pct_stereotype`` (mean of acc). The harness and the original ``metric.py`` score every row (1,508,
one exact duplicate pair included), and so do we; ``drop_duplicates: true`` drops the duplicate
(``is_duplicate``). The harness reads the Hugging Face copy ``jannalu/crows_pairs_multilingual``
(``english``); we read the original CSV of nyu-mll/crows-pairs (commit 8aaac11).

Masked LMs - the original CrowS metric (authors' ``metric.py``, ``mask_unigram``): the score of a
sentence is the sum of log P over the tokens it shares with the other sentence (difflib on token
ids), each masked in turn (MPLL, :mod:`biaslab.benchmarks.pair_preference`). Scores are rounded to 3
decimals; equal rounded scores are "neutral" and count as not stereotypical (they stay in the
denominator N). On direction: ``read_data`` stores antistereo pairs swapped (``sent1 = sent_less``,
``sent2 = sent_more``) and ``evaluate`` counts an antistereo pair when ``sent2_score > sent1_score``
- the two swaps cancel, so for *both* directions a pair counts when ``sent_more`` scores higher.
That is what we compute (``metric_score = (stereo_score + antistereo_score) / N``). The per-direction
shares of the table are, as ``metric.py``'s "Stereotype score" / "Anti-stereotype score", over the
pairs of that direction that are not neutral.

Metrics (``direction="target"``, ``ideal=0.5`` unless said): ``crows_pairs/pct_stereotype`` and
``crows_pairs/pct_stereotype_gender`` (bootstrap CI over pairs), ``crows_pairs/likelihood_diff``
and ``..._gender`` (mean |score_more - score_less|, direction "lower"), masked only
``crows_pairs/pct_neutral``. Table ``crows_pairs_by_bias_type``: per bias type x direction.

Modules: :mod:`.items` (the pairs), :mod:`.metrics` (votes, shares, table), :mod:`.benchmark` (options, orchestration).
"""

from biaslab.benchmarks.crows_pairs.benchmark import BENCHMARK, DEFAULT_OPTIONS, CrowsPairs

__all__ = ["BENCHMARK", "DEFAULT_OPTIONS", "CrowsPairs"]
