"""Promotion: gate a variant against the base; alias ``champion`` on a pass; the decision and its
evidence as a run of the promotions experiment (:mod:`biaslab.registry.promotions`: the record ``biaslab promote
--verify`` checks the champion against) and as ``promotion.*`` tags on the version, either way (aliases
only: the stages API is deprecated)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from biaslab.config import ConfigError, Params
from biaslab.outputs import metrics_file, run_file
from biaslab.registry.errors import RegistryError
from biaslab.registry.evidence import LocalEvidence
from biaslab.registry.gate import ConditionResult, evaluate_gate_for
from biaslab.registry.register import REGISTER_JSON, _client


CHAMPION = "champion"


@dataclass
class PromotionDecision:
    variant: str
    model_name: str
    version: str
    approved: bool
    results: list[ConditionResult]
    timestamp: str
    record_run_id: str | None = None  # the run of the promotions experiment holding this decision

    @property
    def reasons(self) -> list[str]:
        return [f"{'PASS' if r.passed else 'FAIL'} {r.metric} {r.rule}: {r.reason}" for r in self.results]


def find_variant_version(client: Any, model_name: str, variant: str, register_json: Path | None = None) -> Any:
    """The registered version of ``variant``: from ``runs/register.json`` if present, else the newest tagged one."""
    from mlflow.exceptions import MlflowException

    if register_json is not None:
        reason = run_file.registered_skips(register_json).get(variant)
        if reason is not None:
            raise RegistryError(f"variant {variant!r} was not registered ({register_json}): {reason}")
        version = run_file.registered_versions(register_json).get(variant)
        if version is not None:
            try:
                mv = client.get_model_version(model_name, str(version))
                if mv.tags.get("variant") == variant:
                    return mv
            except MlflowException:
                pass
    try:
        found = client.search_model_versions(f"name = '{model_name}' and tags.variant = '{variant}'")
    except MlflowException:
        found = []
    if not found:
        raise RegistryError(
            f"variant {variant!r} has no version in registered model {model_name!r}; "
            "run the register stage first (`dvc repro register`)"
        )
    return max(found, key=lambda mv: int(mv.version))


def promote(
    params: Params,
    variant: str,
    root: str | os.PathLike[str] = ".",
    *,
    metrics_dir: str = "metrics",
    base_variant: str = "base",
    register_json: str | os.PathLike[str] = REGISTER_JSON,
) -> PromotionDecision:
    """Gate ``variant`` against ``base_variant``; alias ``champion`` if it passes; tag the decision either way."""
    params.variant(variant)  # unknown variant -> ConfigError listing the known ones
    if base_variant not in params.variants:
        known = ", ".join(params.variants)
        raise ConfigError(f"base variant {base_variant!r} is not in params.yaml variants ({known})")
    root = Path(root)
    vm = metrics_file.read(root / metrics_dir / f"{variant}.json", variant)
    bm = metrics_file.read(root / metrics_dir / f"{base_variant}.json", base_variant)
    model_name = params.registry.model_name
    client = _client()
    mv = find_variant_version(client, model_name, variant, root / register_json)

    results: list = evaluate_gate_for(params, LocalEvidence(root), variant, base_variant).rows
    registered_fp = mv.tags.get("model_fingerprint")
    if vm.model_fingerprint and registered_fp and vm.model_fingerprint != registered_fp:
        results.append(ConditionResult(
            "model_fingerprint", "evidence_matches_version", 0.0, None, None, None, None, None, False,
            f"metrics/{variant}.json is for model {vm.model_fingerprint}, version {mv.version} holds "
            f"{registered_fp}; re-run `dvc repro`",
        ))
    if not params.registry.gate:
        results.append(ConditionResult("-", "gate_defined", 0.0, None, None, None, None, None, False,
                                       "registry.gate in params.yaml is empty; refusing to promote without a gate"))
    approved = all(r.passed for r in results)
    decision = PromotionDecision(variant, model_name, str(mv.version), approved, results,
                                 datetime.now(timezone.utc).isoformat(timespec="seconds"))
    # the gate's record first (a run of the promotions experiment, where only promoters write: the
    # evidence `biaslab promote --verify` checks the champion against), then the version's tags, then the alias
    from biaslab.tracking import access
    from biaslab.registry import promotions

    decision.record_run_id = promotions.write_record(client, params, decision, mv)
    with access.naming(registered_model=model_name), access.refusals():
        record_decision(client, decision)
        if approved:
            client.set_registered_model_alias(model_name, CHAMPION, decision.version)
    return decision


def record_decision(client: Any, decision: PromotionDecision) -> None:
    """Write the decision and its evidence as ``promotion.*`` tags on the model version."""
    evidence = [
        {k: v for k, v in asdict(r).items() if v is not None} for r in decision.results
    ]
    tags = {
        "promotion.decision": "approved" if decision.approved else "refused",
        "promotion.reasons": "; ".join(decision.reasons)[:5000],
        "promotion.timestamp": decision.timestamp,
        "promotion.evidence": json.dumps(evidence, sort_keys=True)[:5000],
    }
    for key, value in tags.items():
        client.set_model_version_tag(decision.model_name, decision.version, key, value)
