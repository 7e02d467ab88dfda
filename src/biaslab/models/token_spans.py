"""Find occurrences of target-word token sequences in a batch of input ids.

``pack_sequences`` turns the variable-length sequences into one tensor P [n, L] (padded with -1), so
the hook file stores a single tensor. ``span_mask(ids [b, t], P) -> bool [b, t]`` marks every position
covered by an occurrence of any sequence. For each sequence length ℓ present in P (m_ℓ sequences)::

    windows = ids.unfold(1, ℓ, 1)                 # [b, t-ℓ+1, ℓ]  all ℓ-grams of the input
    hit     = isin(key(windows), key(P_ℓ))        # [b, t-ℓ+1]     hash filter, O(b·t·ℓ + m_ℓ)
    hit[h]  = (windows[h] == P_ℓ).all(-1).any()   # exact check of the (few) candidate windows
    mask[:, j : j + t-ℓ+1] |= hit   for j < ℓ     # spread each match start over its ℓ positions

``key`` is a pair of polynomial hashes mod two 31-bit primes packed into one int64 (62 bits), so the
filter costs one ``isin`` per length instead of a [b, t, m, ℓ] comparison; candidates are then compared
exactly, so a hash collision can never mark a wrong position. Input ids < 0 (padding) never match.

Limitation: a match inside a longer word (``автомат`` + ``ника`` followed by ``ми``) also counts, as
token ids alone do not show word boundaries; for the benchmarks' job titles this is rare.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

_PRIMES = (2_147_483_647, 2_147_483_629)  # 2^31 - 1 and the next prime below it
_BASES = (1_000_003, 911_382_323)
VERIFY_CHUNK = 1024


def pack_sequences(sequences: Sequence[Sequence[int]]) -> torch.Tensor:
    """Sequences of token ids → LongTensor [n, L] right-padded with -1 (L = longest sequence)."""
    length = max((len(s) for s in sequences), default=1)
    packed = torch.full((len(sequences), length), -1, dtype=torch.long)
    for row, seq in enumerate(sequences):
        packed[row, : len(seq)] = torch.tensor(list(seq), dtype=torch.long)
    return packed


def _key(grams: torch.Tensor) -> torch.Tensor:
    """int64 [...] hash of the last dimension of ``grams`` [..., ℓ] (two 31-bit hashes packed)."""
    keys = []
    for prime, base in zip(_PRIMES, _BASES):
        h = torch.zeros(grams.shape[:-1], dtype=torch.long, device=grams.device)
        for j in range(grams.shape[-1]):
            h = torch.remainder(h * base + grams[..., j], prime)  # h < 2^31, base < 2^30: no overflow
        keys.append(h)
    return keys[0] * (1 << 31) + keys[1]


def _verify(windows: torch.Tensor, hit: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """Clear hash-filter hits whose window [ℓ] equals no row of ``group`` [m, ℓ] exactly."""
    where = hit.nonzero(as_tuple=True)
    candidates = windows[where]  # [h, ℓ]
    exact = torch.zeros(candidates.shape[0], dtype=torch.bool, device=hit.device)
    for start in range(0, candidates.shape[0], VERIFY_CHUNK):
        chunk = candidates[start : start + VERIFY_CHUNK]
        exact[start : start + VERIFY_CHUNK] = (chunk[:, None, :] == group[None]).all(-1).any(-1)
    hit = hit.clone()
    hit[where] = exact
    return hit


def span_mask(input_ids: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    """Bool, shaped like ``input_ids`` ([b, t] or [t]): positions inside an occurrence of a row of ``packed``."""
    ids = input_ids if input_ids.dim() == 2 else input_ids.reshape(1, -1)
    b, t = ids.shape
    mask = torch.zeros((b, t), dtype=torch.bool, device=ids.device)
    packed = packed.to(ids.device)
    lengths = (packed >= 0).sum(dim=1)  # [n]
    for ell in sorted(set(lengths.tolist())):
        if ell == 0 or ell > t:
            continue
        group = packed[lengths == ell, :ell]  # [m, ℓ]
        windows = ids.unfold(1, ell, 1)  # [b, t-ℓ+1, ℓ]
        hit = torch.isin(_key(windows), _key(group)) & (windows >= 0).all(-1)
        if not bool(hit.any()):
            continue
        hit = _verify(windows, hit, group)
        for j in range(ell):
            mask[:, j : j + t - ell + 1] |= hit
    return mask.reshape(input_ids.shape)
