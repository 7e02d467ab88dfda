"""Embedding rows on demand, in float64: what the subspace fit reads instead of the whole matrix.

The gender subspace needs the rows of a few hundred pair-word tokens; converting a [V, d] matrix to
float64 to read them costs 4x a bf16 model's embedding in memory (a 128k x 4096 vocabulary: 4 GiB).
:class:`EmbeddingRows` reads only the rows asked for - from a checkpoint's file or an in-memory
weight - converts them to float64 and keeps them for the next word that shares a token.
``rows[[i, j]]`` returns a numpy array [2, d], like indexing the full matrix would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


class EmbeddingRows:
    """``rows[ids] -> float64 ndarray [len(ids), d]``, reading each distinct row once."""

    def __init__(self, read: Callable[[list[int]], Any], dim: int):
        self._read = read  # ids -> tensor [n, d] in any dtype
        self.dim = dim
        self._cache: dict[int, np.ndarray] = {}

    @classmethod
    def from_weight(cls, weight: Any) -> "EmbeddingRows":
        """Rows of an in-memory ``[V, d]`` tensor."""
        import torch

        return cls(lambda ids: weight.detach()[torch.as_tensor(ids, dtype=torch.long)].cpu(), int(weight.shape[1]))

    @classmethod
    def from_checkpoint(cls, index: Any, key: str) -> "EmbeddingRows":
        """Rows of tensor ``key`` of a :class:`~biaslab.models.weights.index.SafetensorsIndex` (read from the file)."""
        return cls(lambda ids: index.read_rows(key, ids), int(index[key].shape[1]))

    def __getitem__(self, ids: Sequence[int]) -> np.ndarray:
        ids = [int(i) for i in ids]
        missing = sorted({i for i in ids if i not in self._cache})
        if missing:
            import torch

            block = self._read(missing).to(torch.float64).numpy()
            self._cache.update(zip(missing, block))
        if not ids:
            return np.empty((0, self.dim), dtype=np.float64)
        return np.stack([self._cache[i] for i in ids])

    @property
    def rows_read(self) -> int:
        return len(self._cache)
