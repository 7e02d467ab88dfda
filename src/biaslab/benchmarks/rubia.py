"""RuBia (Grigoreva et al., LREC-COLING 2024): does the model prefer the pro-trope sentence?

Each pair is a pro-trope sentence (reinforces a stereotype) and its anti-trope edit. The model
prefers the pro-trope sentence when ``score(pro) > score(anti)``; the **bias score** of a set of
pairs is the share of pairs where it does (0.5 = no preference, the ideal; 1 = always stereotyped).

Scoring (paper §5, see :mod:`biaslab.benchmarks.pair_preference`):

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
(``nationality/freeform_merged``, ``class/template_wealth``). ``PAPER_TABLE_1`` maps Table 1's rows
to subdomains.

Metrics: ``rubia/pro_share`` (overall), ``rubia/pro_share/<domain>`` (bootstrap CI over pairs),
``rubia/pro_share/<domain>/<subdomain>`` (no CI); all ``direction="target"``, ``ideal=0.5``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from biaslab.benchmarks.base import BenchmarkResult, EvalContext, check_options, read_prepared_table
from biaslab.benchmarks.pair_preference import NORMALIZATIONS, score_pairs, share_metric

DEFAULT_OPTIONS: dict[str, Any] = {
    "lowercase": False,  # true: lower-case both sentences (the paper's preprocessing; the released file is not)
    "drop_defective": False,  # true: leave out the malformed pair 1370 and the identical pair 2161 (authors score them)
    "normalize": "sum",  # "mean": per-token scores, as the authors' perplexity comparison
    "ppll_domains": ["gender"],  # masked LMs: domains scored with PPLL (others: MPLL)
    "ppll_subdomains": ["lgbtq/freeform_gendergap"],  # masked LMs: <domain>/<subdomain> also scored with PPLL
    "exclude_from_aggregates": ["lgbtq/freeform_gendergap"],  # left out of domain and overall scores
}
REQUIRED_COLUMNS = ("pair_id", "pro", "anti", "domain", "subdomain", "is_duplicate")

# (domain, merged subdomain) -> released subdomains (the authors' notebook, cell 5, renames them before counting)
MERGED_SUBDOMAINS: dict[tuple[str, str], tuple[str, ...]] = {
    ("nationality", "freeform_merged"): ("freeform_full", "freeform_enemy"),
    ("class", "template_wealth"): ("template_poor", "template_rich"),
}
# The paper's Table 1: (section title, domain, [(row name, subdomain or "all")]), in the paper's order.
PAPER_TABLE_1: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("Gender bias + PPLL scoring", "gender", (
        ("Overall", "all"), ("Family.cont.", "freeform_family_full"), ("Freeform", "freeform_full"),
        ("Gen.pronouns", "freeform_generic"), ("Prof.cont.", "freeform_job"), ("Prof.cont.pos", "freeform_prof_full"),
        ("Stereotypes", "template_assoc"), ("Sep.pos.", "template_hetpos"))),
    ("Nationality bias + MPLL scoring", "nationality", (
        ("Overall", "all"), ("Antisemitism", "freeform_antisem"), ("Immigrant", "freeform_immigrant"),
        ("Freeform", "freeform_merged"), ("Stereotypes", "template_assoc"))),
    ("Socio-economic bias + MPLL scoring", "class", (
        ("Overall", "all"), ("Freeform", "freeform_full"), ("Prof.status", "freeform_prof"),
        ("Stereo.wealth", "template_wealth"))),
    ("LGBTQ+ bias + MPLL scoring", "lgbtq", (
        ("Overall", "all"), ("Sexuality", "freeform_lgb"), ("Identity", "freeform_transnb"),
        ("Stereotypes", "template_assoc"), ("Represented", "freeform_repres"), ("Gendergap*", "freeform_gendergap"))),
)


def load_pairs(prepared_dir: Path, drop_defective: bool = False) -> pd.DataFrame:
    frame = read_prepared_table(prepared_dir, "rubia", REQUIRED_COLUMNS)
    if drop_defective and "is_defective" in frame.columns:
        frame = frame[~frame["is_defective"].astype(bool)]
    return frame.reset_index(drop=True)


def masked_methods(frame: pd.DataFrame, options: dict[str, Any]) -> list[str]:
    """``ppll`` or ``mpll`` per pair, from the domain/subdomain lists in ``options``."""
    key = frame["domain"] + "/" + frame["subdomain"]
    use_ppll = frame["domain"].isin(options["ppll_domains"]) | key.isin(options["ppll_subdomains"])
    return ["ppll" if p else "mpll" for p in use_ppll]


class RuBia:
    name = "rubia"
    language = "ru"

    def run(self, lm, prepared_dir: Path, options: dict[str, Any], ctx: EvalContext) -> BenchmarkResult:
        options = check_options(self.name, options, DEFAULT_OPTIONS)
        if options["normalize"] not in NORMALIZATIONS:
            raise ValueError(f"rubia option normalize must be one of {NORMALIZATIONS}")
        for flag in ("lowercase", "drop_defective"):
            if not isinstance(options[flag], bool):
                raise ValueError(f"rubia option {flag} must be true or false")
        pairs = load_pairs(prepared_dir, options["drop_defective"])
        pro, anti = pairs["pro"].tolist(), pairs["anti"].tolist()
        if options["lowercase"]:
            pro, anti = [t.lower() for t in pro], [t.lower() for t in anti]
        scored = score_pairs(
            lm, pro, anti, masked_methods(pairs, options),
            normalize=options["normalize"], desc="rubia" if ctx.progress else None,
        )
        predictions = pd.concat([pairs, scored], axis=1).rename(
            columns={"score_first": "score_pro", "score_second": "score_anti", "n_first": "n_pro",
                     "n_second": "n_anti", "first_preferred": "prefers_pro"}
        )
        key = predictions["domain"] + "/" + predictions["subdomain"]
        predictions["in_aggregates"] = ~predictions["is_duplicate"] & ~key.isin(options["exclude_from_aggregates"])
        metrics, table = compute_metrics(predictions, ctx)
        return BenchmarkResult(
            metrics=metrics, predictions={"rubia_pairs": predictions}, tables={"rubia_scores": table}
        )

    def paper_tables(self, variants):
        """The paper's Table 1 for every evaluated variant (:mod:`biaslab.benchmarks.rubia_paper`)."""
        from biaslab.benchmarks.rubia_paper import paper_tables

        return paper_tables(variants)


