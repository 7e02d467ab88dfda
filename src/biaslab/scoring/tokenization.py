"""Request tokenisation exactly as lm-evaluation-harness does it, so numbers agree with it.

Rules (lm_eval.api.model.LM._encode_pair and HFLM.loglikelihood):
1. Trailing whitespace of the context moves to the front of the continuation.
2. ``whole = encode(context + continuation)``; ``context_ids = encode(context)``;
   ``continuation_ids = whole[len(context_ids):]`` (so a merge across the boundary is attributed to
   the continuation, as the harness does).
3. An empty context becomes ``[prefix_token_id]`` (BOS, or EOS when the model has no BOS) and the
   continuation is encoded alone.
4. ``add_bos``: a non-empty context starts with the BOS token - prepended to the encoded context unless
   it already starts with it (a chat template that writes BOS itself), so BOS is never doubled. This is
   what the harness does with ``add_bos_token=True`` (or, since lm-eval 0.4.9.2, by default for a
   tokenizer that adds BOS itself: it then encodes with the tokenizer's own special tokens).
``encode`` adds no special tokens of its own (BOS is rule 4's job, EOS is never added); which
``add_bos`` a scorer uses is decided once, in :mod:`biaslab.scoring.formatting`.
"""

from __future__ import annotations

from collections.abc import Sequence

from biaslab.scoring.requests import Request, TokenRequest


def prefix_token_id(tokenizer) -> int:
    """BOS if the tokenizer has one, else EOS: what an empty context conditions on."""
    if tokenizer.bos_token_id is not None:
        return int(tokenizer.bos_token_id)
    if tokenizer.eos_token_id is not None:
        return int(tokenizer.eos_token_id)
    raise ValueError("tokenizer has neither a BOS nor an EOS token; cannot score an empty context")


def encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def _texts_to_encode(request: Request) -> tuple[str | None, str]:
    """``(context_text, whole_text)`` after rule 1; ``context_text`` is None for an empty context."""
    context, continuation = request.context, request.continuation
    if context == "":
        return None, continuation
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    return context, context + continuation


def with_bos(tokenizer, ids: Sequence[int]) -> list[int]:
    """``ids`` starting with the BOS token exactly once (rule 4)."""
    bos = tokenizer.bos_token_id
    if bos is None:
        raise ValueError("scoring.add_bos is on, but the tokenizer has no BOS token")
    ids = list(ids)
    return ids if ids[:1] == [int(bos)] else [int(bos), *ids]


def _split(tokenizer, request: Request, ctx: list[int] | None, whole: list[int], add_bos: bool = False) -> TokenRequest:
    """Rules 2-4: the continuation is what ``whole`` adds after the context's own tokens."""
    if ctx is None:
        if not whole:
            raise ValueError(f"empty continuation in request {request!r}")
        return TokenRequest((prefix_token_id(tokenizer),), tuple(whole))
    cont = whole[len(ctx) :]
    if not cont:
        raise ValueError(f"continuation tokenises to nothing in request {request!r}")
    return TokenRequest(tuple(with_bos(tokenizer, ctx) if add_bos else ctx), tuple(cont))


def encode_request(tokenizer, request: Request, add_bos: bool = False) -> TokenRequest:
    """Tokenise one request (the reference path; :func:`encode_requests` gives the same result faster)."""
    context, whole = _texts_to_encode(request)
    ctx = None if context is None else encode(tokenizer, context)
    return _split(tokenizer, request, ctx, encode(tokenizer, whole), add_bos)


def encode_requests(tokenizer, requests: Sequence[Request], add_bos: bool = False) -> list[TokenRequest]:
    """Tokenise many requests: every distinct text is encoded once, in one batched tokenizer call.

    Benchmarks repeat contexts heavily (OccuGender: one prompt for ~26 surface forms), and a fast
    tokenizer encodes a list in one call to Rust, so this is several times faster than a loop of
    :func:`encode_request` - with identical results (same texts, same ``encode`` options).
    """
    pairs = [_texts_to_encode(r) for r in requests]
    distinct = list(dict.fromkeys(t for pair in pairs for t in pair if t is not None))
    if getattr(tokenizer, "is_fast", False) and distinct:
        encoded = tokenizer(distinct, add_special_tokens=False)["input_ids"]
    else:
        encoded = [encode(tokenizer, t) for t in distinct]
    ids = dict(zip(distinct, encoded))
    return [
        _split(tokenizer, r, None if context is None else list(ids[context]), list(ids[whole]), add_bos)
        for r, (context, whole) in zip(requests, pairs)
    ]
