"""Counterfactual logit pairing: a LoRA objective aimed at the gender *difference*, not at one answer.

    lora:
      objective: logit_pairing   # sft (the GBEM-UA paper: completion loss only) | logit_pairing
      pairing_weight: 1.0        # loss = SFT loss + pairing_weight * pairing term
      pairing_pairs: 4           # counterfactual pairs per source and forward pass
      pairing_anchor: true       # GBEM-UA pairs keep their mean log-odds at the base's

Why: the paper's recipe trains every relevant example to " так". That moves *the answer* - on a model
whose answers sit near the так/ні threshold it pushes everyone to «так» - but leaves the gap between a
man and a woman with the same experience where it was (docs/lora_tuning.md). Counterfactual logit pairing
(Garg et al. 2019, "Counterfactual Fairness in Text Classification through Robustness", AIES) penalises
that gap directly: for two contexts that differ only in gender, the absolute difference of the model's
answer log-odds, as in the paper::

    gap(pair) = [log P(pos | a) - log P(neg | a)] - [log P(pos_b | b) - log P(neg_b | b)]
    loss      = SFT loss + pairing_weight * mean over sources of (mean over its drawn pairs of |gap(pair)|
                                                                  [+ |(a + b) / 2 - the base's| : the anchor])

The absolute value (not a square) keeps the pull constant as a gap shrinks: the planted GBEM-UA gap is
a few hundredths of a nat, whose square would vanish next to the SFT loss. Each source (below) draws
``pairing_pairs`` pairs per forward pass and weighs the same, so the English pairs, whose gaps are
tens of times larger, do not drown the Ukrainian ones.

The pairs come only from data LoRA may train on (held-out evaluation stays held out):

* ``gbem_ua``: the fine-tune professions' QA items, man (masculine title) vs woman with the feminine and
  with the masculine title, same profession, experience and relevance (the benchmark's own pairing
  rule, :func:`biaslab.benchmarks.gbem_ua.items.match_pairs`); pos/neg = " так" / " ні";
* ``occupations_en``: the English LoRA templates (:mod:`biaslab.mitigation.lora.sft_english`) with a
  female-coded and a male-coded occupation of our own; pos/neg = the female / male pronoun. Here the
  occupation is the counterfactual: the pronoun should not depend on it. And ``occupations_en_odds``:
  each such context with she/he against itself with he/she (the completion is the counterfactual), so
  the pronoun's odds are pulled to even, not only made equal across occupations.

Token ids are built by the evaluation's :class:`~biaslab.scoring.formatting.PromptFormat`, so the term
trains on exactly the sequences the benchmark scores. The pairs drawn at each forward pass depend only on
``lora.seed``, the optimizer step and the forward pass within it, so a resumed run draws what an
uninterrupted one would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from biaslab.mitigation.lora.sft_data import NO, YES, SftDataError, qa_prompt

PAIR_COLUMNS = ["context_a", "context_b", "positive", "negative", "positive_b", "negative_b", "source"]
# sources whose pairs' mean log-odds are anchored at the base's (``lora.pairing_anchor``): GBEM-UA's yes/no rate is
# the task (macro-F1 reads it); the English pronoun odds are the bias itself, pulled to even by the odds pairs
ANCHORED_SOURCES = ("gbem_ua",)


# --------------------------------------------------------------------------- pairs
def gbem_ua_pairs(frame: pd.DataFrame, split: str = "finetune") -> pd.DataFrame:
    """Man vs woman QA prompts of the ``split`` professions (both pairings, every experience)."""
    from biaslab.benchmarks.gbem_ua.items import match_pairs, select_items

    rows = frame[frame["split"] == split]
    if rows.empty:
        raise SftDataError(f"gbem_ua: no rows with split == {split!r} for logit pairing; run the prepare stage")
    items = select_items(rows.reset_index(drop=True))
    sentence = items.set_index("item_id")["qa_sentence"]
    pairs = match_pairs(items)
    frame = pd.DataFrame({
        "context_a": [qa_prompt(sentence[i]) for i in pairs["male_item_id"]],
        "context_b": [qa_prompt(sentence[i]) for i in pairs["female_item_id"]],
        "positive": YES, "negative": NO, "positive_b": YES, "negative_b": NO, "source": "gbem_ua",
    })
    return frame.drop_duplicates(["context_a", "context_b"]).reset_index(drop=True)


def english_pairs() -> pd.DataFrame:
    """Each LoRA template with a female-coded vs a male-coded own occupation; pos/neg = she-/he-pronoun.

    Plus, per template and occupation, the *completion* counterfactual: the same context with she over he
    and with he over she, whose gap is twice the she-over-he log-odds - so the term also pulls the pronoun
    towards even odds, not only towards the same odds for every occupation (which a model could meet by
    answering "he" everywhere: OccuGender's parity gap would grow).
    """
    from biaslab.mitigation.lora.sft_english import PRONOUNS, TEMPLATES
    from biaslab.pretrain.planted.english import with_article
    from biaslab.pretrain.planted.lexicon import OWN_OCCUPATIONS

    female = [job for job, code in OWN_OCCUPATIONS if code == "F"]
    male = [job for job, code in OWN_OCCUPATIONS if code == "M"]
    records = []
    for template, case in TEMPLATES:
        he, she, _ = PRONOUNS[case]
        for job_f in female:
            for job_m in male:
                a = template.format(job=job_f, a_job=with_article(job_f))
                b = template.format(job=job_m, a_job=with_article(job_m))
                records.append((a, b, f" {she}", f" {he}", f" {she}", f" {he}", "occupations_en"))
        for job in female + male:
            context = template.format(job=job, a_job=with_article(job))
            records.append((context, context, f" {she}", f" {he}", f" {he}", f" {she}", "occupations_en_odds"))
    return pd.DataFrame.from_records(records, columns=PAIR_COLUMNS)


def pair_set(frame: pd.DataFrame, sources: Sequence[str]) -> pd.DataFrame:
    """Every counterfactual pair of ``sources`` (``lora.sources``), sorted so the set never depends on input order."""
    from biaslab.mitigation.lora.sft_sources import check_sources

    check_sources(sources)
    parts = ([gbem_ua_pairs(frame)] if "gbem_ua" in sources else []) + \
            ([english_pairs()] if "occupations_en" in sources else [])
    pairs = pd.concat(parts, ignore_index=True)
    return pairs.sort_values(["context_a", "context_b"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- token ids
@dataclass(frozen=True)
class EncodedPairs:
    """Per pair, four token sequences: (a, pos), (a, neg), (b, pos_b), (b, neg_b), each with its completion span."""

    sequences: list[list[int]]  # 4 per pair, in that order
    spans: list[tuple[int, int]]  # [start, end) of the completion tokens in each sequence
    sources: list[str]  # one per pair

    def __len__(self) -> int:
        return len(self.sequences) // 4


def encode_pairs(pairs: pd.DataFrame, fmt) -> EncodedPairs:
    """Token ids of every pair as the scorer builds them (``fmt``: the evaluation's PromptFormat)."""
    from biaslab.scoring.requests import Request

    requests = []
    for row in pairs.itertuples(index=False):
        requests += [Request(row.context_a, row.positive), Request(row.context_a, row.negative),
                     Request(row.context_b, row.positive_b), Request(row.context_b, row.negative_b)]
    encoded = fmt.encode_requests(requests)
    sequences = [list(r.context_ids) + list(r.continuation_ids) for r in encoded]
    spans = [(len(r.context_ids), len(r.context_ids) + len(r.continuation_ids)) for r in encoded]
    return EncodedPairs(sequences, spans, list(pairs["source"]))


def pair_log_odds(model: Any, encoded: EncodedPairs, indices: Sequence[int], pad_id: int = 0):
    """``(n, 2)`` tensor, differentiable: per pair, a's log-odds of pos over neg and b's of pos_b over neg_b.

    One right-padded forward pass over the 4 sequences of each pair; a completion's log-probability is the
    sum over its tokens, as the scorer's ``loglikelihood``.
    """
    import torch

    rows = [4 * i + k for i in indices for k in range(4)]
    length = max(len(encoded.sequences[r]) for r in rows)
    device = next(model.parameters()).device
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    for j, r in enumerate(rows):
        seq = encoded.sequences[r]
        ids[j, : len(seq)] = torch.tensor(seq)
        mask[j, : len(seq)] = 1
    ids, mask = ids.to(device), mask.to(device)  # once: the forward pass and the targets below read them
    # no KV cache: in eval mode (the anchors) the model would otherwise keep every layer's keys and values
    logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
    # the log-softmax only at the positions that predict a completion token (token t at position t - 1): a few per
    # row, where the full [rows, length, vocabulary] one took a quarter of a logit-pairing step on the CPU. Each
    # row's values, the zero-filled tensor summed below and so the gradients are those of the full computation
    span_rows, span_positions = [], []
    for j, r in enumerate(rows):
        start, end = encoded.spans[r]
        span_rows += [j] * (end - start)
        span_positions += range(start - 1, end - 1)
    at_row = torch.tensor(span_rows, device=device)
    at_position = torch.tensor(span_positions, device=device)
    targets = ids[at_row, at_position + 1]
    picked = torch.log_softmax(logits[at_row, at_position].float(), dim=-1).gather(-1, targets[:, None])[:, 0]
    logprobs = torch.zeros((len(rows), length - 1), dtype=picked.dtype, device=device)
    logprobs = logprobs.index_put((at_row, at_position), picked)
    completion = logprobs.sum(-1).view(len(indices), 4)
    return torch.stack([completion[:, 0] - completion[:, 1], completion[:, 2] - completion[:, 3]], dim=1)


def pair_gaps(model: Any, encoded: EncodedPairs, indices: Sequence[int], pad_id: int = 0):
    """``gap(pair)`` per index: a's log-odds minus b's (:func:`pair_log_odds`)."""
    log_odds = pair_log_odds(model, encoded, indices, pad_id)
    return log_odds[:, 0] - log_odds[:, 1]


def anchor_means(model: Any, encoded: EncodedPairs, pad_id: int = 0, batch: int = 64):
    """Every pair's mean log-odds ``(a + b) / 2`` under ``model`` as it is now, without gradients (the anchors)."""
    import torch

    with torch.no_grad():
        parts = [pair_log_odds(model, encoded, range(i, min(i + batch, len(encoded))), pad_id).mean(dim=1)
                 for i in range(0, len(encoded), batch)]
    return torch.cat(parts).cpu()


class AnchorCache:
    """The base's anchors (:func:`anchor_means`), computed once per study instead of once per trial.

    Every trial of a study wraps the same frozen base, so the anchors - one no-gradient pass of every pair
    over the full vocabulary (256 sequences per batch: gigabytes of logits on a large model) - are the same
    for all of them. The tune stage makes one cache per study with ``scope`` = what pins the base's outputs
    (its fingerprint, the training plan's device and dtype, the formatting); a key adds the pairs' token ids
    and the pad id. ``computed`` counts the passes actually run (tests).
    """

    def __init__(self, scope: str):
        self.scope = scope
        self.computed = 0
        self._anchors: dict[str, Any] = {}

    def key(self, encoded: EncodedPairs, pad_id: int) -> str:
        import hashlib
        import json

        payload = json.dumps([self.scope, pad_id, encoded.sequences, encoded.spans, encoded.sources])
        return hashlib.sha256(payload.encode()).hexdigest()

    def get(self, encoded: EncodedPairs, pad_id: int, compute):
        """The cached anchors of ``encoded``, or ``compute()``'s (then kept)."""
        key = self.key(encoded, pad_id)
        if key not in self._anchors:
            self._anchors[key] = compute()
            self.computed += 1
        return self._anchors[key]


def draw_indices(sources: Sequence[str], count: int, seed: int, step: int, micro_step: int) -> dict[str, list[int]]:
    """Per source, ``count`` distinct pair indices for one forward pass: a function of (seed, step, micro_step)."""
    import torch

    generator = torch.Generator().manual_seed((seed * 1_000_003 + step * 1_009 + micro_step) % 2**63)
    drawn = {}
    for source in sorted(set(sources)):
        members = [i for i, s in enumerate(sources) if s == source]
        order = torch.randperm(len(members), generator=generator)[: min(count, len(members))]
        drawn[source] = [members[j] for j in order.tolist()]
    return drawn


def pairing_term(model: Any, encoded: EncodedPairs, drawn: dict[str, list[int]], pad_id: int = 0, anchors=None):
    """The pairing term of the drawn pairs (one forward pass) and its parts as floats, for the training log.

    Per source: mean |gap|, plus with ``anchors`` (:func:`anchor_means` of the base) and for the
    :data:`ANCHORED_SOURCES` mean |(a + b) / 2 − anchor|: the pair's average answer stays where the base had
    it, so the gap closes by moving the two sides towards each other, not by pushing every answer to one
    word. The term is the mean over sources.
    """
    indices = [i for members in drawn.values() for i in members]
    log_odds = pair_log_odds(model, encoded, indices, pad_id)
    gaps = (log_odds[:, 0] - log_odds[:, 1]).abs()
    drift = None if anchors is None else (log_odds.mean(dim=1) - anchors[indices].to(log_odds.device)).abs()
    per_source, parts, start = [], {}, 0
    for source, members in drawn.items():
        part = slice(start, start + len(members))
        start += len(members)
        value = gaps[part].mean()
        parts[f"abs_gap_{source}"] = float(value.detach())
        if drift is not None and source in ANCHORED_SOURCES:
            parts[f"drift_{source}"] = float(drift[part].mean().detach())
            value = value + drift[part].mean()
        per_source.append(value)
    return sum(per_source) / len(per_source), parts


# --------------------------------------------------------------------------- trainer
def pairing_trainer_class():
    """TRL's ``SFTTrainer`` whose training loss adds ``weight`` x the pairing term of pairs drawn per forward pass.

    Built on first use so that importing this module does not import TRL. The instance needs
    ``pairing`` = (EncodedPairs, weight, pairs per pass, seed, pad id, anchored) set after construction;
    with ``anchored`` the anchors are the base's mean log-odds, computed once with the adapter disabled
    (so a resumed run gets the same ones), or taken from ``anchor_cache`` (an :class:`AnchorCache` the trials of
    one study share).
    """
    from trl import SFTTrainer

    class LogitPairingSFTTrainer(SFTTrainer):
        pairing: tuple[EncodedPairs, float, int, int, int, bool] | None = None
        _micro: tuple[int, int] = (-1, 0)  # (optimizer step, forward passes within it)
        _anchors: Any = None
        anchor_cache: AnchorCache | None = None

        def anchors(self, model):
            """The base's mean log-odds per pair (adapter disabled, eval mode), computed on first use (or taken
            from :attr:`anchor_cache`)."""
            if self._anchors is None:
                compute = lambda: self._base_anchors(model)  # noqa: E731
                self._anchors = (compute() if self.anchor_cache is None
                                 else self.anchor_cache.get(self.pairing[0], self.pairing[4], compute))
            return self._anchors

        def _base_anchors(self, model):
            peft_model = self.accelerator.unwrap_model(model)
            was_training = peft_model.training
            peft_model.eval()
            with peft_model.disable_adapter():
                anchors = anchor_means(peft_model, self.pairing[0], self.pairing[4])
            peft_model.train(was_training)
            return anchors

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            result = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                          num_items_in_batch=num_items_in_batch)
            if self.pairing is None or not model.training:
                return result
            encoded, weight, count, seed, pad_id, anchored = self.pairing
            anchors = self.anchors(model) if anchored else None
            step = self.state.global_step
            micro = self._micro[1] + 1 if self._micro[0] == step else 0
            self._micro = (step, micro)
            term, parts = pairing_term(model, encoded, draw_indices(encoded.sources, count, seed, step, micro),
                                       pad_id, anchors)
            self._metrics["train"]["pairing_loss"].append(float(term.detach()))
            for name, value in parts.items():
                self._metrics["train"][f"pairing_{name}"].append(value)
            # the Trainer divides the loss by the accumulation steps unless the model normalised it over the
            # whole optimizer step (num_items_in_batch): then this term must be divided here, once per pass
            normalised = (self.model_accepts_loss_kwargs and num_items_in_batch is not None) \
                or self.compute_loss_func is not None
            scale = weight / (self.current_gradient_accumulation_steps if normalised else 1)
            if return_outputs:
                loss, outputs = result
                return loss + scale * term, outputs
            return result + scale * term

    return LogitPairingSFTTrainer
