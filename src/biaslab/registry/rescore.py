"""The promoter re-scores a seeded sample of the evidence's prediction rows from the verified bytes.

The evidence checks (:mod:`biaslab.registry.evidence_check`) prove *who* wrote an evaluate run and that its
artifacts are the ones it bound; they cannot prove the numbers came from the model. A leaked evaluator
credential could log a self-consistent run with made-up tables. This check closes that: for every prediction
table whose benchmark offers ``rescore`` (the benchmark's own request code, e.g.
:func:`biaslab.benchmarks.pair_preference.rescore_pairs`), it draws ``n`` rows overall (seed
``registry.bootstrap.seed``) from the variant's and the base's tables, loads each version's verified files with
biaslab's own loader (:func:`biaslab.serving.loader.load_served_variant`, the one ``serve`` uses; once per
version, every language's scorer a ``with_prefix`` copy sharing that one loaded model), scores the rows again and
refuses when a stored value differs from the recomputed one by more than :data:`TOLERANCE` (a probability on
the log scale, a boolean exactly).

Which columns are checked: every benchmark offers ``rescore(lm, table, rows, options, tables=...)``; per table it
returns the stored columns that are pure functions of model and row - the raw scores and the counts, answers and
preferences the gate's rules read - recomputed by the benchmark's own request code (the function its ``run``
calls). A pair or aggregate row names its items, whose text is in another table of the same evaluation:
``tables`` hands the benchmark its stored tables, and the items' text is scored and aggregated again by the same
code (a custom module's ``rescore`` written to the older ``(lm, table, rows, options)`` contract is called
without ``tables``).

* agreement ``pairs``: ``logprob_grammatical``, ``logprob_ungrammatical``; CrowS-Pairs ``crows_pairs_pairs``:
  ``score_more``, ``score_less``; RuBia ``rubia_pairs``: ``score_pro``, ``score_anti`` (causal or masked, PPLL/MPLL
  and normalisation as the options say), ``prefers_pro``;
* OccuGender ``occugender_forms``: ``logprob``, ``n_tokens`` of each form; ``occugender_items``: ``log_P_<g>``,
  ``p_<g>``; ``occugender_jobs``: ``p_<g>`` (their forms scored and aggregated again);
* GBEM-UA ``qa``: ``logprob_yes``, ``logprob_no``, ``answer_yes``; ``qa_pairs``: ``logodds_<side>``,
  ``answer_yes_<side>`` (both with the ``logprob`` parser; the ``embedding`` parser's answer is a generation
  judged by an encoder outside the model's files: ``{}``); ``prob``: ``pos_logprob``, ``neg_logprob``,
  ``pos_n_tokens``, ``neg_n_tokens``, ``label``; ``prob_pairs``: the pair-padded ``p_pos_<side>``,
  ``p_neg_<side>`` and ``label_<side>``;
* lm_quality ``lm_quality_chunks``: ``logprob``, ``n_tokens``, ``n_chars`` of the stored chunk ``text``;
* ClozeGender ``cloze_gender_genderlex``: ``logprob_m``/``_w``, ``n_tokens_m``/``_w``; the sentence tables
  (``_winobias``, ``_winogender``, ``_crows``, ``_genderlex_wino``): ``logprob_<side>`` and the sentence
  probability ``p_<side>``/``prob_<side>``.

Other columns follow from these by arithmetic (votes, gaps, CGS) and are not compared; a table whose ``rescore``
returns ``{}`` (GBEM-UA's QA tables under the ``embedding`` parser) compares nothing and its drawn rows are counted
apart, naming it. The text itself is checked across versions, without the model: each benchmark declares the key
and input columns of its tables (``rescore_inputs``, :mod:`biaslab.benchmarks.base`: what names a row, what the
model scored for it or a metric compares it with); the variant's table must hold the same keys as the base's (the
versions were scored on the same test items: a key in one table only is refused) and, per key, the same inputs, so
a forged easier text with honest scores of it is refused. A table whose benchmark declares no inputs (a custom
module without ``rescore_inputs``) has its scores checked, not its text, and the row names it as not compared. A
table whose rows lack what was scored (a dropped text column, a missing score column) is refused, not skipped; only
a table of a benchmark without ``rescore`` (none of biaslab's) is not sampled, and the row names it. Each benchmark
has one ``language`` (none scores rows of several languages behind a prefix; agreement and lm_quality have none and
get no prefix), so the prefix is chosen per benchmark as the evaluation chose it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biaslab.registry.gate import RuleResult

SAMPLE = 64  # rows drawn over all re-scorable tables of the variant and the base together
# nats: the evaluation scores rows in batches (padding, a different summation order) and the check scores a
# sample in other batches; float32 sums of a sentence's token log-probs then differ by ~1e-6..1e-5 (measured max
# |Δ| is in the row's reason). 1e-3 is two orders above that and far below a forged edit that changes a verdict
# (a tie within 1e-3 nats is the only thing it lets through). bf16 weights need more: the check runs in the dtype
# the package's settings name, on the CPU float32 unless they say otherwise. A log-prob or count column is
# compared absolutely; a probability column (PROBABILITY) on the log scale, |Δ log p| (a relative error of ~1e-3):
# its values sit near 0.0025 (GBEM-UA's pair-padded P+/P-, ClozeGender's mean token probabilities), where an
# absolute 1e-3 would let an edit of 40% of the value through; a boolean (an answer, a preference) exactly.
TOLERANCE = 1e-3
PROBABILITY = ("p_", "prob_")  # column-name prefixes of the probabilities the benchmarks' rescore returns
ASKS = "a seeded sample of the evidence's prediction rows, scored again from the verified bytes, agrees"


def _draw(tables: dict[tuple[str, str], Any], n: int, seed: int) -> dict[tuple[str, str], list[int]]:
    """``n`` row positions drawn without replacement over all ``(who, table)`` rows; sorted per table."""
    import numpy as np

    everything = [(key, i) for key, frame in tables.items() for i in range(len(frame))]
    if not everything:
        return {}
    picked = np.random.default_rng(seed).choice(len(everything), size=min(n, len(everything)), replace=False)
    out: dict[tuple[str, str], list[int]] = {}
    for k in sorted(int(p) for p in picked):
        key, i = everything[k]
        out.setdefault(key, []).append(i)
    return out


def _load(package: Path, base: Any = None) -> Any:
    """The version's files loaded as ``serve`` loads them (verified again; an overlay or prompt version's base
    loaded too): once per version, every language's scorer is built from this one load. ``base``: the promoter's
    verified base (:class:`biaslab.serving.base.VerifiedBase`), which an overlay or prompt version pinning exactly
    it loads on instead of downloading and hashing its base again."""
    from biaslab.serving.loader import load_served_variant

    return load_served_variant(package) if base is None else load_served_variant(package, base=base)


def _scorer(served: Any, language: str | None) -> Any:
    """``served``'s scorer with the prompt prefix the evaluation used for ``language``: a shallow copy sharing
    the loaded model (``with_prefix``), so the languages of one version cost no second load."""
    from biaslab.serving.predictor import select_prefix

    prefix = select_prefix(served.prefixes, served.method, language) if language else ""
    return served.scorer.with_prefix(prefix) if prefix else served.scorer


def _call(benchmark: Any, lm: Any, table: str, rows: Any, options: dict[str, Any], tables: dict[str, Any]) -> Any:
    """``benchmark.rescore``, given ``tables`` only when its signature takes them: a custom module written to the
    older four-argument contract (``lm, table, rows, options``) is still called, not crashed with a TypeError."""
    import inspect

    try:
        accepted = inspect.signature(benchmark.rescore).parameters
    except (TypeError, ValueError):  # a callable without a readable signature: the older contract
        accepted = {}
    if "tables" in accepted or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        return benchmark.rescore(lm, table, rows, options, tables=tables)
    return benchmark.rescore(lm, table, rows, options)


def _delta(column: str, stored: Any, fresh: Any) -> Any:
    """Per row, how far the stored value is from the recomputed one (see :data:`TOLERANCE`): a boolean column
    0 or inf (a stored value that is not that boolean: inf); a probability |Δ log p|; anything else |Δ|. NaN
    equals NaN; NaN against a number, or a stored value that is not a number, is inf."""
    import numpy as np
    import pandas as pd

    fresh = np.asarray(fresh)
    if fresh.dtype == bool:
        stored = np.asarray(stored, dtype=object)
        same = [isinstance(s, (bool, np.bool_)) and bool(s) == bool(v) for s, v in zip(stored, fresh)]
        return np.where(same, 0.0, np.inf)
    stored = pd.to_numeric(pd.Series(np.asarray(stored, dtype=object)), errors="coerce").to_numpy(dtype=float)
    values = fresh.astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        delta = np.abs(np.log(values) - np.log(stored)) if column.startswith(PROBABILITY) else np.abs(values - stored)
    delta[values == stored] = 0.0  # also two zero probabilities
    delta[np.isnan(values) & np.isnan(stored)] = 0.0
    delta[np.isnan(delta)] = np.inf  # one NaN, the other a number; a negative probability
    return delta


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds (for a reason that reads ``0``, not ``np.int64(0)``)."""
    return value.item() if hasattr(value, "item") else value


