"""A progress bar over scoring batches, shown only when the caller gives a description (see :mod:`biaslab.progress`)."""

from __future__ import annotations


def progress(iterable, total: int, desc: str | None):
    if desc is None:
        return iterable
    from biaslab.progress import bar

    return bar(iterable, total=total, desc=desc, unit="batch", leave=False)
