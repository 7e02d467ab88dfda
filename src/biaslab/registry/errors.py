"""The registry's error: a variant cannot be registered or promoted."""

from __future__ import annotations

from biaslab.errors import BiaslabError


class RegistryError(BiaslabError, RuntimeError):
    """A variant cannot be registered or promoted: missing inputs, failed verification, not registered."""
