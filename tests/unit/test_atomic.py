"""Outputs appear whole or not at all, and concurrent writers never clobber each other's temp files."""

from __future__ import annotations

import pytest

from biaslab.atomic import atomic_dir, atomic_file, atomic_write_text


def test_a_failed_write_leaves_neither_output_nor_temp_file(tmp_path):
    target = tmp_path / "out" / "metrics.json"
    with pytest.raises(RuntimeError):
        with atomic_file(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed half-way")
    assert not target.exists()
    assert list((tmp_path / "out").iterdir()) == []


def test_two_open_writers_of_one_path_get_distinct_temp_files_and_the_last_one_wins(tmp_path):
    """Two tuning workers saving pareto_front.png at once: each renames its own temp file."""
    target = tmp_path / "pareto_front.png"
    with atomic_file(target) as first, atomic_file(target) as second:
        assert first != second and first.suffix == second.suffix == ".png"
        first.write_text("first")
        second.write_text("second")
    assert target.read_text() == "first"  # the outer context exits last
    assert [p.name for p in tmp_path.iterdir()] == ["pareto_front.png"]


def test_replacing_a_directory_keeps_no_leftovers(tmp_path):
    target = tmp_path / "model"
    for content in ("v1", "v2"):
        with atomic_dir(target) as tmp:
            (tmp / "weights.txt").write_text(content)
    assert (target / "weights.txt").read_text() == "v2"
    assert [p.name for p in tmp_path.iterdir()] == ["model"]
    atomic_write_text(tmp_path / "note.txt", "ok")
    assert (tmp_path / "note.txt").read_text() == "ok"


# --------------------------------------------------------------------------- crash hygiene (issue 37)
_KILLED_WRITER = r"""
import sys, time
from biaslab.atomic import atomic_dir, atomic_file
target, kind = sys.argv[1], sys.argv[2]
with (atomic_dir if kind == "dir" else atomic_file)(target) as tmp:
    if kind == "dir":
        (tmp / "weights.bin").write_bytes(b"half")
    else:
        tmp.write_bytes(b"half")
    print(tmp, flush=True)
    time.sleep(600)  # SIGKILL arrives here: no cleanup runs
"""


@pytest.mark.parametrize("kind", ["file", "dir"])
def test_a_sigkilled_writers_temporary_is_removed_at_the_next_write(tmp_path, kind):
    import os
    import signal
    import subprocess
    import sys

    target = tmp_path / ("model" if kind == "dir" else "metrics.json")
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(target), kind], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    leftover = tmp_path / os.path.basename(proc.stdout.readline().strip())
    assert leftover.exists()
    with atomic_file(tmp_path / "other.json") as tmp:  # a live writer of another output: untouched
        tmp.write_text("{}")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert leftover.exists()  # nothing cleans up after a SIGKILL ...
        with atomic_file(target) if kind == "file" else atomic_dir(target) as new:
            assert tmp.exists()  # ... the next write of the same output does, and only the dead writer's file
            assert not leftover.exists()
            (new / "weights.bin").write_bytes(b"whole") if kind == "dir" else new.write_bytes(b"whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, "other.json"])


def test_a_live_writers_temporary_is_kept_and_a_foreign_hosts_only_when_old(tmp_path):
    import os
    import time

    from biaslab.atomic import FOREIGN_STALE_SECONDS, clean_stale_temporaries

    target = tmp_path / "best_params.json"
    with atomic_file(target) as mine:
        fresh = tmp_path / ".best_params.json.~tmp~otherhost~123~456~abcdefgh.tmp.json"
        old = tmp_path / ".best_params.json.~tmp~otherhost~124~456~abcdefgh.tmp.json"
        unrelated = tmp_path / ".best_params.json.bak"
        for p in (fresh, old, unrelated):
            p.write_text("x")
        past = time.time() - FOREIGN_STALE_SECONDS - 60
        os.utime(old, (past, past))
        assert clean_stale_temporaries(target) == [old]
        assert mine.exists() and fresh.exists() and unrelated.exists()


def test_a_reused_pid_does_not_keep_a_dead_writers_temporary(tmp_path):
    """The writer token carries the process start time: our own pid with another start time is a dead writer."""
    import os

    from biaslab.atomic import clean_stale_temporaries, writer_token

    host, pid, start = writer_token().split("~")
    stale = tmp_path / f".x.json.~tmp~{host}~{pid}~{int(start) + 1}~abcdefgh.tmp.json"
    stale.write_text("x")
    assert clean_stale_temporaries(tmp_path / "x.json") == [stale]
    assert os.listdir(tmp_path) == []


def test_file_and_folder_are_fsynced_before_and_after_the_rename(tmp_path, monkeypatch):
    import os

    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    target = tmp_path / "metrics.json"
    atomic_write_text(target, "{}")
    assert len(synced) == 2
    assert ".metrics.json.~tmp~" in synced[0]  # the bytes, under the temporary name, before the rename
    assert synced[1] == str(tmp_path)  # the folder entry, after it
    synced.clear()
    with atomic_dir(tmp_path / "model") as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "w.bin").write_bytes(b"w")
    assert any(p.endswith("/sub/w.bin") and "~tmp~" in p for p in synced)
    assert synced[-1] == str(tmp_path)
