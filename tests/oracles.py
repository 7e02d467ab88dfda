"""Reference computations for the tests: naive per-item loops, one unpadded forward pass per item.

This is the seed authors' pattern (no batching, no prefix sharing, full logits, ``log_softmax``), written
as plainly as possible, so that every number the engine and the benchmarks produce can be checked
against it to 1e-5. Token ids are built here from the tokenizer directly, with the BOS rule spelled out
(``add_bos``): the scorer's own tokenisation is never used to check itself.
"""

from __future__ import annotations

import math

import torch


# ---------------------------------------------------------------------------------------------- causal
def token_logprobs(model, ids: list[int]) -> list[float]:
    """``log P(ids[j] | ids[:j])`` for ``j = 1 .. len(ids) - 1`` (one forward pass)."""
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids[:-1]])).logits[0].float(), -1)
    return [float(logprobs[j - 1, ids[j]]) for j in range(1, len(ids))]


def naive_logprob(model, ids: list[int], n_context: int) -> float:
    """Sum of ``log P(ids[j] | ids[:j])`` for ``j >= n_context``."""
    return sum(token_logprobs(model, ids)[n_context - 1:])


def encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def request_ids(tokenizer, context: str, continuation: str, add_bos: bool = False) -> tuple[list[int], list[int]]:
    """lm-evaluation-harness' split: ``(context ids, continuation ids)``; empty context -> ``[BOS]``."""
    if not context:
        return [tokenizer.bos_token_id], encode(tokenizer, continuation)
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
    ctx = encode(tokenizer, context)
    whole = encode(tokenizer, context + continuation)
    bos = [tokenizer.bos_token_id] if add_bos and ctx[:1] != [tokenizer.bos_token_id] else []
    return bos + ctx, whole[len(ctx):]


def naive_loglikelihood(model, tokenizer, context: str, continuation: str, add_bos: bool = False) -> tuple[float, bool]:
    """``log P(continuation | context)`` and whether every continuation token is the argmax."""
    ctx, cont = request_ids(tokenizer, context, continuation, add_bos)
    whole = ctx + cont
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([whole[:-1]])).logits[0].float(), -1)
    total, greedy = 0.0, True
    for j, token in enumerate(cont):
        pos = len(ctx) - 1 + j
        total += float(logprobs[pos, token])
        greedy &= int(logprobs[pos].argmax()) == token
    return total, greedy


def naive_sentence_p(model, tokenizer, sentence: str, pads: int = 0) -> float:
    """``exp(mean log-prob)`` of the sentence (+ ``pads`` EOS tokens) from BOS."""
    ids = [tokenizer.bos_token_id] + encode(tokenizer, sentence) + [tokenizer.eos_token_id] * pads
    return math.exp(naive_logprob(model, ids, 1) / (len(ids) - 1))


def naive_sentence_token_logprobs(model, tokenizer, sentence: str) -> list[tuple[int, float]]:
    """``(token, log P(token | BOS, earlier tokens))`` for each token of the sentence."""
    ids = [tokenizer.bos_token_id] + encode(tokenizer, sentence)
    return list(zip(ids[1:], token_logprobs(model, ids)))


# ---------------------------------------------------------------------------------------------- masked
def naive_pll(model, tokenizer, ids: list[int], positions: list[int]) -> float:
    """One unpadded forward pass per masked position, full logits: the seed authors' loop."""
    total = 0.0
    for p in positions:
        masked = list(ids)
        masked[p] = tokenizer.mask_token_id
        with torch.no_grad():
            logits = model(torch.tensor([masked])).logits[0]  # [T, V]
        total += float(torch.log_softmax(logits[p].float(), -1)[ids[p]])
    return total


def naive_token_plls(model, tokenizer, sentence: str) -> list[tuple[int, float]]:
    """``(token, pseudo-log-prob)`` of every token between ``[CLS]`` and ``[SEP]``."""
    ids = tokenizer(sentence)["input_ids"]
    return [(ids[p], naive_pll(model, tokenizer, ids, [p])) for p in range(1, len(ids) - 1)]


def naive_joint_mask(model, tokenizer, ids, positions, targets) -> float:
    """All ``positions`` masked at once; sum of the targets' log-probabilities there."""
    masked = list(ids)
    for p in positions:
        masked[p] = tokenizer.mask_token_id
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([masked])).logits[0].float(), -1)
    return sum(float(logprobs[p, t]) for p, t in zip(positions, targets))


def naive_masked_cloze(model, tokenizer, sentence: str, prompt: str = "") -> tuple[float, int]:
    """Replace the final pronoun (not its trailing '.') by n [MASK] tokens in the text; one unpadded forward."""
    prefix, word = sentence.rsplit(" ", 1)
    core = word.rstrip(".")
    targets = tokenizer(core, add_special_tokens=False)["input_ids"]
    text = f"{prefix} {' '.join([tokenizer.mask_token] * len(targets))}{word[len(core):]}"
    ids = tokenizer(f"{prompt} {text}" if prompt else text)["input_ids"]
    positions = [i for i, t in enumerate(ids) if t == tokenizer.mask_token_id]
    assert len(positions) == len(targets)
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)  # [T, V]
    return sum(float(logprobs[p, t]) for p, t in zip(positions, targets)), len(targets)
