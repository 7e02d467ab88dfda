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
