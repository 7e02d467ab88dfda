"""Where the gate's evidence comes from, as gate rows: on a team server only the evaluator's bound evaluate runs.

:func:`evidence_rows` turns :meth:`biaslab.registry.evidence.RunEvidence.binding_problems` (a finished evaluate run
of ``registry.evaluations_experiment``, its artifacts hashing to its params) for the variant and the base, and a
difference in the test items they scored, into failing rows of the promotion gate. On a local single-user store
one passing row says what was not checked (the verdict table shows it).
"""

from __future__ import annotations

from typing import Any

from biaslab.registry.evidence import RunEvidence
from biaslab.registry.gate import RuleResult


def evidence_rows(client: Any, params: Any, evidence: RunEvidence, variant: str, base: str, *,
                  team_server: bool) -> list[Any]:
    """The gate rows on where the evidence comes from: on a team server, failures of
    :meth:`RunEvidence.binding_problems` for the variant and the base and a difference in the items they scored;
    on a local, single-user store one passing row saying what was not checked."""
    asks = "evidence from finished evaluate runs of the evaluations experiment, bound by their params"
    if not team_server:
        return [RuleResult("evidence", "evaluator_runs (skipped)", asks, True,
                           "not checked on a local single-user store: who wrote the evaluate runs, their experiment, "
                           "status and bound hashes (a team server checks them)")]
    name = params.registry.evaluations_experiment
    experiment = client.get_experiment_by_name(name)
    experiment_id = experiment.experiment_id if experiment is not None else None
    rows = [RuleResult("evidence", "evaluator_runs", asks, False, problem)
            for who in (variant, base) for problem in evidence.binding_problems(who, experiment_id, name)]
    if evidence.items(variant) != evidence.items(base):
        rows.append(RuleResult("evidence", "same_items", "variant and base scored the same test items", False,
                               f"{variant!r} scored items {evidence.items(variant)}, {base!r} scored "
                               f"{evidence.items(base)}"))
    return rows