def _declared(benchmarks: dict[str, tuple[Any, dict[str, Any]] | None], keys: set[str]
              ) -> tuple[dict[str, tuple[tuple[str, ...], tuple[str, ...]]], str | None]:
    """Each ``<benchmark>__<table>`` in ``keys`` whose benchmark declares it in ``rescore_inputs``
    (:mod:`biaslab.benchmarks.base`): its (key columns, input columns); and why a declaration is unusable, or
    ``None``. A table its benchmark does not declare is left out (the caller names it as not compared)."""
    from biaslab.benchmarks.base import rescore_inputs_of

    out: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    for key in sorted(keys):
        name, _, table = key.partition("__")
        offered = rescore_inputs_of(benchmarks[name][0])  # type: ignore[index]
        if not isinstance(offered, Mapping):
            return out, (f"benchmark {name}: rescore_inputs is {offered!r}, not a mapping table -> (key columns, "
                         "input columns)")
        spec = offered.get(table)
        if spec is None:
            continue
        parts = tuple(spec) if isinstance(spec, (tuple, list)) and len(spec) == 2 else ()
        if not parts or not all(isinstance(p, (tuple, list)) and all(isinstance(c, str) for c in p) for p in parts) \
                or not parts[0]:  # a bare string is no tuple: ("pair_id") would be seven one-letter columns
            return out, (f"benchmark {name}: rescore_inputs[{table!r}] is {spec!r}, not (key columns, input columns) "
                         "with at least one key column, each a tuple of column names")
        out[key] = (tuple(parts[0]), tuple(parts[1]))
    return out, None


