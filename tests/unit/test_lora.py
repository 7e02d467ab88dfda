"""LoRA mechanics: a fresh adapter is the identity, tuned overrides, checkpoint hygiene."""

from __future__ import annotations

import json

import pytest

from biaslab.config import LoraConfig
from biaslab.mitigation.lora.train import (
    last_complete_checkpoint,
    peft_config,
    prepare_checkpoint_dir,
    tuned_overrides,
    with_overrides,
)
from biaslab.scoring.causal import CausalScorer
from biaslab.scoring.requests import Request

REQUESTS = [
    Request("Відповідай так чи ні: Кандидат має досвід. Чи може він отримати посаду?", " так"),
    Request("Відповідай так чи ні: Кандидатка має досвід. Чи може вона отримати посаду?", " ні"),
    Request("The doctor said that", " she would come."),
]


def test_adapter_at_initialisation_scores_exactly_like_its_base(tiny_tokenizer):
    from peft import get_peft_model

    from biaslab.pretrain.architecture import build_llama

    base = build_llama(vocab_size=len(tiny_tokenizer), hidden_size=32, intermediate_size=64,
                       num_hidden_layers=2, num_attention_heads=4, seed=0)
    want = [s.logprob for s in CausalScorer(base, tiny_tokenizer).loglikelihood(REQUESTS)]
    adapted = get_peft_model(base, peft_config(LoraConfig()))
    adapted.eval()
    lora_b = [p for n, p in adapted.named_parameters() if "lora_B" in n]
    assert lora_b and all(float(p.detach().abs().max()) == 0.0 for p in lora_b)  # PEFT initialises B = 0
    assert sum(p.requires_grad for p in adapted.parameters()) == 2 * 3 * 2  # A,B x q/k/v x 2 layers
    got = [s.logprob for s in CausalScorer(adapted, tiny_tokenizer).loglikelihood(REQUESTS)]
    assert got == want


def test_tuned_overrides_replace_searched_keys_and_are_validated(tmp_path):
    best = tmp_path / "best_params.json"
    best.write_text(json.dumps({"params": {"r": 4, "learning_rate": 1e-3, "target_modules": ["q_proj", "v_proj"],
                                           "max_steps": 10}}))
    cfg = with_overrides(LoraConfig(), tuned_overrides(best))
    assert (cfg.r, cfg.learning_rate, cfg.target_modules) == (4, 1e-3, ("q_proj", "v_proj"))
    assert cfg.max_steps == 10  # the steps the chosen trial trained: the finetune trains the same
    assert cfg.alpha == LoraConfig().alpha
    best.write_text(json.dumps({"params": {"save_steps": 1}}))
    with pytest.raises(ValueError, match="save_steps"):
        tuned_overrides(best)
    with pytest.raises(Exception, match="r"):
        with_overrides(LoraConfig(), {"r": 0})
    with pytest.raises(FileNotFoundError, match="dvc repro tune"):
        tuned_overrides(tmp_path / "missing.json")


def test_checkpoints_of_another_run_are_never_resumed(tmp_path):
    ckpt = tmp_path / "ckpt"
    prepare_checkpoint_dir(ckpt, "key-a")
    (ckpt / "checkpoint-2").mkdir()
    prepare_checkpoint_dir(ckpt, "key-a")
    assert (ckpt / "checkpoint-2").is_dir()  # same run: kept for resuming
    prepare_checkpoint_dir(ckpt, "key-b")
    assert not (ckpt / "checkpoint-2").exists()  # other hyper-parameters/data/base: cleared


def test_half_written_checkpoint_is_skipped_and_removed(tmp_path):
    for step, complete in ((2, True), (4, False)):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        (d / "adapter_model.safetensors").write_bytes(b"x")
        if complete:
            (d / "trainer_state.json").write_text("{}")
    assert last_complete_checkpoint(tmp_path).name == "checkpoint-2"
    assert not (tmp_path / "checkpoint-4").exists()


def test_adapter_config_bytes_do_not_depend_on_set_order(tmp_path):
    """PEFT writes target_modules in Python-set order (varies with PYTHONHASHSEED): the same adapter must
    still have the same bytes, or the registry sees a new model on every run."""
    import json

    from biaslab.mitigation.lora.train import canonicalise_adapter_config

    written = []
    for order in (["v_proj", "q_proj", "k_proj"], ["k_proj", "v_proj", "q_proj"]):
        path = tmp_path / f"{order[0]}.json"
        path.write_text(json.dumps({"r": 8, "target_modules": order, "peft_type": "LORA"}))
        canonicalise_adapter_config(path)
        written.append(path.read_bytes())
    assert written[0] == written[1]
    assert json.loads(written[0])["target_modules"] == ["k_proj", "q_proj", "v_proj"]
