"""A masked LM runs the whole pipeline: a real ``dvc repro`` with ``model.source`` = a tiny XLM-R.

The workspace is a copy of the project's pipeline (``dvc.yaml``, ``params.yaml``, ``src/``) in a fresh git +
DVC repository (``tests/integration/workspace.py``), reading the real data mirror with the smoke-run sample
(``data.sample``: a few items per reported group, so masked pseudo-log-likelihoods take seconds); RuBia and
ClozeGender (masked-LM benchmarks tested elsewhere) are disabled, CrowS-Pairs stands for them. The model is XLM-R-shaped
(``XLMRobertaForMaskedLM``: a SentencePiece-style unigram tokenizer with ``<s> … </s>`` and ``<mask>``, 2
layers of width 32), built and saved here. Every stage must complete: ``tune`` and ``finetune`` skip LoRA
with their reason (:data:`biaslab.mitigation.applicability.LORA_ON_MASKED_LM`), the LoRA variant
directories say so, ``evaluate@lora*`` carry the reason instead of numbers, ``control_model``/``calibrate``
say why there is nothing to calibrate, the other variants are evaluated and registered, and the report
says why the LoRA variant has no numbers. A second ``dvc repro`` reruns only ``preflight`` and ``raw_data`` (always run).
Variants whose stages repeat another's code path (``hard_k16``; every LoRA variant after ``lora``) are left out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from biaslab.mitigation.applicability import LORA_ON_MASKED_LM
from workspace import copy_pipeline, drop_variants, init_repo, pipeline_env, run_in

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
VARIANTS = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))["variants"]
# Variants that only repeat another one's stages and code path on this model are left out of the workspace
# (drop_variants): every stage is a subprocess of ~9 s here, and make test must stay under 15 minutes.
# hard_k16 is hard with other embedding_debias values; every LoRA variant but the first (lora_cda, lora_clp, ...:
# other lora settings) is skipped for a masked LM by the same check as lora, with the same reason.
ALL_LORA = tuple(name for name, v in VARIANTS.items() if v["method"] == "lora")
LORA_VARIANTS = ALL_LORA[:1]  # lora
SAME_PATH = ("hard_k16", *ALL_LORA[1:])
# A balanced fine-tune control has no planted bias to remove in a snapshotted model: skipped with the reason.
POSITIVE_CONTROLS = tuple(name for name, v in VARIANTS.items() if (v.get("control") or {}).get("recipe") == "balanced_finetune")
OTHER_VARIANTS = tuple(name for name in VARIANTS if name not in ALL_LORA + SAME_PATH + POSITIVE_CONTROLS)
# base, prompt, soft, hard, negative_control


def build_tiny_xlmr(out: Path, texts: list[str]) -> None:
    """An XLM-R-shaped masked LM: unigram tokenizer (Metaspace, ``<s>``/``</s>``/``<mask>``) + 2-layer encoder."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM, XLMRobertaTokenizerFast

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=1200, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                      unk_token="<unk>", show_progress=False)
    tok.train_from_iterator(texts, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))],
    )
    tokenizer = XLMRobertaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                        cls_token="<s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")
    torch.manual_seed(0)
    config = XLMRobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                              intermediate_size=64, max_position_embeddings=514, pad_token_id=tokenizer.pad_token_id,
                              bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    XLMRobertaForMaskedLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)


def tokenizer_texts(mirror: Path) -> list[str]:
    """English, Ukrainian and Russian text for the tokenizer: CrowS-Pairs sentences and the GBEM-UA/RuBia items."""
    import pandas as pd

    crows = pd.read_csv(mirror / "crows_pairs" / "crows_pairs_anonymized.csv")
    texts = list(crows["sent_more"][:300]) + list(crows["sent_less"][:300])
    gbem = pd.read_csv(mirror / "gbem_ua" / "acc_dataset" / "train_dataset_acc.csv")
    texts += list(gbem["sentence"][:300])
    texts += ["Врач сказал, что он придёт. Медсестра сказала, что она придёт. Мужчина, женщина."] * 20
    return texts


def ran(log: str) -> list[str]:
    """The stages a ``dvc repro`` log says it ran."""
    return sorted(line.split("'")[1] for line in log.splitlines() if line.startswith("Running stage '"))