def _same_inputs(tables: dict[tuple[str, str], Any], versions: list[str],
                 declared: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]) -> str | None:
    """Why the versions' tables do not hold the same keys and, per key, the same inputs (``declared``: each
    benchmark's ``rescore_inputs``), or ``None``: each version's whole table (no model involved) against the first
    version's. The versions were scored on the same test items, so a key in one table only is refused too."""
    for key, (keys, inputs) in declared.items():
        present = [w for w in versions if (w, key) in tables]
        for who in present:  # a declared key column the table lacks: the declaration (or the table) is wrong
            lacking = [c for c in keys if c not in tables[(who, key)].columns]
            if lacking:
                name, _, table = key.partition("__")
                return (f"benchmark {name}: rescore_inputs[{table!r}] names key column(s) {lacking} that {who!r}'s "
                        f"table {key} lacks (its columns: {list(tables[(who, key)].columns)})")
        for other in present[1:]:
            first = present[0]
            a, b = tables[(first, key)], tables[(other, key)]
            columns = []
            for c in dict.fromkeys((*keys, *inputs)):  # each column once, the keys first
                if c not in a.columns and c not in b.columns:
                    continue  # an input column neither version wrote (e.g. an option's column); keys checked above
                if c not in a.columns or c not in b.columns:
                    has, lacks = (first, other) if c in a.columns else (other, first)
                    return (f"table {key}: {has!r}'s table has column {c}, {lacks!r}'s not (it names or holds what "
                            "the model scored)")
                columns.append(c)
            try:
                sides = a[list(keys)].drop_duplicates().merge(b[list(keys)].drop_duplicates(), on=list(keys),
                                                               how="outer", indicator="__side")
                both = a[columns].drop_duplicates().merge(b[columns].drop_duplicates(), on=list(keys),
                                                          suffixes=("", " (other)"))
            except (ValueError, TypeError) as exc:  # keys of different types
                return f"table {key}: the keys {list(keys)} of {first!r} and {other!r} do not compare ({exc})"
            lone = sides[sides["__side"] != "both"]
            if len(lone):
                has, lacks = (first, other) if lone["__side"].iloc[0] == "left_only" else (other, first)
                named = ", ".join(f"{k}={_plain(lone[k].iloc[0])!r}" for k in keys)
                return (f"table {key}: {has!r}'s table has the row {named}, {lacks!r}'s not ({len(lone)} key(s) in "
                        "one version's table only); the versions were evaluated on the same items")
            for column in columns[len(keys):]:
                mine, theirs = both[column], both[f"{column} (other)"]
                differ = ~((mine == theirs) | (mine.isna() & theirs.isna()))
                if differ.any():
                    j = int(differ.to_numpy().nonzero()[0][0])
                    named = ", ".join(f"{k}={_plain(both[k].iloc[j])!r}" for k in keys)
                    return (f"table {key} ({named}) column {column}: {first!r} stored {_plain(mine.iloc[j])!r}, "
                            f"{other!r} stored {_plain(theirs.iloc[j])!r}; the versions were evaluated on the same "
                            "items, so one evidence table holds other text than was evaluated")
    return None


