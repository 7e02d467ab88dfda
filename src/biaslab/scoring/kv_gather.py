"""Can this model's KV cache be gathered per request? ``scoring.prefix_sharing: auto | on | off``.

Prefix sharing (:mod:`biaslab.scoring.causal`) runs a group's shared prefix once and then gathers the
prefix's KV cache row per member (``cache.reorder_cache(owner)``, an ``index_select`` over the batch
dimension) before the members' suffixes run. That is only right for caches whose every layer is a
plain ``[batch, kv_heads, positions, head_dim]`` tensor pair indexed by batch row, grown by
concatenation. With ``transformers`` 5 that is :class:`transformers.DynamicCache` built of
``DynamicLayer`` (full attention: Llama, Qwen2) and ``DynamicSlidingWindowLayer`` (Mistral's sliding
window, Gemma-2's sliding layers, which keep only the last ``window - 1`` positions; every row of a
chunk has the same cache length, so the kept window is the same for all of them): tested on tiny
random Llama-3, Qwen2, Gemma-2 and Mistral models (``tests/unit/test_prefix_architectures.py``).

Anything else is refused rather than guessed at: a legacy tuple cache (old ``transformers``),
Gemma-2's ``HybridCache`` and other static caches of older versions (fixed-length buffers written at
cache positions), quantized, offloaded, linear-attention (Mamba-style) or DynamicCache subclasses with
their own bookkeeping (``MtpCache``). ``auto`` then scores every request as its own row - the same
numbers, only slower - and says why, once per reason; ``on`` stops with that reason.
"""

from __future__ import annotations

import logging

from biaslab.errors import BiaslabError

log = logging.getLogger(__name__)

SETTINGS = ("auto", "on", "off")
GATHERABLE_CACHES = frozenset({"DynamicCache"})
GATHERABLE_LAYERS = frozenset({"DynamicLayer", "DynamicSlidingWindowLayer"})
_logged: set[str] = set()  # reasons already logged in this process (one line per reason, not per scorer)


class PrefixSharingError(BiaslabError, ValueError):
    """``scoring.prefix_sharing: on`` for a model whose KV cache cannot be gathered per request."""


def normalise_setting(setting: str | bool) -> str:
    """``auto | on | off`` from the params value (YAML reads ``on``/``off`` as booleans)."""
    if setting is True:
        return "on"
    if setting is False:
        return "off"
    if setting not in SETTINGS:
        raise PrefixSharingError(f"params.yaml scoring.prefix_sharing: {setting!r}; use auto, on or off")
    return setting


def gather_unsupported(cache: object) -> str | None:
    """Why the prefix cache ``cache`` cannot be gathered per request, or ``None`` when it can."""
    if cache is None:
        return "the model returned no KV cache"
    name = type(cache).__name__
    if isinstance(cache, (tuple, list)):
        return "the model returns a legacy tuple KV cache (transformers before the Cache classes)"
    if name not in GATHERABLE_CACHES:
        return f"its KV cache is a {name}, not a DynamicCache (fixed-length or model-specific buffers)"
    if getattr(cache, "offloading", False):
        return "its DynamicCache offloads layers to the CPU"
    layers = getattr(cache, "layers", None)
    if not layers:
        return "its DynamicCache has no per-layer cache objects (a transformers version this was not tested with)"
    odd = sorted({type(layer).__name__ for layer in layers} - GATHERABLE_LAYERS)
    if odd:
        return f"its DynamicCache holds {', '.join(odd)} layers (only {', '.join(sorted(GATHERABLE_LAYERS))} are gathered)"
    return None


def resolve_prefix_sharing(setting: str | bool, probe_cache, model_name: str = "the model") -> bool:
    """Whether the engine shares prefixes: ``off`` never, ``auto``/``on`` when the cache can be gathered.

    ``probe_cache()`` runs the model once on a two-row, two-token batch with ``use_cache=True`` and
    returns its cache (only called unless ``off``). ``auto`` falls back to one row per request with one
    logged line per distinct reason; ``on`` raises :class:`PrefixSharingError` with the reason.
    """
    setting = normalise_setting(setting)
    if setting == "off":
        return False
    reason = gather_unsupported(probe_cache())
    if reason is None:
        return True
    if setting == "on":
        raise PrefixSharingError(f"params.yaml scoring.prefix_sharing: on, but {model_name}'s KV cache cannot be "
                                 f"gathered per request: {reason}; use auto or off")
    if reason not in _logged:
        _logged.add(reason)
        log.warning("prefix sharing off for %s: %s; every request is scored as its own row (same scores, slower)",
                    model_name, reason)
    return False
