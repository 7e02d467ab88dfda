"""Promotion: gate a registered version against the base on the server's evidence; on a pass, copy its
files into the champion model (:mod:`biaslab.registry.champion`); record the decision either way.

What the gate trusts, and why (a worker can edit tags, artifacts of its runs and its workspace files; it
cannot change a logged param, nor write where only promoters write):

* **which version**: the number in ``runs/register.json`` or given explicitly (``--version``), never "the
  newest version tagged ``variant=…``";
* **what the version is**: the params of the run that registered it (``variant``, ``content_hash``,
  ``manifest_sha256``, ``model_fingerprint``, ``evaluate_run_id``), which MLflow never lets anyone change;
  the version's files must be under that run's artifacts and match the manifest whose hash it logged
  (every file's sha256 recomputed);
* **its evidence**: :class:`~biaslab.registry.evidence.RunEvidence` of the evaluate runs those params name
  (for the variant, and for the base the run of the same evaluation the variant's registration names, else the
  base version's own), checked to be of the same model fingerprint; on a team server only
  finished evaluate runs of the evaluations experiment whose artifacts hash to their params
  (:mod:`biaslab.registry.evidence_check`);
* **what is served**: never the registrant's word - the kind, serving settings and base pin come from the
  promoter's ``params.yaml``, the evaluated bytes are checked for every kind, and the champion's files and
  ``MLmodel`` are the promoter's (:mod:`biaslab.registry.package_check`).

The decision is a run of the promotions experiment (:mod:`biaslab.registry.promotions`); an approval
copies the verified files there and registers them as a version of ``registry.champion_model`` with alias
``champion``. ``promotion.*`` tags on the candidate version are for the registry page only.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from biaslab.config import ConfigError, Params
from biaslab.outputs import run_file
from biaslab.registry.errors import RegistryError
from biaslab.registry.gate import RuleResult, evaluate_gate_for
from biaslab.registry.register import REGISTER_JSON, _client


CHAMPION = "champion"
REGISTRATION_PARAMS = ("variant", "method", "kind", "content_hash", "manifest_sha256", "model_fingerprint", "evaluate_run_id",
                       "evidence_base_variant", "evidence_base_run_id")


@dataclass
class PromotionDecision:
    variant: str
    model_name: str
    version: str
    approved: bool
    results: list[RuleResult]
    timestamp: str
    record_run_id: str | None = None  # the run of the promotions experiment holding this decision
    champion_version: str | None = None  # the version of registry.champion_model holding the copy
    gate_inputs: dict[str, dict[str, str]] = field(default_factory=dict)  # variant -> evidence.source(variant)
    tag_problem: str | None = None  # why the candidate's promotion.* tags could not be written

    @property
    def reasons(self) -> list[str]:
        return [f"{'PASS' if r.passed else 'FAIL'} {r.metric} {r.rule}: {r.reason}" for r in self.results]


def find_variant_version(client: Any, model_name: str, variant: str, register_json: Path | None = None) -> Any:
    """The registered version of ``variant``: from ``runs/register.json`` if present, else the newest tagged one.

    For ``biaslab serve <variant>`` (a candidate, to try it); promotion uses :func:`registered_version`."""
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


def registered_version(client: Any, model_name: str, variant: str, register_json: Path,
                       version: str | None = None) -> tuple[Any, dict[str, str]]:
    """``(model version, its registration params)`` of ``variant``: the version ``runs/register.json`` (or
    ``version``) names, checked against the params of the run that registered it."""
    from mlflow.exceptions import MlflowException

    if version is None:
        reason = run_file.registered_skips(register_json).get(variant)
        if reason is not None:
            raise RegistryError(f"variant {variant!r} was not registered ({register_json}): {reason}")
        version = run_file.registered_versions(register_json).get(variant)
    if version is None:
        raise RegistryError(f"no version of variant {variant!r} named: {register_json} does not list it; pull the "
                            "register stage's outputs (`dvc pull`) or name the version (`--version N`/`--base-version N`)")
    try:
        mv = client.get_model_version(model_name, str(version))
    except MlflowException as exc:
        from biaslab.tracking import access

        if access.is_refusal(exc):
            raise
        raise RegistryError(f"registered model {model_name!r} has no version {version} (variant {variant!r})") from None
    where = f"{model_name} version {mv.version}"
    run = client.get_run(mv.run_id) if mv.run_id else None
    params = {k: (run.data.params.get(k) if run else None) for k in REGISTRATION_PARAMS}
    if run is None or not params["manifest_sha256"] or not params["content_hash"]:
        raise RegistryError(f"{where} was not created by the register stage (its run {mv.run_id or '(none)'} has no "
                            "registration params); refusing to promote it - register with `dvc repro register`")
    if params["variant"] != variant:
        raise RegistryError(f"{where} was registered for variant {params['variant']!r}, not {variant!r} (its run's "
                            f"param; the tag says {mv.tags.get('variant')!r}); refusing to promote it")
    prefix = run.info.artifact_uri.rstrip("/") + "/"
    if any(part in ("..", ".") for part in (mv.source or "")[len(prefix):].split("/")):
        raise RegistryError(f"{where}: its files ({mv.source}) name a path with '..' or '.'; refusing to promote it")
    if not (mv.source or "").startswith(prefix):
        raise RegistryError(f"{where}: its files ({mv.source}) are not under the artifacts of the run that registered "
                            f"it ({run.info.artifact_uri}); refusing to promote it")
    return mv, {k: v or "" for k, v in params.items()}


def team_server() -> bool:
    """Whether MLflow talks to a tracking server (``http(s)://``): several principals, permissions per experiment."""
    import mlflow

    return mlflow.get_tracking_uri().startswith(("http://", "https://"))


def _gate(params: Params, evidence: Any, variant: str, base: str = "base") -> list[RuleResult]:
    """The project's gate (:func:`biaslab.registry.gate.evaluate_gate_for`: paired rules) on ``evidence``."""
    return list(evaluate_gate_for(params, evidence, variant, base).rows)


def _failed(metric: str, rule: str, reason: str) -> RuleResult:
    return RuleResult(metric, rule, "the evaluated and registered bytes", False, reason)


def download_version(client: Any, mv: Any, run: Any, dst: str | os.PathLike[str]) -> Path:
    """The version's files (under its run's artifacts) downloaded into ``dst``."""
    artifact_path = mv.source[len(run.info.artifact_uri.rstrip("/")) + 1:]
    return Path(client.download_artifacts(mv.run_id, artifact_path, str(dst)))


def promote(
    params: Params,
    variant: str,
    root: str | os.PathLike[str] = ".",
    *,
    base_variant: str = "base",
    register_json: str | os.PathLike[str] = REGISTER_JSON,
    version: str | None = None,
    base_version: str | None = None,
    rescore: bool = True,
) -> PromotionDecision:
    """Gate ``variant`` against ``base_variant``; copy it to the champion model if it passes; record either way.

    ``rescore=False`` skips re-scoring a sample of the evidence's rows from the verified files
    (:mod:`biaslab.registry.rescore`; slow for a large model on a CPU); the verdict table says it was skipped."""
    from biaslab.tracking import access

    params.variant(variant)  # unknown variant -> ConfigError listing the known ones
    if base_variant not in params.variants:
        known = ", ".join(params.variants)
        raise ConfigError(f"base variant {base_variant!r} is not in params.yaml variants ({known})")
    register_json = Path(root) / register_json
    model_name = params.registry.model_name
    client = _client()
    with access.naming(registered_model=model_name), access.refusals():
        mv, reg = registered_version(client, model_name, variant, register_json, version)
        base_mv, base_reg = registered_version(client, model_name, base_variant, register_json, base_version)
    with tempfile.TemporaryDirectory(prefix=f"promote-{variant}-") as tmp:
        decision = _decide(client, params, variant, base_variant, (mv, reg), (base_mv, base_reg), Path(tmp),
                           rescore=rescore)
    try:
        with access.naming(registered_model=model_name), access.refusals():
            record_decision(client, decision)
    except access.AccessDenied as exc:  # cosmetic tags; the record is the decision. A promoter without EDIT on
        # the candidates it was granted: someone else recreated the model (renamed the granted one away)
        decision.tag_problem = f"the decision's promotion.* tags were not written: {exc}"
    return decision


def _downloaded(client: Any, mv: Any, reg: dict[str, str], dst: Path, what: str) -> tuple[Path, list[RuleResult]]:
    """The version's files in ``dst``, checked against the manifest its registering run logged."""
    from biaslab.serving.manifest import PackageIntegrityError, verify_package

    dst.mkdir()
    package = download_version(client, mv, client.get_run(mv.run_id), dst)
    try:
        verify_package(package, reg["manifest_sha256"])
    except PackageIntegrityError as exc:
        return package, [_failed(what, "registered_bytes", str(exc))]
    return package, []


def _base_evidence_run(reg: dict[str, str], base_variant: str, base_reg: dict[str, str]) -> str:
    """The base's evaluate run to gate ``reg``'s variant against: the one the variant's registration names for
    this base (the base's run of the same evaluation, :func:`biaslab.registry.register._gate_base_evidence`),
    else the base version's own. A reused base version keeps the evaluate run of its first registration; a
    variant registered after the evaluation changed names the base's current one. Either way the base's bytes
    must be what the run measured (``base/evaluated_bytes``), and on a team server the run must be the
    evaluator's (``evidence/evaluator_runs``): naming another run cannot bring in evidence of other weights."""
    if reg.get("evidence_base_variant") == base_variant and reg.get("evidence_base_run_id"):
        return reg["evidence_base_run_id"]
    return base_reg["evaluate_run_id"]


def _decide(client: Any, params: Params, variant: str, base_variant: str, version: tuple[Any, dict[str, str]],
            base_version: tuple[Any, dict[str, str]], tmp: Path, *, rescore: bool = True) -> PromotionDecision:
    """The gate on the server's evidence and the downloaded files; the record; the copy if approved."""
    from biaslab.registry import champion, promotions
    from biaslab.registry.evidence import RunEvidence
    from biaslab.registry.derived import derived_row
    from biaslab.registry.evidence_check import evidence_rows
    from biaslab.registry.package_check import Expected, approved_pin, build_champion, check_package

    (mv, reg), (base_mv, base_reg) = version, base_version
    evidence = RunEvidence(client, {variant: reg["evaluate_run_id"],
                                    base_variant: _base_evidence_run(reg, base_variant, base_reg)}, workdir=tmp)
    results = _gate(params, evidence, variant, base_variant)
    results += evidence_rows(client, params, evidence, variant, base_variant, team_server=team_server())
    results.append(derived_row(params, evidence, dict.fromkeys((variant, base_variant))))
    evaluated_fp = evidence.metrics(variant).model_fingerprint
    if evaluated_fp != reg["model_fingerprint"]:
        results.append(_failed("model_fingerprint", "evidence_matches_version",
                               f"evaluate run {reg['evaluate_run_id']} measured model {evaluated_fp}, version "
                               f"{mv.version} holds {reg['model_fingerprint']}; re-run `dvc repro`"))
    expected = Expected.of(params, variant)
    if Expected.of(params, base_variant).kind != "full":
        raise RegistryError(f"base variant {base_variant!r} is not a full model in params.yaml; the gate compares "
                            "against a full model")
    package, problems = _downloaded(client, mv, reg, tmp / "version", "files")
    base, base_problems = _downloaded(client, base_mv, base_reg, tmp / "base", "base")
    results += problems + base_problems
    check = None
    if not problems and not base_problems:  # the bytes are the registered ones: check what they are
        pin = approved_pin(params.registry.model_name, base_variant, base_mv, base_reg)
        check = check_package(params, expected, reg, package, evaluated_fp, base=base, pin=pin,
                              base_evaluated_fp=evidence.metrics(base_variant).model_fingerprint)
        results += check.rows
    results.append(_rescored(params, evidence, {variant: package, base_variant: base}, rescore,
                             ready=check is not None and all(r.passed for r in check.rows),
                             base=_handed_base(check, base)))
    approved = all(r.passed for r in results)
    decision = PromotionDecision(variant, params.registry.model_name, str(mv.version), approved, results,
                                 datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                 gate_inputs={variant: evidence.source(variant),
                                              base_variant: evidence.source(base_variant)})
    # the gate's record first (a run of the promotions experiment, where only promoters write), then the copy
    # into it and the champion model's version and alias; the candidate's cosmetic tags after
    decision.record_run_id = promotions.write_record(client, params, decision, mv)
    if approved and check is not None:
        copy, known = build_champion(params, check, package, tmp / "champion", base=base)
        decision.champion_version = champion.copy_to_champion(client, params, decision, copy, reg, known)
    return decision


def _handed_base(check: Any, base: Path) -> Any:
    """The base package this promoter downloaded into its own temporary folder and verified against the base
    version's logged manifest (:func:`_downloaded`), as the :class:`biaslab.serving.base.VerifiedBase` of the
    approved pin, for the re-scoring check's load of an overlay or prompt version: its pin must be exactly this
    version (``check_package`` refuses any other, and the loader refuses it again), so the loader need not
    download and hash the base a second time. ``None`` (the loader resolves the pin itself) for a full version."""
    from biaslab.serving.base import VerifiedBase

    if check is None or check.pin is None:
        return None
    pin = check.pin
    return VerifiedBase(pin["registered_model"], str(pin["version"]), pin["manifest_sha256"], Path(base))


def _rescored(params: Params, evidence: Any, packages: dict[str, Path], rescore: bool, *, ready: bool,
              base: Any = None) -> RuleResult:
    """The ``evidence rescored_sample`` row: a sample of the evidence's rows scored again from the verified files
    (:func:`biaslab.registry.rescore.rescore_row`), only once the files are proven to be the evaluated ones;
    ``base``: the verified base package an overlay or prompt version is loaded on (:func:`_handed_base`)."""
    from biaslab.registry.rescore import ASKS, rescore_row

    if not rescore:
        return RuleResult("evidence", "rescored_sample (skipped)", ASKS, True,
                          "skipped by `--no-rescore`: the prediction tables were not checked against the model")
    if not ready:  # refused by those checks already; loading files that failed them would prove nothing
        return RuleResult("evidence", "rescored_sample (not run)", ASKS, True,
                          "not re-scored: the version's files failed the checks above, which refuse it")
    return rescore_row(params, evidence, packages, base=base)


def record_decision(client: Any, decision: PromotionDecision) -> None:
    """Write the decision and its evidence as ``promotion.*`` tags on the candidate version (for the registry
    page; anyone with EDIT on the candidates can rewrite them, so nothing reads them as evidence)."""
    evidence = [
        {k: v for k, v in asdict(r).items() if v is not None} for r in decision.results
    ]
    tags = {
        "promotion.decision": "approved" if decision.approved else "refused",
        "promotion.reasons": "; ".join(decision.reasons)[:5000],
        "promotion.timestamp": decision.timestamp,
        "promotion.evidence": json.dumps(evidence, sort_keys=True)[:5000],
    }
    if decision.champion_version:
        tags["promotion.champion_version"] = decision.champion_version
    for key, value in tags.items():
        client.set_model_version_tag(decision.model_name, decision.version, key, value)