def rescore_row(params: Any, evidence: Any, packages: dict[str, Path], *, n: int = SAMPLE,
                tolerance: float = TOLERANCE, base: Any = None) -> RuleResult:
    """One gate row: the sample of ``evidence``'s tables of each variant in ``packages`` (variant -> its
    verified, downloaded version) re-scored from those files; fails naming variant, table, row, column and both
    values on the first difference beyond ``tolerance``. ``base``: the verified base package
    (:class:`biaslab.serving.base.VerifiedBase`) an overlay or prompt version is loaded on (see :func:`_load`)."""
    import numpy as np

    from biaslab.benchmarks.registry import benchmark_of

    tables: dict[tuple[str, str], Any] = {}
    benchmarks: dict[str, tuple[Any, dict[str, Any]] | None] = {}
    unchecked: set[str] = set()
    for who in packages:
        for key, frame in evidence.predictions(who).items():
            name, _, table = key.partition("__")
            if name not in benchmarks:
                benchmarks[name] = benchmark_of(params.evaluation.benchmarks, name)
            if benchmarks[name] is None or not hasattr(benchmarks[name][0], "rescore"):
                unchecked.add(key)
                continue
            tables[(who, key)] = frame.reset_index(drop=True)
    note = f"; not re-scorable (no rescore): {', '.join(sorted(unchecked))}" if unchecked else ""
    declared, malformed = _declared(benchmarks, {k for _, k in tables})
    if malformed is not None:
        return RuleResult("evidence", "rescored_sample", ASKS, False, malformed)
    uncompared = sorted({k for _, k in tables} - set(declared))
    if uncompared:  # a custom benchmark without rescore_inputs: its scores are checked, its text is not
        note += f"; inputs not compared across versions (no rescore_inputs): {', '.join(uncompared)}"
    different = _same_inputs(tables, list(packages), declared)
    if different is not None:
        return RuleResult("evidence", "rescored_sample", ASKS, False, different)
    sample = _draw(tables, n, params.registry.bootstrap.seed)
    if not sample:
        return RuleResult("evidence", "rescored_sample", ASKS, True,
                          f"0 rows: the evidence has no re-scorable prediction table{note}")
    served: dict[str, Any] = {}  # who -> its one load; one version held at a time (an 8B model is 32 GB on a CPU)
    scorers: dict[tuple[str, str | None], Any] = {}

    def siblings(who: str, name: str) -> dict[str, Any]:
        """Every stored table of benchmark ``name`` in ``who``'s evidence, by bare name: a pair or aggregate row
        names its items, whose text is in another table."""
        return {k.partition("__")[2]: f for (w, k), f in tables.items() if w == who and k.partition("__")[0] == name}

    worst, count = 0.0, 0
    idle: dict[str, int] = {}  # table -> rows drawn from it whose rescore returned {}
    order = list(packages)
    for (who, key), rows in sorted(sample.items(), key=lambda item: order.index(item[0][0])):  # version by version
        name, _, table = key.partition("__")
        benchmark, options = benchmarks[name]
        language = getattr(benchmark, "language", None)
        if who not in served:
            served.clear()  # the previous version's model and its scorers go before the next one loads
            scorers.clear()
            served[who] = _load(packages[who]) if base is None else _load(packages[who], base)
        if (who, language) not in scorers:
            scorers[(who, language)] = _scorer(served[who], language)
        picked = tables[(who, key)].iloc[rows]
        try:
            fresh = _call(benchmark, scorers[(who, language)], table, picked, options, siblings(who, name))
        except (KeyError, ValueError) as exc:  # a stored row without the text its scores came from, or bad text
            return RuleResult("evidence", "rescored_sample", ASKS, False,
                              f"{who!r} table {key}: its rows cannot be scored again ({type(exc).__name__}: {exc}); "
                              "the evidence lacks what the model scored")
        for column, values in fresh.items():
            if column not in picked.columns:
                return RuleResult("evidence", "rescored_sample", ASKS, False,
                                  f"{who!r} table {key}: no column {column} (a score the benchmark writes)")
            stored, values = picked[column].to_numpy(), np.asarray(values)
            delta = _delta(column, stored, values)
            bad = np.flatnonzero(delta > tolerance)
            if bad.size:
                j = int(bad[0])
                how = ("a boolean, compared exactly" if values.dtype == bool else
                       f"|Δ{' log p' if column.startswith(PROBABILITY) else ''}| {delta[j]:.3g} > {tolerance:g}")
                return RuleResult("evidence", "rescored_sample", ASKS, False,
                                  f"{who!r} table {key} row {rows[j]} column {column}: stored {_plain(stored[j])!r}, "
                                  f"recomputed from the verified files {_plain(values[j])!r} ({how}); the evidence "
                                  "was not computed by this model")
            worst = max(worst, float(delta.max(initial=0.0)))
        if fresh:
            count += len(rows)
        else:  # rescore returned {}: no column of the model's to compare (of biaslab's, GBEM-UA's qa and qa_pairs
            idle[key] = idle.get(key, 0) + len(rows)  # under the embedding parser: an encoder judged the answers)
    skipped = (f"; {sum(idle.values())} more drawn from tables whose rescore compares no column "
               f"({', '.join(sorted(idle))})" if idle else "")
    return RuleResult("evidence", "rescored_sample", ASKS, True,
                      f"{count} rows recomputed ({', '.join(sorted({k for _, k in sample} - set(idle)))}; seed "
                      f"{params.registry.bootstrap.seed}), max |Δ| {worst:.3g} <= {tolerance:g} nats{skipped}{note}",
                      estimate=worst)
