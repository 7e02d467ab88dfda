"""The fingerprint cache: a directory's fingerprint remembered under its files' stat signature.

A model directory's fingerprint (:func:`biaslab.outputs.variant_dir.fingerprint_dir`) is a SHA-256 over every
byte of its model files; for an 8B checkpoint that is 16 GB read per call, and a run asks for the base
model's fingerprint in nearly every stage. This cache keeps ``signature -> fingerprint`` in a small SQLite
file, where the signature is, for the directory's resolved path and each fingerprinted file: its relative
path, device, inode, size, ``mtime_ns`` and ``ctime_ns``. Any change to a file that goes through the file
system - a rewrite (new mtime), a replacement (new inode), a rename, even a write whose mtime is then put
back with ``os.utime`` (that sets ``ctime`` to the present, and nobody can set ``ctime`` back) - gives
another signature, so the directory is hashed again.

What the key trusts: the kernel's ``ctime``. It cannot see bytes changed behind the file system's back
(a block device written directly, a clock set back while a file is edited, a network file system that
fakes times), and two writes within one timestamp tick can look alike - hence files changed within the
last :data:`RACY_SECONDS` are hashed but not remembered (git's "racily clean" rule) - unless the directory is
large (:data:`SETTLE_BYTES`), when the fingerprint first waits out that window and is remembered. That is sound for
*finding* a model (the tune study's name, a run's tags, the score cache); it is not a proof of content.
Whatever must prove that the bytes are what was recorded - the registry's package check, ``promote``'s
check of the champion copy - calls ``fingerprint_dir(..., verify=True)``, which reads every byte
(and refreshes the entry).

Where: ``$BIASLAB_FINGERPRINT_CACHE`` (a file path; ``off`` disables the cache), else
``$XDG_CACHE_HOME/biaslab/fingerprints.sqlite`` (``~/.cache/...``) - outside every model directory, so it
never changes a DVC output or a model's file list. A cache that cannot be opened or written (read-only
home, locked database) is skipped silently: the fingerprint is then computed, as without a cache.
One row per directory path (a new signature replaces the old one), so the file stays small.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

ENV = "BIASLAB_FINGERPRINT_CACHE"
RACY_SECONDS = 2.0
"""A file modified more recently than this is hashed but not remembered (two writes in one tick look alike)."""
SETTLE_BYTES = 512 * 2**20
"""A directory this large whose files were just written is worth waiting for: reading it takes longer than
:data:`RACY_SECONDS` (about 2 s at this project's measured 270 MB/s per SHA-256 pass), so waiting out the racy
window first (:func:`settle_seconds`) costs less than the next stage hashing it again. For an 8B checkpoint
that is one 16 GB pass saved per run: ``base_model`` fingerprints the files it has just written."""
_VERSION = 1  # part of every key: a change of the fingerprint's definition makes old entries unreachable


def cache_file() -> Path | None:
    """The cache's SQLite file, or ``None`` when ``$BIASLAB_FINGERPRINT_CACHE`` is ``off``."""
    value = os.environ.get(ENV)
    if value is not None:
        return None if value.strip().lower() in {"", "off", "0", "false", "none"} else Path(value)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "biaslab" / "fingerprints.sqlite"


def signature(directory: Path, files: Sequence[Path], extra: str = "") -> tuple[str, bool]:
    """``(key, stable)`` for ``files`` of ``directory``: the key of their stat signature, and whether every file
    is older than :data:`RACY_SECONDS` (only a stable signature may be stored)."""
    now = time.time_ns()
    rows, stable = [], True
    for file in files:
        st = file.stat()
        rows.append([file.relative_to(directory).as_posix(), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
                     st.st_ctime_ns])
        if now - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_SECONDS * 1e9:
            stable = False
    text = json.dumps([_VERSION, str(directory.resolve()), extra, rows])
    return hashlib.sha256(text.encode()).hexdigest(), stable


def settle_seconds(files: Sequence[Path]) -> float:
    """How long until every one of ``files`` is older than :data:`RACY_SECONDS` (0 when they all are)."""
    newest = max((max(f.stat().st_mtime_ns, f.stat().st_ctime_ns) for f in files), default=0)
    return max(0.0, RACY_SECONDS - (time.time_ns() - newest) / 1e9)


def worth_settling(files: Sequence[Path]) -> bool:
    """Whether ``files`` add up to :data:`SETTLE_BYTES` or more (see there)."""
    return sum(f.stat().st_size for f in files) >= SETTLE_BYTES


def _connect():
    import sqlite3

    path = cache_file()
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), timeout=10)
    db.execute("CREATE TABLE IF NOT EXISTS fingerprints "
               "(key TEXT PRIMARY KEY, directory TEXT NOT NULL, fingerprint TEXT NOT NULL, bytes INTEGER)")
    return db


def lookup(key: str) -> str | None:
    """The fingerprint remembered under ``key``; ``None`` when unknown or the cache is off/unusable."""
    import sqlite3

    try:
        db = _connect()
        if db is None:
            return None
        with db:
            row = db.execute("SELECT fingerprint FROM fingerprints WHERE key = ?", (key,)).fetchone()
        db.close()
        return row[0] if row else None
    except (sqlite3.Error, OSError):
        return None


def store(key: str, directory: Path, fingerprint: str, nbytes: int) -> None:
    """Remember ``fingerprint`` under ``key``, replacing the directory's older entries (best effort)."""
    import sqlite3

    try:
        db = _connect()
        if db is None:
            return
        with db:
            where = str(directory.resolve())
            db.execute("DELETE FROM fingerprints WHERE directory = ?", (where,))
            db.execute("INSERT OR REPLACE INTO fingerprints VALUES (?, ?, ?, ?)", (key, where, fingerprint, nbytes))
        db.close()
    except (sqlite3.Error, OSError):
        return
