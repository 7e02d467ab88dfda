"""Model registry: every variant is a version of one registered model; aliases; the promotion gate.

Three jobs, in the order a pipeline meets them:

1. **Register** (:func:`register_variants`, stage ``register``). Each variant of ``params.yaml`` is
   packaged into a local directory, logged as artifacts of a run, *verified* (the artifact store's
   file list, sizes and SHA-256 must match the package, and the package must match the source
   directory), and only then becomes a version of ``registry.model_name``. A version is tagged with
   what a reviewer reads: the method, variant, the gate's metrics with their CIs, git commit, data
   hash, model fingerprint, a ``content_hash`` and the evaluate run holding every other metric;
   registering unchanged content again reuses that version (docs/design.md 5). The alias
   ``candidate`` points at the newest version. What each variant becomes:

   * full model (``config.json`` + safetensors: base, embedding-edited checkpoints) - the
     ``transformers`` flavour (``mlflow.transformers.save_model`` of the checkpoint directory, which
     copies its files: the weights keep their bytes and dtype, nothing is loaded; explicit pip list, so
     ``mlflow.transformers.load_model("models:/<name>@champion")`` works), or a byte copy of the
     directory with ``flavor="artifacts"`` (see docs/registry_report.md for timings);
   * overlay (``variant.json`` + LoRA adapter or embedding hook) - the directory as artifacts plus
     ``base_reference.json``; the tag ``base_model`` names the base's registered version;
   * prompt - ``prompt.json`` (the prefixes and the base reference).

   Every package is also an MLflow ``python_function`` model (:mod:`biaslab.serving`): its loader rebuilds
   the variant with biaslab's own loader - an overlay or prompt from its base's *registered* version,
   pinned by version and content hash - so ``mlflow.pyfunc.load_model("models:/<name>@champion")``
   generates and scores for every kind.

2. **Gate** (:func:`evaluate_gate`): paired statistics of (variant − base) on the same test items, from both
   variants' per-item predictions (:mod:`~biaslab.registry.gate`, docs/gate.md).

3. **Promote** (:func:`promote`): the gate reads the evaluate runs named by the version's registering run
   (:class:`~biaslab.registry.evidence.RunEvidence`) and recomputes the version's file hashes; either way
   the decision is a run of the promotions experiment (:mod:`biaslab.registry.promotions`); a pass copies
   the verified files into that run and registers the copy in ``registry.champion_model`` with alias
   ``champion`` (:mod:`biaslab.registry.champion`, docs/champion.md). Aliases only - the stages API is
   deprecated.

``mlflow`` is imported inside functions, so importing this module (e.g. for ``biaslab --help``) is cheap.

One module per job: :mod:`~biaslab.registry.sources` (what a variant is, its content hash),
:mod:`~biaslab.registry.package` (the uploaded directory and its verification),
:mod:`~biaslab.registry.register` (with :mod:`~biaslab.registry.claims`: one version per content under a race),
:mod:`~biaslab.registry.gate` (pure; its paired rules in :mod:`~biaslab.registry.paired_rules`, the point-estimate rules in
:mod:`~biaslab.registry.point_gate`), :mod:`~biaslab.registry.evidence`, :mod:`~biaslab.registry.promote`,
:mod:`~biaslab.registry.champion` (the copy), :mod:`~biaslab.registry.promotions` (the record and its check).
"""

from biaslab.outputs.metrics_file import VariantMetrics
from biaslab.registry.errors import RegistryError
from biaslab.registry.gate import GateVerdict, RuleResult, evaluate_gate, evaluate_gate_for, gate_conditions
from biaslab.registry.package import file_manifest
from biaslab.registry.point_gate import ConditionResult, check_condition, evaluate_gate_on_metrics
from biaslab.registry.promote import CHAMPION, PromotionDecision, find_variant_version, promote
from biaslab.registry.register import (
    CANDIDATE, FLAVORS, REGISTER_JSON, RegisteredVersion, register_variants, skipped_variants, write_register_json,
)
from biaslab.registry.sources import VariantSource, resolve_variant

__all__ = [
    "CANDIDATE", "CHAMPION", "FLAVORS", "REGISTER_JSON", "ConditionResult", "PromotionDecision", "RegisteredVersion",
    "GateVerdict", "RegistryError", "RuleResult", "VariantMetrics", "VariantSource", "check_condition", "evaluate_gate",
    "evaluate_gate_for", "evaluate_gate_on_metrics", "file_manifest", "gate_conditions",
    "find_variant_version", "promote", "register_variants", "resolve_variant", "skipped_variants",
    "write_register_json",
]
