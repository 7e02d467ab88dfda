"""A progress bar over scoring batches (tqdm), shown only when the caller gives a description."""

from __future__ import annotations


def progress(iterable, total: int, desc: str | None):
    if desc is None:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="batch", leave=False)
