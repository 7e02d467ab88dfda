"""Prefix sharing for the causal engine: which requests share a token prefix, and how groups are packed
into chunks of two forward passes under a token budget (see :mod:`biaslab.scoring.causal` for the whole
engine). Pure functions of token ids and budgets: no model, no torch."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from biaslab.scoring.requests import TokenRequest

PADDING_TOLERANCE = 0.1  # a chunk's rows may be left-padded by up to 10% (+2 tokens) of its longest prefix


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def fed_tokens(r: TokenRequest) -> tuple[int, ...]:
    """The tokens fed to the model: everything but the last (which is only predicted)."""
    return (r.context_ids + r.continuation_ids)[:-1]

def fed_length(r: TokenRequest) -> int:
    """``len(fed_tokens(r))`` without building the tuple (the chunk packing only needs lengths)."""
    return len(r.context_ids) + len(r.continuation_ids) - 1

def group_requests(requests: Sequence[TokenRequest], share_prefixes: bool = True,
                   min_shared_fraction: float = 0.0) -> list[tuple[int, list[int]]]:
    """Partition requests into groups that share a token prefix: ``[(prefix_length, members)]``.

    Requests are sorted by their fed tokens, so a group is a run of neighbours and its prefix is the
    smallest common prefix (LCP) between neighbours in the run. Grouping ``n`` requests on a prefix
    of ``s`` tokens saves ``(n - 1) x s`` tokens of work, less the padding of their suffixes to the
    longest one, so the partition maximises that sum, top-down: a run is either one group (on its smallest LCP ``v``) or split wherever the LCP is
    ``v``, each part partitioned the same way - whichever saves more. OccuGender's ~26 forms after
    one prompt form one group (``s`` = the prompt) rather than two prompts merging on a shared
    debiasing instruction; GBEM-UA's positive/negative sentences pair up on everything before "не".
    A group needs ``v >= 2`` tokens and ``v >= min_shared_fraction`` of its shortest member. A
    request without partner is a group of one whose prefix is its whole fed sequence: a plain row.
    """
    import numpy as np

    fed = [fed_tokens(r) for r in requests]
    if not share_prefixes or len(requests) < 2:
        return [(len(fed[i]), [i]) for i in range(len(requests))]
    order = sorted(range(len(requests)), key=lambda i: fed[i])
    lcp = np.array([common_prefix(fed[a], fed[b]) for a, b in zip(order, order[1:])])
    length = np.array([len(fed[i]) for i in order])

    # best[(lo, hi)] = (saving, runs) for order[lo:hi]; an explicit post-order traversal, because
    # runs nest as deep as the number of distinct LCP levels (no recursion-limit worries).
    best: dict[tuple[int, int], tuple[int, list[tuple[int, int]]]] = {}
    stack: list[tuple[int, int, bool]] = [(0, len(order), False)]
    while stack:
        lo, hi, expanded = stack.pop()
        if hi - lo == 1:
            best[(lo, hi)] = (0, [(lo, hi)])
            continue
        seg = lcp[lo : hi - 1]
        v = int(seg.min())
        cuts = [lo] + [lo + 1 + int(k) for k in np.flatnonzero(seg == v)] + [hi]
        parts = list(zip(cuts, cuts[1:]))
        if not expanded:
            stack.append((lo, hi, True))
            stack.extend((a, b, False) for a, b in parts if (a, b) not in best)
            continue
        split_saving = sum(best[p][0] for p in parts)
        allowed = v >= 2 and v >= min_shared_fraction * int(length[lo:hi].min())
        # the members' suffixes run right-padded to the longest one: padding is work too
        padding = int((length[lo:hi].max() - length[lo:hi]).sum())
        whole_saving = (hi - lo - 1) * v - padding if allowed else -1
        if whole_saving > split_saving:
            best[(lo, hi)] = (whole_saving, [(lo, hi)])
        else:
            best[(lo, hi)] = (split_saving, [run for p in parts for run in best.pop(p)[1]])
    groups = []
    for lo, hi in best[(0, len(order))][1]:
        shared = int(lcp[lo : hi - 1].min()) if hi - lo > 1 else int(length[lo])
        groups.append((shared, [order[k] for k in range(lo, hi)]))
    return groups

def pack_chunks(groups: list[tuple[int, list[int]]], requests: Sequence[TokenRequest], budget: int,
                kv_budget: int, max_rows: int | None = None) -> Iterator[list[tuple[int, list[int]]]]:
    """Pack groups (longest prefix first, so padding is small) into chunks of two forward passes.

    A chunk's prefix pass runs ``G x Wp`` tokens and its suffix pass ``R x Ws`` (R = members that go
    past their group's prefix), so their sum is what the token budget (``max_batch_tokens``) bounds -
    a prefix is paid once per group, not once per member. The suffix pass also attends over each
    member's gathered prefix KV (``R x (Wp + Ws)`` slots), bounded by :func:`biaslab.scoring.causal_budget.kv_slot_budget`. An
    explicit ``batch_size`` caps the rows of either pass. A group too large for one chunk is cut
    into pieces, each repeating the prefix. A chunk also ends before a group whose prefix is so much
    shorter than the chunk's longest that its left padding would waste more than
    ``PADDING_TOLERANCE`` of the row (plus two tokens): padded columns cost as much as real ones.
    """
    def fits(n_groups: int, wp: int, rows: int, ws: int) -> bool:
        within = n_groups * wp + rows * ws <= budget and rows * (wp + ws) <= kv_budget
        return within and (max_rows is None or max(rows, n_groups) <= max_rows)

    chunk: list[tuple[int, list[int]]] = []
    n_groups = wp = rows = ws = 0
    for shared, group in sorted(groups, key=lambda g: -g[0]):
        lengths = [fed_length(requests[i]) for i in group]
        w = max(lengths) - shared
        per_piece = len(group)
        while per_piece > 1 and not fits(1, shared, per_piece if w else 0, w):
            per_piece = (per_piece + 1) // 2
        for start in range(0, len(group), per_piece):
            piece = group[start : start + per_piece]
            past = sum(1 for n in lengths[start : start + per_piece] if n > shared)
            grown = (n_groups + 1, max(wp, shared), rows + past, max(ws, w))
            wasteful = wp - shared > 2 + PADDING_TOLERANCE * wp
            if chunk and (wasteful or not fits(*grown)):
                yield chunk
                chunk = []
                grown = (1, shared, past, w)
            chunk.append((shared, piece))
            n_groups, wp, rows, ws = grown
    if chunk:
        yield chunk
