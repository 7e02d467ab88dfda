"""Stage ``edit_embeddings@<variant>``: Bolukbasi soft/hard embedding debiasing of ``models/base``.

The edit's settings are ``embedding_debias`` with the variant's ``embedding_overrides`` applied
(``params.embedding_debias_for``), and they are what the MLflow run logs as ``embedding_debias``.

    python -m pipelines.edit_embeddings --variant soft

Writes ``models/<variant>/`` (edited checkpoint, or variant.json + embedding_hook.safetensors, with
edit_report.json) and ``runs/edit_embeddings_<variant>.json``; logs one MLflow run, with the prepared tables
the word lists come from as its dataset inputs.
"""

import sys

from biaslab.tracking import datasets as lineage
from biaslab.tracking import runs as tracking
from biaslab.config import ConfigError, EmbeddingDebiasConfig, Params, load_params
from biaslab.outputs import paths, run_file
from pipelines.stage import profile
from pipelines.stage.entry import VARIANT, stage_main
from pipelines.stage.inputs import base_model_dir

# embedding_debias.profession_sources -> the prepared table its words are read from
PROFESSION_TABLES = {"gbem_ua": "gbem_ua.parquet", "occugender": "occugender_jobs.parquet",
                     "winobias": "winobias.parquet"}


def embedding_word_lists(params: Params, cfg: EmbeddingDebiasConfig) -> list[lineage.DatasetRef]:
    """The prepared tables the edit reads (its MLflow inputs): gender pairs, the profession sources' tables,
    and GBEM-UA (whose sentences measure the edit's token coverage)."""
    tables = ["gender_pairs.parquet", *(PROFESSION_TABLES[s] for s in cfg.profession_sources), "gbem_ua.parquet"]
    return [lineage.prepared_file(params.data.prepared_dir, name, "train") for name in dict.fromkeys(tables)]


def main(argv: list[str] | None = None) -> int:
    return stage_main("edit_embeddings@{variant}", __doc__, lambda args: run(args.variant, args.params), argv,
                      VARIANT)


def run(variant_name: str, params_path: str) -> None:
    from biaslab.mitigation.embedding.fit import fit_embedding_variant, report_metrics
    from biaslab.outputs.variant_dir import fingerprint_dir

    params = load_params(params_path)
    variant, cfg = params.variant(variant_name), params.embedding_debias_for(variant_name)
    if variant.method != "embedding" or variant.embedding_mode is None:
        raise ConfigError(f"variants.{variant_name}: needs method: embedding and embedding_mode: soft|hard")
    disabled = params.disabled_reason(variant_name)
    if disabled is not None:  # the profile leaves it out (docs/profiles.md): a marked directory, no edit
        profile.disable_edit(params, variant_name, disabled)
        return
    base_dir = base_model_dir(params)
    tracking.configure(params.tracking)
    with tracking.stage_run("edit_embeddings", variant=variant_name,
                            tags={"base_fingerprint": fingerprint_dir(base_dir)}) as r:
        tracking.log_params({"embedding_debias": cfg.model_dump(), "variant": variant.model_dump()})
        tracking.log_datasets(embedding_word_lists(params, cfg))
        report = fit_embedding_variant(base_dir=base_dir, cfg=cfg, mode=variant.embedding_mode,
                                       apply=variant.embedding_apply, prepared_dir=params.data.prepared_dir,
                                       out_dir=variant.model_dir, base_ref=params.model.output_dir,
                                       kind=params.model.kind, trust_remote_code=params.model.trust_remote_code)
        for name, value in report_metrics(report).items():
            tracking.log_metric(name, value)
        tracking.log_dict(report, "edit_report.json")
        fingerprint = fingerprint_dir(variant.model_dir)
        tracking.set_tags({"model_fingerprint": fingerprint})
        run_id = r.info.run_id
    run_file.write(paths.run_file("edit_embeddings", variant_name), run_id=run_id, variant=variant_name,
                            model_dir=variant.model_dir, model_fingerprint=fingerprint, stage="edit_embeddings")


if __name__ == "__main__":
    sys.exit(main())
