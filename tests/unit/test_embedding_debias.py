"""Bolukbasi embedding debiasing: subspace, targets, rows and checkpoint edits, tied heads, runtime hook."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from biaslab.config import EmbeddingDebiasConfig
from biaslab.mitigation.embedding.coverage import edit_coverage
from biaslab.mitigation.embedding.edit import remove_projection
from biaslab.mitigation.embedding.fit import fit_embedding_variant
from biaslab.models.embedding_hook import attach_hook
from biaslab.models.token_spans import pack_sequences, span_mask
from biaslab.mitigation.embedding.subspace import gender_subspace
from biaslab.mitigation.embedding.targets import build_targets, gbem_ua_professions
from biaslab.mitigation.embedding.words import WordEncoder
from biaslab.models.load import load_variant_model
from biaslab.pretrain.architecture import build_llama

CFG = EmbeddingDebiasConfig(
    n_components=1,
    hard_extra_words={"uk": ["кандидат", "кандидатка", "він", "вона"], "en": ["he", "she", "him", "her"]},
)
NO_TARGET = "They are people. Відповідай так чи ні."
WITH_TARGET = "The doctor said that they would come."


def _gbem_rows() -> pd.DataFrame:
    rows = []
    for i, (prof, title_m, title_f) in enumerate([("лікар", "лікаря", "лікарки"), ("медик", "медика", "медикині")]):
        for male, title in [(True, title_m), (False, title_f)]:
            cand, pron = ("Кандидат", "він") if male else ("Кандидатка", "вона")
            rows.append({
                "item_id": f"test:{len(rows)}", "profession": prof, "split": "eval" if i == 0 else "finetune",
                "qa_sentence": f"{cand} має досвід. Чи може {pron} отримати посаду {title}?",
                "prob_sentence": f"{cand} має досвід. Посаду {title} {pron} BLANK отримав.",
            })
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    d = tmp_path_factory.mktemp("prepared")
    pd.DataFrame({
        "language": ["uk", "uk", "uk", "en", "en", "en", "ru", "ru"],
        "male": ["він", "чоловік", "кандидат", "he", "man", "him", "он", "мужчина"],
        "female": ["вона", "жінка", "кандидатка", "she", "woman", "her", "она", "женщина"],
        "source": "test",
    }).to_parquet(d / "gender_pairs.parquet")
    gbem = _gbem_rows()
    gbem.to_parquet(d / "gbem_ua.parquet")
    jobs = pd.DataFrame({"job": ["nurse", "skincare specialist"], "group": "female_dominated"})
    jobs.to_parquet(d / "occugender_jobs.parquet")
    # WinoBias has no split: "skincare specialist" is an OccuGender test job and must not come back through it
    pd.DataFrame({"occupation": ["the doctor", "", "the skincare specialist"]}).to_parquet(d / "winobias.parquet")
    # the split folders prepare writes (biaslab.data.splits): лікар is a test profession, медик a fine-tune one
    labels = {"train": "finetune", "select": "validation", "test": "eval"}
    for split, label in labels.items():
        (d / split).mkdir()
        (d / split / "manifest.json").write_text(json.dumps({"split": split}), encoding="utf-8")
        gbem[gbem["split"] == label].reset_index(drop=True).to_parquet(d / split / "gbem_ua.parquet")
    jobs.iloc[[0]].to_parquet(d / "select" / "occugender_jobs.parquet")
    jobs.iloc[[1]].reset_index(drop=True).to_parquet(d / "test" / "occugender_jobs.parquet")
    return d


def _model(tokenizer, tied=False):
    return build_llama(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                       num_attention_heads=4, tie_word_embeddings=tied, seed=0)


def _tokens(tokenizer, prepared, mode):
    return build_targets(WordEncoder(tokenizer), prepared, CFG, mode)[1]


def _basis(model, tokenizer, prepared):
    pairs = list(zip(*[pd.read_parquet(prepared / "gender_pairs.parquet")[c] for c in ("male", "female")]))
    weight = model.get_input_embeddings().weight.detach().double().numpy()
    return torch.from_numpy(gender_subspace(pairs, weight, WordEncoder(tokenizer), 1).basis)


# ------------------------------------------------------------------ subspace
class _OneTokenEncoder:
    """Word i ↔ token row i: isolates the PCA from tokenisation."""

    def __init__(self, words):
        self.index = {w: i for i, w in enumerate(words)}

    def encodings(self, word):
        return [(self.index[word],)]


@pytest.mark.parametrize("normalize", [False, True])
def test_pca_recovers_planted_gender_direction(normalize):
    rng = np.random.default_rng(0)
    d, n = 48, 30
    g = rng.normal(size=d)
    g /= np.linalg.norm(g)
    base = rng.normal(size=(n, d))
    amp = rng.uniform(0.5, 1.5, size=(n, 1))
    males = base + amp * g + 0.05 * rng.normal(size=(n, d))
    females = base - amp * g + 0.05 * rng.normal(size=(n, d))
    words = [f"m{i}" for i in range(n)] + [f"f{i}" for i in range(n)]
    sub = gender_subspace(list(zip(words[:n], words[n:])), np.vstack([males, females]), _OneTokenEncoder(words),
                          n_components=2, normalize=normalize)
    assert sub.basis.shape == (2, d)
    np.testing.assert_allclose(sub.basis @ sub.basis.T, np.eye(2), atol=1e-10)
    assert float(sub.basis[0] @ g) > 0.99  # sign: male direction positive
    assert sub.explained_variance_ratio[0] > 0.8 > sub.explained_variance_ratio[1]


def test_identical_pair_is_dropped_not_silently_used():
    emb = np.eye(4)
    sub = gender_subspace([("a", "b"), ("c", "c")], emb, _OneTokenEncoder(["a", "b", "c"]), 1)
    assert sub.n_pairs == 1 and sub.dropped[0]["reason"] == "identical vectors"


# ------------------------------------------------------------------ targets and spans
def test_job_titles_extracted_from_sentences():
    words = gbem_ua_professions(_gbem_rows())
    assert {"лікар", "лікаря", "лікарки", "медика", "медикині"} <= words


def test_target_words_come_from_train_and_selection_items_only(prepared):
    """The leak of issue 43: no GBEM-UA test profession or OccuGender test job is an edit target."""
    from biaslab.mitigation.embedding.targets import profession_words, target_words, test_words

    professions = profession_words(prepared, ["gbem_ua", "occugender", "winobias"], ["uk", "en"])
    held_out = test_words(prepared)
    assert {"лікар", "лікаря", "лікарки", "skincare specialist"} <= held_out
    assert professions["uk"] == {"медик", "медика", "медикині"}
    assert professions["en"] == {"nurse", "doctor"}
    for mode in ("soft", "hard"):
        words = target_words(professions, ["uk", "en"], {}, CFG.hard_extra_words, mode)
        assert not held_out & {w for ws in words.values() for w in ws}


def test_hard_targets_are_a_superset_of_soft(tiny_tokenizer, prepared):
    soft, hard = _tokens(tiny_tokenizer, prepared, "soft"), _tokens(tiny_tokenizer, prepared, "hard")
    assert set(soft.row_ids) < set(hard.row_ids)
    assert set(soft.sequences) < set(hard.sequences)


def test_sentence_initial_candidate_is_a_hard_span_only(tiny_tokenizer, prepared):
    ids = torch.tensor(WordEncoder(tiny_tokenizer).encode("Кандидатка"))
    for mode, expected in [("soft", False), ("hard", True)]:
        packed = pack_sequences(_tokens(tiny_tokenizer, prepared, mode).sequences)
        assert bool(span_mask(ids, packed).all()) is expected


def test_span_mask_marks_only_whole_occurrences():
    packed = pack_sequences([(5, 6), (9,)])
    ids = torch.tensor([[1, 5, 6, 5, 7, 9], [6, 5, 2, 2, 2, 2]])
    expected = torch.tensor([[0, 1, 1, 0, 0, 1], [0, 0, 0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(span_mask(ids, packed), expected)


def test_coverage_splits_edited_tokens_into_spans_and_collateral(tiny_tokenizer, prepared):
    tokens = _tokens(tiny_tokenizer, prepared, "hard")
    cov = edit_coverage(tiny_tokenizer, _gbem_rows()["qa_sentence"], tokens.row_ids, tokens.sequences)
    assert cov["tokens_row_edited"] == cov["tokens_in_target_spans"] + cov["tokens_collateral"]
    assert 0 < cov["share_in_target_spans"] <= cov["share_row_edited"] <= 1


# ------------------------------------------------------------------ checkpoint edit
def test_projection_removal_is_exact():
    basis = torch.linalg.qr(torch.randn(16, 2, dtype=torch.float64))[0].T  # [2, 16] orthonormal
    rows = torch.randn(5, 16)
    assert (remove_projection(rows, basis).double() @ basis.T).abs().max() < 1e-6


def _save(model, tokenizer, path, dtype=None, **save_kwargs):
    """Save ``model`` (cast to ``dtype`` first) and the tokenizer as a model directory; returns the path."""
    (model.to(dtype) if dtype is not None else model).save_pretrained(path, **save_kwargs)
    tokenizer.save_pretrained(path)
    return path


def _embeddings(path, dtype="auto"):
    return load_variant_model(path, dtype=dtype).model.get_input_embeddings().weight.detach()


def _other_rows(n, rows):
    others = torch.ones(n, dtype=torch.bool)
    others[rows] = False
    return others


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_checkpoint_edit_changes_exactly_the_target_rows_and_keeps_the_dtype(tiny_tokenizer, prepared, tmp_path,
                                                                              dtype):
    base = _save(_model(tiny_tokenizer), tiny_tokenizer, tmp_path / "base", dtype)
    report = fit_embedding_variant(base_dir=base, cfg=CFG, mode="soft", apply="checkpoint", prepared_dir=prepared,
                                   out_dir=tmp_path / "soft")
    before, after = _embeddings(base), _embeddings(tmp_path / "soft")
    assert before.dtype == after.dtype == dtype  # stored and reloaded in the base's dtype
    rows = torch.tensor(_tokens(tiny_tokenizer, prepared, "soft").row_ids)
    others = _other_rows(len(before), rows)
    assert torch.equal(after[others], before[others])
    assert (after[rows] != before[rows]).any(dim=1).all()  # every target row changed
    basis = _basis(load_variant_model(base).model, tiny_tokenizer, prepared)  # fitted on the stored rows
    expected = remove_projection(before[rows], basis)  # float64 arithmetic, written in the stored dtype
    assert torch.equal(after[rows], expected)
    residual = (after[rows].double() @ basis.T).abs().max()
    bound = 1e-6 if dtype == torch.float32 else 2.0**-7 * float(after[rows].double().norm(dim=1).max())
    assert residual < bound
    assert report["targets"]["rows_edited"] == len(rows) and report["dtype"] == str(dtype).removeprefix("torch.")
    saved = json.loads((tmp_path / "soft" / "edit_report.json").read_text(encoding="utf-8"))
    assert saved["max_residual_projection"] == pytest.approx(float(
        (after[rows].double() @ basis.T).norm(dim=1).max()))
    # every other tensor is the base's, byte for byte
    base_state = load_variant_model(base).model.state_dict()
    for name, tensor in load_variant_model(tmp_path / "soft").model.state_dict().items():
        if name != "model.embed_tokens.weight":
            assert torch.equal(tensor, base_state[name]), name


def test_subspace_reads_only_the_rows_it_needs(tiny_tokenizer, prepared, tmp_path):
    base = _save(_model(tiny_tokenizer), tiny_tokenizer, tmp_path / "base")
    report = fit_embedding_variant(base_dir=base, cfg=CFG, mode="soft", apply="hook", prepared_dir=prepared,
                                   out_dir=tmp_path / "soft")
    assert 0 < report["subspace"]["embedding_rows_read"] < len(tiny_tokenizer)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tied_output_head_is_untied_and_unchanged(tiny_tokenizer, prepared, tmp_path, dtype):
    model = _model(tiny_tokenizer, tied=True)
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    base = _save(model, tiny_tokenizer, tmp_path / "base", dtype)
    report = fit_embedding_variant(base_dir=base, cfg=CFG, mode="hard", apply="checkpoint", prepared_dir=prepared,
                                   out_dir=tmp_path / "hard")
    assert report["output_head_untied"] is True
    head_before = _embeddings(base)
    edited = load_variant_model(tmp_path / "hard").model  # the saved checkpoint reloads untied
    assert edited.get_output_embeddings().weight.data_ptr() != edited.get_input_embeddings().weight.data_ptr()
    assert edited.get_output_embeddings().weight.dtype == dtype
    assert torch.equal(edited.get_output_embeddings().weight, head_before)
    rows = torch.tensor(_tokens(tiny_tokenizer, prepared, "hard").row_ids)
    after = edited.get_input_embeddings().weight.detach()
    others = _other_rows(len(after), rows)
    assert torch.equal(after[others], head_before[others]) and not torch.equal(after[rows], head_before[rows])


def test_tied_sharded_checkpoint_gets_a_new_shard_for_the_head(tiny_tokenizer, prepared, tmp_path):
    base = _save(_model(tiny_tokenizer, tied=True), tiny_tokenizer, tmp_path / "base", max_shard_size="20KB")
    assert (base / "model.safetensors.index.json").is_file()
    fit_embedding_variant(base_dir=base, cfg=CFG, mode="soft", apply="checkpoint", prepared_dir=prepared,
                          out_dir=tmp_path / "soft")
    index = json.loads((tmp_path / "soft" / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert index["weight_map"]["lm_head.weight"] == shards[-1] and all(f"-of-{len(shards):05d}" in s for s in shards)
    edited = load_variant_model(tmp_path / "soft").model
    assert torch.equal(edited.get_output_embeddings().weight, _embeddings(base))


# ------------------------------------------------------------------ runtime hook
def _logits(model, tokenizer, text):
    ids = torch.tensor([tokenizer(text, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_hook_changes_logits_only_when_a_target_is_present(tiny_tokenizer, prepared):
    model = _model(tiny_tokenizer)
    tokens = _tokens(tiny_tokenizer, prepared, "soft")
    plain = {t: _logits(model, tiny_tokenizer, t) for t in (NO_TARGET, WITH_TARGET)}
    handle = attach_hook(model, _basis(model, tiny_tokenizer, prepared), pack_sequences(tokens.sequences))
    assert torch.equal(_logits(model, tiny_tokenizer, NO_TARGET), plain[NO_TARGET])
    assert not torch.equal(_logits(model, tiny_tokenizer, WITH_TARGET), plain[WITH_TARGET])
    handle.remove()  # reversible
    assert torch.equal(_logits(model, tiny_tokenizer, WITH_TARGET), plain[WITH_TARGET])


def test_hook_in_a_padded_batch_edits_only_the_row_with_a_target(tiny_tokenizer, prepared):
    model = _model(tiny_tokenizer)
    batch = tiny_tokenizer([NO_TARGET, WITH_TARGET], add_special_tokens=False, padding=True, return_tensors="pt")
    with torch.no_grad():
        plain = model(**batch).logits
        handle = attach_hook(model, _basis(model, tiny_tokenizer, prepared),
                             pack_sequences(_tokens(tiny_tokenizer, prepared, "soft").sequences))
        hooked = model(**batch).logits
    handle.remove()
    assert torch.equal(hooked[0], plain[0]) and not torch.equal(hooked[1], plain[1])


def test_hook_variant_directory_loads_through_models(tiny_tokenizer, prepared, tmp_path):
    base = _model(tiny_tokenizer)
    _save(base, tiny_tokenizer, tmp_path / "base")
    fit_embedding_variant(base_dir=tmp_path / "base", cfg=CFG, mode="hard", apply="hook",
                          prepared_dir=prepared, out_dir=tmp_path / "hard")
    manifest = json.loads((tmp_path / "hard" / "variant.json").read_text())
    assert manifest["base"] == str(tmp_path / "base") and manifest["method"] == "embedding"
    hooked = load_variant_model(tmp_path / "hard").model
    assert torch.equal(hooked.get_input_embeddings().weight, base.get_input_embeddings().weight)
    assert torch.equal(_logits(hooked, tiny_tokenizer, NO_TARGET), _logits(base, tiny_tokenizer, NO_TARGET))
    assert not torch.equal(_logits(hooked, tiny_tokenizer, WITH_TARGET), _logits(base, tiny_tokenizer, WITH_TARGET))


# ------------------------------------------------------------------ masked LMs: the MLM decoder bias
def _masked_lm_with_a_trained_bias(arch, path):
    """A tiny tied masked LM of ``arch`` whose head bias is far from zero (as a trained one), saved to ``path``;
    returns the model and that bias."""
    from transformers import AutoConfig, AutoModelForMaskedLM

    config = AutoConfig.for_model(arch, vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=40)
    torch.manual_seed(0)
    model = AutoModelForMaskedLM.from_config(config).eval()
    head_bias = next(p for n, p in model.named_parameters() if n.endswith("predictions.bias") or n == "lm_head.bias")
    with torch.no_grad():
        head_bias.copy_(torch.linspace(-2, 2, head_bias.numel()))
    model.save_pretrained(path)
    return model, head_bias


@pytest.mark.parametrize("arch", ["xlm-roberta", "bert"])
def test_untied_masked_lm_keeps_its_decoder_bias(arch, tmp_path):
    """RoBERTa/XLM-R and BERT tie the MLM decoder bias to the head's bias only while the word embeddings are
    tied; an untied copy must store it, or it reloads as zeros and shifts every output logit."""
    from transformers import AutoModelForMaskedLM

    from biaslab.mitigation.embedding.edit import edit_checkpoint
    from biaslab.models.weights.layout import model_layout

    model, head_bias = _masked_lm_with_a_trained_bias(arch, tmp_path / "base")
    layout = model_layout(tmp_path / "base")
    assert layout.tied and len(layout.untie_losses) == 1 and layout.untie_losses[0][0].endswith("decoder.bias")
    basis = torch.nn.functional.normalize(torch.randn(1, 16), dim=1)
    edit_checkpoint(tmp_path / "base", tmp_path / "edited", layout, basis, row_ids=[5, 6])
    edited = AutoModelForMaskedLM.from_pretrained(tmp_path / "edited").eval()
    ids = torch.tensor([[1, 7, 8, 9, 2]])  # no edited row: an input intervention leaves the logits alone
    with torch.no_grad():
        assert torch.allclose(edited(input_ids=ids).logits, model(input_ids=ids).logits, atol=1e-6)
    decoder_bias = edited.get_output_embeddings().bias
    assert torch.equal(decoder_bias, head_bias.detach())


# --------------------------------------------------------------------------- apply: rows (the default)
def _dir_bytes(path):
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rows_variant_loads_to_the_checkpoint_edits_parameters(tiny_tokenizer, prepared, tmp_path, tied, dtype):
    """``embedding_apply: rows`` (the default) stores the checkpoint edit as the edited rows alone - an overlay
    on its base, a small fraction of a copy - and loads to the checkpoint edit's parameters exactly (a tied head
    untied and unchanged), so its scores are the checkpoint edit's: the default run's numbers do not move."""
    from biaslab.config import VariantConfig
    from biaslab.outputs import variant_dir

    assert VariantConfig(method="embedding", model_dir="m").embedding_apply == "rows"
    base = _save(_model(tiny_tokenizer, tied=tied), tiny_tokenizer, tmp_path / "base", dtype)
    edited = fit_embedding_variant(base_dir=base, cfg=CFG, mode="hard", apply="checkpoint", prepared_dir=prepared,
                                   out_dir=tmp_path / "checkpoint")
    rows = fit_embedding_variant(base_dir=base, cfg=CFG, mode="hard", apply="rows", prepared_dir=prepared,
                                 out_dir=tmp_path / "rows")
    assert {k: v for k, v in rows.items() if k != "apply"} == {k: v for k, v in edited.items() if k != "apply"}
    assert rows["apply"] == "rows" and rows["output_head_untied"] is tied
    assert variant_dir.kind(tmp_path / "rows") == "overlay"
    assert json.loads((tmp_path / "rows" / "variant.json").read_text())["apply"] == "rows"
    assert not list((tmp_path / "rows").glob("model*.safetensors"))
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "rows").iterdir()}
    assert len(set(modes.values())) == 1, modes  # the rows file has the umask's mode like variant.json, not 0600
    assert _dir_bytes(tmp_path / "rows") < _dir_bytes(base) / 10  # the edit alone, not a copy of the checkpoint
    want, got = load_variant_model(tmp_path / "checkpoint"), load_variant_model(tmp_path / "rows")
    assert got.fingerprint == variant_dir.resolve(tmp_path / "rows").fingerprint
    want_state, got_state = want.model.state_dict(), got.model.state_dict()
    assert sorted(want_state) == sorted(got_state)
    for name, tensor in want_state.items():
        assert tensor.dtype == got_state[name].dtype and torch.equal(tensor, got_state[name]), name
    head, embedding = got.model.get_output_embeddings().weight, got.model.get_input_embeddings().weight
    assert head.data_ptr() != embedding.data_ptr()  # a tied head was untied before the rows were written
    if tied:
        assert torch.equal(head, _embeddings(base)) and got.model.config.tie_word_embeddings is False
    for text in (NO_TARGET, WITH_TARGET):
        assert torch.equal(_logits(got.model, tiny_tokenizer, text), _logits(want.model, tiny_tokenizer, text))


@pytest.mark.parametrize("arch", ["xlm-roberta", "bert"])
def test_rows_on_a_masked_lm_keep_the_decoder_bias(arch, tmp_path):
    """A masked LM's rows overlay unties its head in memory: the MLM decoder bias stays the trained one (the
    checkpoint edit has to store it, ``test_untied_masked_lm_keeps_its_decoder_bias``)."""
    from transformers import AutoModelForMaskedLM

    from biaslab.mitigation.embedding.edit import edit_checkpoint, edit_rows
    from biaslab.models.embedding_rows import apply_rows_from_dir
    from biaslab.models.weights.layout import model_layout

    _, head_bias = _masked_lm_with_a_trained_bias(arch, tmp_path / "base")
    layout = model_layout(tmp_path / "base")
    basis = torch.nn.functional.normalize(torch.randn(1, 16), dim=1)
    edit_checkpoint(tmp_path / "base", tmp_path / "edited", layout, basis, row_ids=[5, 6])
    (tmp_path / "rows").mkdir()
    report = edit_rows(tmp_path / "base", tmp_path / "rows", layout, basis, row_ids=[6, 5])
    assert report["output_head_untied"] is True
    want = AutoModelForMaskedLM.from_pretrained(tmp_path / "edited").eval()
    got = AutoModelForMaskedLM.from_pretrained(tmp_path / "base").eval()
    assert apply_rows_from_dir(got, tmp_path / "rows") is True
    ids = torch.tensor([[1, 5, 8, 6, 2]])  # edited rows present
    with torch.no_grad():
        assert torch.equal(got(input_ids=ids).logits, want(input_ids=ids).logits)
    assert torch.equal(got.get_output_embeddings().bias, head_bias.detach())


def test_rows_built_on_another_vocabulary_are_refused(tiny_tokenizer, prepared, tmp_path):
    """Rows cut from a base with another embedding size would replace other words' rows: one line, the file."""
    from biaslab.models.embedding_rows import ROWS_FILE, apply_rows_from_dir

    base = _save(_model(tiny_tokenizer), tiny_tokenizer, tmp_path / "base")
    fit_embedding_variant(base_dir=base, cfg=CFG, mode="soft", apply="rows", prepared_dir=prepared,
                          out_dir=tmp_path / "rows")
    other = build_llama(vocab_size=len(tiny_tokenizer) + 8, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                        num_attention_heads=4, seed=0)
    with pytest.raises(ValueError, match=f"{ROWS_FILE}: cut from an embedding of {len(tiny_tokenizer)} rows"):
        apply_rows_from_dir(other, tmp_path / "rows")



