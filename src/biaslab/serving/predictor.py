"""``predict`` of a served version: the contract's requests answered by biaslab's own scorer.

Rows are grouped by task and prompt prefix and each group is one scorer call (batched as in
evaluation; batched == unbatched), then the answers are put back in the rows' order. A prompt
variant's prefix goes in exactly as in evaluation (``scorer.with_prefix``: ``prefix + " " + text``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from biaslab.serving.contract import (
    DEFAULT_MAX_NEW_TOKENS,
    GENERATE,
    LOGLIKELIHOOD,
    RequestError,
    ServingRequest,
    output_frame,
    parse_requests,
)


def select_prefix(prefixes: dict[str, str], method: str, language: str | None) -> str:
    """The debiasing prefix for a request in ``language`` (see :func:`biaslab.mitigation.prompt.resolve_prompt_prefix`).

    Without a language: the ``*`` entry, else the only entry; a prompt variant with several languages and
    no ``*`` entry needs the ``language`` column.
    """
    from biaslab.config import ConfigError, VariantConfig
    from biaslab.mitigation.prompt import ANY_LANGUAGE, resolve_prompt_prefix

    if not prefixes:
        return ""
    if language is None:
        if ANY_LANGUAGE in prefixes:
            return prefixes[ANY_LANGUAGE].strip()
        if len(prefixes) == 1:
            return next(iter(prefixes.values())).strip()
        if method != "prompt":
            return ""
        raise RequestError(f"this prompt variant has a prefix per language {sorted(prefixes)}: add a 'language' column")
    variant = VariantConfig(method="prompt" if method == "prompt" else "none", model_dir=".", prompt_prefix=prefixes)
    try:
        return resolve_prompt_prefix(variant, language)
    except ConfigError as exc:
        raise RequestError(f"language {language!r}: {exc}") from None


class ServedVariant:
    """A registered version, rebuilt: its scorer, its prefixes, and the contract's ``predict``."""

    def __init__(self, scorer: Any, *, variant: str, method: str, kind: str, prefixes: dict[str, str]):
        self.scorer = scorer
        self.variant, self.method, self.kind = variant, method, kind
        self.prefixes = dict(prefixes)

    def predict(self, model_input: Any, params: dict[str, Any] | None = None):
        """Answer every row (see :mod:`biaslab.serving.contract`); returns the output DataFrame."""
        from biaslab.scoring.protocol import GENERATE as CAN_GENERATE
        from biaslab.scoring.protocol import LOGLIKELIHOOD as CAN_SCORE
        from biaslab.scoring.requests import Request

        requests = parse_requests(model_input)
        max_new_tokens = int((params or {}).get("max_new_tokens") or DEFAULT_MAX_NEW_TOKENS)
        groups: dict[tuple[str, str], list[ServingRequest]] = defaultdict(list)
        for request in requests:
            groups[(request.task, select_prefix(self.prefixes, self.method, request.language))].append(request)
        results: list[dict[str, Any]] = [{} for _ in requests]
        for (task, prefix), group in groups.items():
            scorer = self.scorer.with_prefix(prefix) if prefix else self.scorer
            needed = {GENERATE: CAN_GENERATE, LOGLIKELIHOOD: CAN_SCORE}.get(task)
            if needed and not scorer.supports(needed):
                raise RequestError(f"rows {[r.row for r in group][:5]}: {task} needs {needed}, which this version "
                                   f"({scorer.description}) cannot do; send 'sentence' rows instead")
            if task == GENERATE:
                texts = scorer.generate([r.text for r in group], max_new_tokens=max_new_tokens)
                for r, text in zip(group, texts):
                    results[r.row] = {"task": task, "generated": text}
            elif task == LOGLIKELIHOOD:
                scores = scorer.loglikelihood([Request(r.text, r.continuation) for r in group])
                for r, s in zip(group, scores):
                    results[r.row] = {"task": task, "logprob": float(s.logprob), "n_tokens": int(s.n_tokens),
                                      "is_greedy": bool(s.is_greedy)}
            else:
                scores = scorer.sentence_scores([r.text for r in group])
                for r, s in zip(group, scores):
                    results[r.row] = {"task": task, "logprob": float(s.logprob), "n_tokens": int(s.n_tokens)}
        return output_frame(results)
