"""`make test`'s two workers start on the longest test files at once: the list names files that exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from longest_files import LONGEST_FILES

TESTS = Path(__file__).resolve().parents[1]


def test_every_longest_file_exists_once():
    for name in LONGEST_FILES:
        found = list(TESTS.rglob(name))
        assert len(found) == 1, f"{name}: {len(found)} files under tests/ (renamed? update LONGEST_FILES)"


def test_the_longest_files_are_collected_first(request):
    collected = [item.path.name for item in request.session.items]
    if not set(LONGEST_FILES) <= set(collected):
        pytest.skip("a partial run (some files, -k): the longest files are not all collected")
    firsts = list(dict.fromkeys(collected))[: len(LONGEST_FILES)]
    assert firsts == list(LONGEST_FILES)


def test_make_test_keeps_the_collection_order_across_workers():
    """pytest-xdist's loadfile scheduler re-sorts files by their number of tests unless told not to
    (``--loadscope-reorder`` is its default), which puts the one-test repro files last whatever the collection
    order: `make test` must pass ``--no-loadscope-reorder`` with ``--dist loadfile``."""
    makefile = (TESTS.parent / "Makefile").read_text(encoding="utf-8")
    [command] = [line for line in makefile.splitlines() if "-m pytest" in line and "-n 2" in line]
    assert "--dist loadfile" in command and "--no-loadscope-reorder" in command, command
