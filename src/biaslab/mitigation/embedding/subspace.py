"""The gender subspace of an embedding matrix (Bolukbasi et al. 2016, "doPCA"), in numpy.

1. Word vector ``w`` [d] = mean of the input-embedding rows of its sub-tokens, averaged over its two
   encodings (bare and with a leading space, see :mod:`.words`); optionally scaled to unit length
   (Bolukbasi normalise all vectors, so every pair weighs the same however frequent its tokens are).
2. Each pair (m, f) is centred on its own mean ``c = (m + f) / 2``, giving two rows ``m - c`` and
   ``f - c`` (= ±(m − f)/2) of a matrix C [2n, d]. Already centred per pair, so no global mean is removed.
3. SVD ``C = U S Vᵀ``; the basis B [k, d] is the first k rows of Vᵀ (orthonormal), and the explained
   variance ratio of component i is ``S_i² / Σ_j S_j²``.
4. Each basis row is signed so that the mean of ``(m − f) · b`` is positive (male direction positive),
   which makes the result deterministic across SVD implementations.

A pair is dropped (and reported) when a word encodes to nothing, or when both words have the same
vector (e.g. identical token sequences): it carries no gender direction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from biaslab.mitigation.embedding.words import WordEncoder


@dataclass
class GenderSubspace:
    basis: np.ndarray  # [k, d], orthonormal rows, float64
    explained_variance_ratio: np.ndarray  # [k]
    n_pairs: int  # pairs that contributed
    dropped: list[dict[str, str]] = field(default_factory=list)  # {"male", "female", "reason"}


def word_vector(embeddings: np.ndarray, encoder: WordEncoder, word: str) -> np.ndarray | None:
    """Mean sub-token row [d] of each encoding of ``word``, averaged over encodings; None if unencodable."""
    encodings = encoder.encodings(word)
    if not encodings:
        return None
    return np.mean([embeddings[list(ids)].mean(axis=0) for ids in encodings], axis=0)


def pca_basis(centred: np.ndarray, differences: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``n_components`` right singular vectors of ``centred`` [r, d] → (basis [k, d], explained ratio [k]).

    ``differences`` [n, d] (m − f) only fixes each component's sign.
    """
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    variance = s**2
    ratio = variance / variance.sum()
    basis = vt[:n_components].copy()
    signs = np.sign((differences @ basis.T).mean(axis=0))  # [k]
    basis *= np.where(signs == 0, 1.0, signs)[:, None]
    return basis, ratio[:n_components]


def gender_subspace(
    pairs: Sequence[tuple[str, str]],
    embeddings: np.ndarray,
    encoder: WordEncoder,
    n_components: int = 1,
    normalize: bool = True,
) -> GenderSubspace:
    """Fit the gender subspace of ``embeddings`` [V, d] from (male, female) word pairs."""
    rows: list[np.ndarray] = []
    diffs: list[np.ndarray] = []
    dropped: list[dict[str, str]] = []
    for male, female in pairs:
        m, f = word_vector(embeddings, encoder, male), word_vector(embeddings, encoder, female)
        if m is None or f is None:
            dropped.append({"male": male, "female": female, "reason": "a word encodes to no token"})
            continue
        if normalize:
            m, f = m / (np.linalg.norm(m) or 1.0), f / (np.linalg.norm(f) or 1.0)
        if np.allclose(m, f):
            dropped.append({"male": male, "female": female, "reason": "identical vectors"})
            continue
        centre = (m + f) / 2
        rows += [m - centre, f - centre]
        diffs.append(m - f)
    n_pairs = len(diffs)
    if n_pairs < n_components:
        raise ValueError(
            f"gender subspace: {n_pairs} usable pair(s) for n_components={n_components} "
            f"({len(dropped)} dropped); the rank of the pair matrix is at most the number of pairs"
        )
    basis, ratio = pca_basis(np.asarray(rows, dtype=np.float64), np.asarray(diffs, dtype=np.float64), n_components)
    return GenderSubspace(basis, ratio, n_pairs, dropped)
