"""Paths outside the pipeline's outputs resolve against the original workspace inside a DVC experiment copy."""

from __future__ import annotations

from pathlib import Path

from biaslab.config.workspace import origin_workspace, outside_path


def test_a_dvc_experiment_copy_resolves_to_the_workspace_it_was_queued_from(tmp_path):
    copy = tmp_path / ".dvc" / "tmp" / "exps" / "tmpa1b2c3"
    copy.mkdir(parents=True)
    assert origin_workspace(copy) == tmp_path
    assert outside_path("../shared/datasets", copy) == tmp_path / "../shared/datasets"
    assert outside_path("/data/datasets", copy) == Path("/data/datasets")  # absolute: as given


def test_anywhere_else_a_relative_path_is_left_as_it_was(tmp_path):
    assert origin_workspace(tmp_path) == tmp_path.resolve()
    assert outside_path("../shared/datasets", tmp_path) == Path("../shared/datasets")
    lookalike = tmp_path / "notdvc" / "tmp" / "exps" / "tmpx"  # the same tail without a .dvc folder
    lookalike.mkdir(parents=True)
    assert origin_workspace(lookalike) == lookalike
    (tmp_path / "x" / "tmp" / "exps" / "tmpy").mkdir(parents=True)
    assert origin_workspace(tmp_path / "x" / "tmp" / "exps" / "tmpy") == tmp_path / "x" / "tmp" / "exps" / "tmpy"
