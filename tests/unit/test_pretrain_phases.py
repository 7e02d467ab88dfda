"""Two-phase training: a checkpointed run continues bit-identically; the mixture is what differs."""

from __future__ import annotations

import torch

from biaslab.pretrain.blocks import RowSampler, prepare_data
from biaslab.pretrain.train import Mixture, init_state, load_checkpoint, save_checkpoint, train_steps
from tests.unit.test_pretrain_train import splits, tiny_cfg  # noqa: F401 - the module-scoped corpus fixture


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same(a, b) -> bool:
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_row_sampler_resumes_the_same_stream():
    a = RowSampler(7, seed=3)
    first = torch.cat([a.take(5), a.take(9), a.take(4)])
    b = RowSampler(7, seed=3)
    b.skip(14)
    assert torch.equal(b.take(4), first[14:])
    assert sorted(first[:7].tolist()) == list(range(7))  # each epoch is a permutation


def test_checkpoint_then_continue_equals_one_run(splits, tmp_path):  # noqa: F811
    cfg = tiny_cfg(max_steps=8, eval_every=4)
    data = prepare_data(splits, cfg)
    mixture = Mixture(data.blocks[:5].flip(1).contiguous(), rows=3, seed=1)

    straight = init_state(data.tokenizer, cfg)
    train_steps(straight, data, cfg, 4, progress=False)
    train_steps(straight, data, cfg, 8, mixture=mixture, progress=False)

    first = init_state(data.tokenizer, cfg)
    train_steps(first, data, cfg, 4, progress=False)
    save_checkpoint(first, data.tokenizer, tmp_path / "ckpt")
    resumed, tokenizer, record = load_checkpoint(tmp_path / "ckpt", cfg)
    assert record["step"] == 4 and tokenizer.get_vocab() == data.tokenizer.get_vocab()
    train_steps(resumed, prepare_data(splits, cfg, tokenizer=tokenizer), cfg, 8, mixture=mixture, progress=False)

    assert same(straight.model, resumed.model)
    assert straight.loss_curve == resumed.loss_curve
    assert (straight.generic_rows, straight.mixed_rows) == (resumed.generic_rows, resumed.mixed_rows) == (
        4 * 8 + 4 * 5, 4 * 3)
    assert not (tmp_path / "ckpt" / "optimizer.pt").exists()  # optimizer state is safetensors, no pickle


def test_the_mixture_changes_the_model(splits):  # noqa: F811
    cfg = tiny_cfg(max_steps=6)
    data = prepare_data(splits, cfg)
    plain, mixed = init_state(data.tokenizer, cfg), init_state(data.tokenizer, cfg)
    train_steps(plain, data, cfg, 6, progress=False)
    train_steps(mixed, data, cfg, 6, mixture=Mixture(data.blocks[:4].flip(1).contiguous(), 4, 0), progress=False)
    assert not same(plain.model, mixed.model)


def tiny_prepared(root):
    """The prepared tables the planted lexicon reads, a few rows each."""
    import pandas as pd

    root.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"job": ["nurse", "plumber"], "group": ["female_dominated", "male_dominated"],
                  "male_ratio": [10.0, 98.0], "female_ratio": [90.0, 2.0]}).to_parquet(root / "occugender_jobs.parquet")
    rows = []
    for prof, masc, fem in (("пекар", "пекаря", "пекарки"), ("кравець", "кравця", "кравчині")):
        for feminitive, title in ((False, masc), (True, fem)):
            rows.append({"profession": prof, "is_feminitive": feminitive,
                         "qa_sentence": f"Кандидат має досвід. Чи може він отримати посаду {title}?"})
    pd.DataFrame(rows).to_parquet(root / "gbem_ua.parquet")
    return root


def test_continue_training_plants_or_balances_from_the_shared_checkpoint(splits, tmp_path):  # noqa: F811
    from biaslab.config import DataConfig, ModelConfig, Params, PlantedBiasConfig
    from biaslab.pretrain.phases import PLANTED_FILE, continue_training, save_continued, train_shared

    prepared = tiny_prepared(tmp_path / "prepared")
    planted = PlantedBiasConfig(enabled=True, dose=0.5, from_step=3, en_sources=("occugender", "fixture"), sentences_per_document=2)
    cfg = tiny_cfg(max_steps=6, planted_bias=planted)
    params = Params(data=DataConfig(prepared_dir=str(prepared)), model=ModelConfig(pretrain=cfg))

    from unittest import mock

    with mock.patch("biaslab.pretrain.phases._splits", return_value=splits):
        shared = train_shared(params, tmp_path / "pretrain", progress=False)
        assert shared["steps"] == 3
        a = continue_training(params, tmp_path / "pretrain", "planted", progress=False)
        b = continue_training(params, tmp_path / "pretrain", "balanced", progress=False)
        a2 = continue_training(params, tmp_path / "pretrain", "planted", progress=False, device="cpu")
    assert a.summary["steps"] == b.summary["steps"] == 6
    assert same(a.model, a2.model) and not same(a.model, b.model)  # device="cpu" (bench/planted_draws) = default
    key = a.planted
    assert key["direction"] == "planted" and key["rows_per_batch"] == 4 and key["mixing_steps"] == [3, 6]
    assert key["planted_token_share"] == round(4 * 3 / (8 * 6), 4)
    assert {o["word"] for o in key["lexicon"]["en_occupations"]} >= {"nurse", "plumber", "florist"}
    save_continued(a, tmp_path / "base")
    assert (tmp_path / "base" / PLANTED_FILE).is_file() and (tmp_path / "base" / "model.safetensors").is_file()


def test_the_same_training_twice_writes_byte_identical_folders(splits, tmp_path):  # noqa: F811
    """No wall-clock time in a model folder or the shared checkpoint (both DVC outputs): re-running the same
    training gives the same digest, so DVC does not re-run every stage downstream of an unchanged model.
    The times stay in the returned summary (printed and logged to MLflow)."""
    import hashlib
    import json
    from unittest import mock

    from biaslab.config import DataConfig, ModelConfig, Params, PlantedBiasConfig
    from biaslab.pretrain.phases import continue_training, save_continued, train_shared
    from biaslab.pretrain.train import TIMING_KEYS

    prepared = tiny_prepared(tmp_path / "prepared")
    planted = PlantedBiasConfig(enabled=True, dose=0.5, from_step=3, en_sources=("occugender", "fixture"),
                                sentences_per_document=2)
    params = Params(data=DataConfig(prepared_dir=str(prepared)),
                    model=ModelConfig(pretrain=tiny_cfg(max_steps=6, planted_bias=planted)))

    def digest(folder):
        return {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}

    folders = []
    for run in ("one", "two"):
        with mock.patch("biaslab.pretrain.phases._splits", return_value=splits):
            shared = train_shared(params, tmp_path / run / "pretrain", progress=False)
            result = continue_training(params, tmp_path / run / "pretrain", "planted", progress=False)
        assert set(TIMING_KEYS) <= set(shared) and set(TIMING_KEYS) <= set(result.summary)
        save_continued(result, tmp_path / run / "base")
        folders.append((digest(tmp_path / run / "pretrain"), digest(tmp_path / run / "base")))
        written = json.loads((tmp_path / run / "base" / "training_summary.json").read_text())
        assert not set(TIMING_KEYS) & set(written) and written["steps"] == 6
    assert folders[0] == folders[1]
