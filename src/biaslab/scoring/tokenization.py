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


def encode_request(tokenizer, request: Request) -> TokenRequest:
    context, continuation = request.context, request.continuation
    if context == "":
        cont = encode(tokenizer, continuation)
        if not cont:
            raise ValueError(f"empty continuation in request {request!r}")
        return TokenRequest((prefix_token_id(tokenizer),), tuple(cont))
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = encode(tokenizer, context + continuation)
    ctx = encode(tokenizer, context)
    cont = whole[len(ctx) :]
    if not cont:
        raise ValueError(f"continuation tokenises to nothing in request {request!r}")
    return TokenRequest(tuple(ctx), tuple(cont))


def encode_requests(tokenizer, requests: Sequence[Request]) -> list[TokenRequest]:
    return [encode_request(tokenizer, r) for r in requests]
