"""Write outputs all-or-nothing and durably: to a temporary sibling, fsync, then rename into place.

A stage that fails half-way must leave no partial DVC output behind, so every output file or
directory is produced through these helpers. Three guarantees:

* **All or nothing.** The body writes a temporary sibling; only a body that returns renames it over the
  final name (``os.replace``, atomic on one filesystem).
* **Durable.** Before the rename the temporary's bytes (every file of a temporary folder) are fsynced, and
  after it the parent folder is fsynced, so a power loss cannot leave an empty or truncated file under the
  final name, nor lose the rename itself.
* **No litter after a kill.** A temporary is named ``.<name>.~tmp~<writer>~<random>`` where ``<writer>`` is
  :func:`writer_token` (host, pid, process start time). A SIGKILL'd writer cannot clean up, so the next
  write of the same output removes the siblings whose writer is gone: on this host, a process that no longer
  exists (pid and start time both checked, so a reused pid does not count); on another host (a shared
  folder), one untouched for :data:`FOREIGN_STALE_SECONDS`. A live writer's temporary is never touched, so
  two workers writing the same output at once do not disturb each other.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

TMP_MARK = "~tmp~"
OLD_MARK = "~old~"
FOREIGN_STALE_SECONDS = 24 * 3600
"""A temporary written by another host is removed once it is this old (its writer's liveness is unknowable here)."""


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), or ``"0"`` off Linux."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "0"
    return stat.rsplit(")", 1)[1].split()[19]


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname()) or "host"


def writer_token(pid: int | None = None) -> str:
    """``<host>~<pid>~<start time>``: names a process uniquely across pid reuse (see :func:`writer_alive`)."""
    pid = os.getpid() if pid is None else pid
    return f"{_host()}~{pid}~{_start_time(pid)}"


def writer_alive(token: str) -> bool | None:
    """Whether the process a :func:`writer_token` names still runs: True/False on this host, None on another."""
    try:
        host, pid_text, start = token.split("~")
        pid = int(pid_text)
    except ValueError:
        return None
    if host != _host():
        return None
    if pid == os.getpid():
        return start == _start_time(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    return start == "0" or _start_time(pid) == start


_TEMP = re.compile(rf"^\.(?P<name>.+)\.(?:{TMP_MARK}|{OLD_MARK})(?P<writer>[^~]+~\d+~\d+)~")


def clean_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary siblings of ``path`` left by writers that are gone; returns what was removed."""
    path = Path(path)
    removed: list[Path] = []
    if not path.parent.is_dir():
        return removed
    prefix = f".{path.name}."
    for sibling in path.parent.iterdir():
        if not sibling.name.startswith(prefix):
            continue
        match = _TEMP.match(sibling.name)
        if match is None or match["name"] != path.name:
            continue
        alive = writer_alive(match["writer"])
        if alive is None:
            with contextlib.suppress(OSError):
                alive = time.time() - sibling.lstat().st_mtime < FOREIGN_STALE_SECONDS
        if alive is False:
            if sibling.is_dir() and not sibling.is_symlink():
                shutil.rmtree(sibling, ignore_errors=True)
            else:
                sibling.unlink(missing_ok=True)
            removed.append(sibling)
    return removed


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: str | os.PathLike[str]) -> None:
    """fsync a file, or every file and folder under a folder (its entries too), so its bytes are on disk."""
    path = Path(path)
    if path.is_dir():
        for folder, _, files in os.walk(path):
            for name in files:
                if not os.path.islink(os.path.join(folder, name)):
                    _fsync_path(Path(folder, name))
            _fsync_path(Path(folder))
    else:
        _fsync_path(path)


def _temp_prefix(path: Path, mark: str) -> str:
    return f".{path.name}.{mark}{writer_token()}~"


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``path`` only if the body succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(path, TMP_MARK), dir=path.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o755)  # mkdtemp creates 0700; outputs should be readable like any other directory
        fsync_tree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if path.exists():
        old = Path(tempfile.mkdtemp(prefix=_temp_prefix(path, OLD_MARK), dir=path.parent))
        os.replace(path, old / path.name)
        os.replace(tmp, path)
        _fsync_path(path.parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)
        _fsync_path(path.parent)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` (same suffix) that replaces ``path`` if the body succeeds.

    The temporary name is unique per call (``mkstemp``), so two processes writing the same output -
    two tuning workers saving the Pareto plot - never rename each other's half-written file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temporaries(path)
    fd, name = tempfile.mkstemp(prefix=_temp_prefix(path, TMP_MARK), suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; outputs should be readable like any other file
        _fsync_path(tmp)
        os.replace(tmp, path)
        _fsync_path(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def remove_outputs(*paths: str | os.PathLike[str]) -> None:
    """Delete stale outputs before a stage starts, so a failure cannot leave an old file looking new."""
    for p in map(Path, paths):
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