def test_masked_lm_runs_every_stage(tmp_path, mirror):
    work = tmp_path / "work"
    work.mkdir()
    build_tiny_xlmr(tmp_path / "xlmr", tokenizer_texts(mirror))

    copy_pipeline(work, ROOT)
    params = yaml.safe_load((work / "params.yaml").read_text(encoding="utf-8"))
    params["data"]["mirror_dir"] = str(mirror)
    params["data"]["sample"] = {"per_group": 2, "seed": 0}
    params["data"]["lm_heldout"]["languages"] = []  # lm_quality needs a causal LM: no corpus to read
    params["model"]["source"] = str(tmp_path / "xlmr")
    params["evaluation"]["bootstrap_samples"] = 20
    for name in ("rubia", "cloze_gender"):  # masked-LM benchmarks tested elsewhere; CrowS-Pairs stands for them
        params["evaluation"]["benchmarks"][name]["enabled"] = False
    (work / "params.yaml").write_text(yaml.safe_dump(params, allow_unicode=True, sort_keys=False), encoding="utf-8")
    drop_variants(work, SAME_PATH)
    env = pipeline_env(work)
    init_repo(work, env)
    log = run_in(work, env, "dvc", "repro")

    assert "LoRA skipped" in log  # the stages say why, in the log
    assert f"Skipped: lora: {LORA_ON_MASKED_LM[:40]}" in log  # and the closing summary
    best = json.loads((work / "models" / "tune" / "best_params.json").read_text(encoding="utf-8"))
    assert best["skipped"] == LORA_ON_MASKED_LM and best["params"] == {}
    for name in LORA_VARIANTS:
        lora = json.loads((work / "models" / name / "variant.json").read_text(encoding="utf-8"))
        assert lora["skipped"] == LORA_ON_MASKED_LM and not (work / "models" / name / "adapter_config.json").exists()
        lora_metrics = json.loads((work / "metrics" / f"{name}.json").read_text(encoding="utf-8"))
        assert lora_metrics["skipped"] == LORA_ON_MASKED_LM and lora_metrics["metrics"] == {}
    for variant in OTHER_VARIANTS:
        values = json.loads((work / "metrics" / "values" / f"{variant}.json").read_text(encoding="utf-8"))
        assert "crows_pairs/pct_stereotype" in values, variant  # measured with the masked-LM metric
        assert not any(k.startswith(("gbem_ua/", "occugender/")) for k in values), variant  # skipped for a masked LM
    for name in POSITIVE_CONTROLS:
        control = json.loads((work / "metrics" / f"{name}.json").read_text(encoding="utf-8"))
        assert "no planted bias" in control["skipped"] and control["metrics"] == {}, name
    calibration = (work / "reports" / "calibration.md").read_text(encoding="utf-8")
    assert "no planted bias" in calibration

    register = json.loads((work / "runs" / "register.json").read_text(encoding="utf-8"))
    assert set(register["versions"]) == set(OTHER_VARIANTS)
    assert {name: reason for name, reason in register["skipped"].items() if name not in POSITIVE_CONTROLS} == {
        name: LORA_ON_MASKED_LM for name in LORA_VARIANTS}
    assert all("no planted bias" in register["skipped"][name] for name in POSITIVE_CONTROLS)
    report = (work / "reports" / "report.md").read_text(encoding="utf-8")
    assert all(f"**{name}** has no numbers: {LORA_ON_MASKED_LM}" in report for name in LORA_VARIANTS)

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{work / 'mlruns' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("biaslab")
    runs = client.search_runs([experiment.experiment_id])
    skipped = {(r.data.tags["stage"], r.data.tags.get("variant")) for r in runs
               if r.data.tags.get("skipped") == LORA_ON_MASKED_LM and r.info.status == "FINISHED"}
    assert skipped == {("tune", None), *(("finetune", n) for n in LORA_VARIANTS),
                       *(("evaluate", n) for n in LORA_VARIANTS)}
    (register_run,) = [r for r in runs if r.data.tags["stage"] == "register" and "variant" not in r.data.tags]
    assert all(register_run.data.tags[f"skipped.{n}"] == LORA_ON_MASKED_LM for n in LORA_VARIANTS)
    assert ran(run_in(work, env, "dvc", "repro")) == ["preflight", "raw_data"]  # nothing else: the always-run checks
