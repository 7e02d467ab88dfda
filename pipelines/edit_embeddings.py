"""Stage ``edit_embeddings@<variant>``: Bolukbasi soft/hard embedding debiasing of ``models/base``.

    python pipelines/edit_embeddings.py --variant soft

Writes ``models/<variant>/`` (edited checkpoint, or variant.json + embedding_hook.safetensors, with
edit_report.json) and ``runs/edit_embeddings_<variant>.json``; logs one MLflow run.
"""

import argparse

from biaslab import tracking
from biaslab.config import ConfigError, load_params
from biaslab.mitigation.embedding.fit import fit_embedding_variant, report_metrics
from biaslab.models import fingerprint_dir, load_model

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--variant", required=True)
parser.add_argument("--params", default="params.yaml")
args = parser.parse_args()
params = load_params(args.params)
variant, cfg = params.variant(args.variant), params.embedding_debias
if variant.method != "embedding" or variant.embedding_mode is None:
    raise ConfigError(f"variants.{args.variant}: needs method: embedding and embedding_mode: soft|hard")
base = load_model(params.model.output_dir, kind=params.model.kind, allow_pickle=params.model.allow_pickle,
                  trust_remote_code=params.model.trust_remote_code)
tracking.configure(params.tracking)
with tracking.stage_run("edit_embeddings", variant=args.variant, tags={"base_fingerprint": base.fingerprint}) as run:
    tracking.log_params({"embedding_debias": cfg.model_dump(), "variant": variant.model_dump()})
    report = fit_embedding_variant(model=base.model, tokenizer=base.tokenizer, cfg=cfg, mode=variant.embedding_mode,
                                   apply=variant.embedding_apply, prepared_dir=params.data.prepared_dir,
                                   out_dir=variant.model_dir, base_dir=params.model.output_dir)
    for name, value in report_metrics(report).items():
        tracking.log_metric(name, value)
    tracking.log_dict(report, "edit_report.json")
    fingerprint = fingerprint_dir(variant.model_dir)
    tracking.set_tags({"model_fingerprint": fingerprint})
    run_id = run.info.run_id
tracking.write_run_json(f"runs/edit_embeddings_{args.variant}.json", run_id=run_id, variant=args.variant,
                        model_dir=variant.model_dir, model_fingerprint=fingerprint, stage="edit_embeddings")
