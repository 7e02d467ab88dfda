"""Write outputs all-or-nothing: to a temporary sibling, then rename into place.

A stage that fails half-way must leave no partial DVC output behind, so every output file or
directory is produced through these helpers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``path`` only if the body succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    os.chmod(tmp, 0o755)  # mkdtemp creates 0700; outputs should be readable like any other directory
    if path.exists():
        old = path.with_name(f".{path.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def remove_outputs(*paths: str | os.PathLike[str]) -> None:
    """Delete stale outputs before a stage starts, so a failure cannot leave an old file looking new."""
    for p in map(Path, paths):
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
