"""Training curves as dvc plots files: one step,value CSV per series, sorted, exact values, atomic replace."""

from __future__ import annotations

from biaslab.outputs import curves


def test_write_read_round_trip_sorted_and_exact(tmp_path):
    series = {"train/loss": [(2, 0.1 + 0.2), (1, 5.5)], "val/ppl_uk": [(1, 300.0)]}
    folder = curves.write(tmp_path / "c", series)
    assert sorted(p.name for p in folder.iterdir()) == ["train_loss.csv", "val_ppl_uk.csv"]
    assert (folder / "train_loss.csv").read_text().splitlines() == ["step,value", "1,5.5", "2,0.30000000000000004"]
    assert curves.read(folder) == {"train_loss": [(1, 5.5), (2, 0.1 + 0.2)], "val_ppl_uk": [(1, 300.0)]}


def test_nothing_trained_leaves_the_header_and_old_files_go(tmp_path):
    curves.write(tmp_path / "c", {"val/ppl_en": [(1, 2.0)]})
    curves.write(tmp_path / "c", {})
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["train_loss.csv"]
    assert curves.read(tmp_path / "c") == {"train_loss": []}
