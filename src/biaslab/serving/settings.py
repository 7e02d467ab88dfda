"""How a registered version is loaded and scored: the params a variant was evaluated with.

A served log-likelihood must equal the one the benchmarks computed, so the settings that change the
numbers - BOS (``scoring.add_bos``), prompt format (``evaluation.prompt_format``), compute dtype
(``scoring.dtype``) - and the loading options (``model.kind``, ``trust_remote_code``, ``allow_pickle``,
``model.device_map`` for a model too big for one GPU) are recorded in the version's ``MLmodel`` (the
``biaslab`` flavour) when it is registered, and read back by the loader. Batching settings only change
speed (batched == unbatched) but are kept as well.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from biaslab.errors import ConfigError

TRUST_REMOTE_CODE_ENV = "BIASLAB_SERVE_TRUST_REMOTE_CODE"
ALLOW_PICKLE_ENV = "BIASLAB_SERVE_ALLOW_PICKLE"


@dataclass(frozen=True)
class ServingSettings:
    """Loading and scoring options of one registered version."""

    model_kind: str = "auto"  # model.kind: auto | causal | masked
    trust_remote_code: bool = False
    allow_pickle: bool = False
    dtype: str = "auto"  # scoring.dtype: compute dtype (auto = bfloat16 on a GPU that has it, else float32)
    add_bos: str | bool = "auto"  # scoring.add_bos
    prompt_format: str = "raw"  # evaluation.prompt_format
    batch_size: int | str = "auto"
    max_batch_tokens: int = 1024
    device_map: str | dict[str, Any] | None = None  # model.device_map: accelerate placement of a big model

    @classmethod
    def from_params(cls, params: Any) -> "ServingSettings":
        """The settings of ``params.yaml`` (a :class:`biaslab.config.Params`)."""
        return cls(
            model_kind=params.model.kind,
            trust_remote_code=params.model.trust_remote_code,
            allow_pickle=params.model.allow_pickle,
            dtype=params.scoring.dtype,
            add_bos=params.scoring.add_bos,
            prompt_format=params.evaluation.prompt_format,
            batch_size=params.scoring.batch_size,
            max_batch_tokens=params.scoring.max_batch_tokens,
            device_map=params.model.device_map,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> "ServingSettings":
        """Read back what :meth:`to_dict` wrote; unknown keys (a newer biaslab) are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})

    @property
    def cache_dir(self) -> None:
        """The scorer's on-disk cache is off when serving (``make_scorer`` reads this attribute)."""
        return None


@dataclass(frozen=True)
class HostOptions:
    """What the serving host lets a package's files do: never read from the package.

    A package is written by whoever registered it; its ``MLmodel`` records the settings it was evaluated with,
    but whether its Python code runs (``trust_remote_code``) or pickle files load (``allow_pickle``) is the
    host's decision: environment variables ``BIASLAB_SERVE_TRUST_REMOTE_CODE`` / ``BIASLAB_SERVE_ALLOW_PICKLE``
    (``true`` or ``false``; unset = false), which ``biaslab serve`` sets from its flags or the host's
    ``params.yaml``.
    """

    trust_remote_code: bool = False
    allow_pickle: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "HostOptions":
        environ = os.environ if environ is None else environ
        return cls(trust_remote_code=_strict_flag(environ, TRUST_REMOTE_CODE_ENV),
                   allow_pickle=_strict_flag(environ, ALLOW_PICKLE_ENV))

    def env(self) -> dict[str, str]:
        """The environment variables that say these options to a serving process."""
        return {TRUST_REMOTE_CODE_ENV: str(self.trust_remote_code).lower(),
                ALLOW_PICKLE_ENV: str(self.allow_pickle).lower()}


def _strict_flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name)
    if raw is None or raw == "":
        return False
    if raw not in ("true", "false"):
        raise ConfigError(f"environment variable {name}={raw!r}: write true or false")
    return raw == "true"