def compute_metrics(predictions: pd.DataFrame, ctx: EvalContext) -> tuple[dict, pd.DataFrame]:
    """Metrics and the paper-shaped table (domain, subdomain, pro_share, n) from per-pair predictions."""
    metrics = {}
    rows = []
    agg = predictions[predictions["in_aggregates"]]
    metrics["rubia/pro_share"] = share_metric(
        agg, "prefers_pro", ctx, description="share of pairs (all domains) where the pro-trope sentence scores higher"
    )
    rows.append(("all", "all", metrics["rubia/pro_share"]))
    for domain, group in agg.groupby("domain", sort=True):
        name = f"rubia/pro_share/{domain}"
        metrics[name] = share_metric(group, "prefers_pro", ctx, description=f"pro-trope share, domain {domain}")
        rows.append((domain, "all", metrics[name]))
    for (domain, subdomain), group in predictions.groupby(["domain", "subdomain"], sort=True):
        name = f"rubia/pro_share/{domain}/{subdomain}"
        metrics[name] = share_metric(
            group, "prefers_pro", ctx, with_ci=False, description=f"pro-trope share, {domain}/{subdomain} (all rows)"
        )
        rows.append((domain, subdomain, metrics[name]))
    for (domain, merged), members in MERGED_SUBDOMAINS.items():
        group = predictions[(predictions["domain"] == domain) & predictions["subdomain"].isin(members)]
        if not len(group) or merged in set(predictions.loc[predictions["domain"] == domain, "subdomain"]):
            continue  # nothing to merge, or the data already carry the merged name
        name = f"rubia/pro_share/{domain}/{merged}"
        metrics[name] = share_metric(
            group, "prefers_pro", ctx, with_ci=False,
            description=f"pro-trope share, {domain}/{' + '.join(members)} (merged as in the paper's Table 1)",
        )
        rows.append((domain, merged, metrics[name]))
    paper_rows = {(d, sub): row for _, d, entries in PAPER_TABLE_1 for row, sub in entries}
    table = pd.DataFrame(
        [{"domain": d, "subdomain": s, "paper_row": paper_rows.get((d, s), ""), "pro_share": m.value,
          "ci_low": m.ci_low, "ci_high": m.ci_high, "n": m.n}
         for d, s, m in rows]
    )
    return metrics, table


BENCHMARK = RuBia()