def test_the_same_edit_is_the_same_bytes_and_older_files_still_load(tmp_path):
    """The rows file is a DVC output and the registry's content: the same rows must give the same bytes every
    time (safetensors writes several metadata entries in a random order; with the fields as separate entries
    20 writes gave 6 different files). A file written that older way still loads."""
    from safetensors.torch import save

    from biaslab.models.embedding_rows import ROWS_FILE, apply_rows_from_dir, save_rows

    rows = torch.randn(3, 32, generator=torch.Generator().manual_seed(0))
    (tmp_path / "rows").mkdir()
    written = set()
    for _ in range(20):
        save_rows(tmp_path / "rows", row_ids=[1, 4, 7], rows=rows, embedding_tensor="model.embed_tokens.weight",
                  vocab_rows=64, untie_output_head=False)
        written.add((tmp_path / "rows" / ROWS_FILE).read_bytes())
    assert len(written) == 1
    old = tmp_path / "old"
    old.mkdir()
    (old / ROWS_FILE).write_bytes(save({"row_ids": torch.tensor([1, 4, 7]), "rows": rows},
                                       metadata={"embedding_tensor": "model.embed_tokens.weight", "vocab_rows": "64",
                                                 "untie_output_head": "false"}))
    for directory in (tmp_path / "rows", old):
        model = build_llama(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                            num_attention_heads=4, seed=0)
        assert apply_rows_from_dir(model, directory) is False
        assert torch.equal(model.get_input_embeddings().weight[[1, 4, 7]], rows)
