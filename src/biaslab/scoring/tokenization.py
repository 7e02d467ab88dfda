"""Request tokenisation exactly as lm-evaluation-harness does it, so numbers agree with it.

Rules (lm_eval.api.model.LM._encode_pair and HFLM.loglikelihood):
1. Trailing whitespace of the context moves to the front of the continuation.
2. ``whole = encode(context + continuation)``; ``context_ids = encode(context)``;
   ``continuation_ids = whole[len(context_ids):]`` (so a merge across the boundary is attributed to
   the continuation, as the harness does).
3. An empty context becomes ``[prefix_token_id]`` (BOS, or EOS when the model has no BOS) and the
   continuation is encoded alone.
No special tokens are added by ``encode`` (the harness' default for causal LMs).
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


def _split(tokenizer, request: Request, ctx: list[int] | None, whole: list[int]) -> TokenRequest:
    """Rules 2 and 3: the continuation is what ``whole`` adds after the context's own tokens."""
    if ctx is None:
        if not whole:
            raise ValueError(f"empty continuation in request {request!r}")
        return TokenRequest((prefix_token_id(tokenizer),), tuple(whole))
    cont = whole[len(ctx) :]
    if not cont:
        raise ValueError(f"continuation tokenises to nothing in request {request!r}")
    return TokenRequest(tuple(ctx), tuple(cont))


def encode_request(tokenizer, request: Request) -> TokenRequest:
    """Tokenise one request (the reference path; :func:`encode_requests` gives the same result faster)."""
    context, whole = _texts_to_encode(request)
    ctx = None if context is None else encode(tokenizer, context)
    return _split(tokenizer, request, ctx, encode(tokenizer, whole))


def encode_requests(tokenizer, requests: Sequence[Request]) -> list[TokenRequest]:
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
        _split(tokenizer, r, None if context is None else list(ids[context]), list(ids[whole]))
        for r, (context, whole) in zip(requests, pairs)
    ]
