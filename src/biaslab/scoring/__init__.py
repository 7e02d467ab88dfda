"""The one scoring engine: causal log-likelihood, masked pseudo-log-likelihood, short generation."""

from biaslab.scoring.requests import Request, Score, TokenRequest

__all__ = ["Request", "Score", "TokenRequest"]
