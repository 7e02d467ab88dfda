"""Progress bars in logs: one line per interval and one at the end (never a redraw per update), tqdm on a
terminal, other libraries' bars switched off when stderr is no terminal, and the Trainer callback."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest

from biaslab import progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_bar_prints_one_line_per_interval_and_a_last_line():
    out, clock = io.StringIO(), Clock()
    bar = progress.LogLineBar(total=1000, desc="base_model", unit="step", interval=30, file=out, clock=clock)
    for step in range(1000):  # 1000 updates over 100 s
        clock.now += 0.1
        bar.update(1)
        bar.set_postfix(loss=f"{5 - step / 1000:.3f}")
    bar.close()
    bar.close()  # idempotent
    lines = out.getvalue().splitlines()
    assert len(lines) == 4  # at 30 s, 60 s, 90 s, and the end
    assert "\r" not in out.getvalue()
    assert lines[0].startswith("base_model:") and "300/1000" in lines[0]
    assert lines[-1].endswith(" done") and "1000/1000" in lines[-1] and "loss=4.001" in lines[-1]


def test_log_bar_over_an_iterable_prints_only_its_end_when_fast():
    out = io.StringIO()
    items = list(progress.LogLineBar(range(7), desc="crows_pairs", unit="batch", interval=30, file=out,
                                     clock=lambda: 0.0))
    assert items == list(range(7))
    assert out.getvalue().splitlines() == [out.getvalue().strip()] and "7/7" in out.getvalue()


def test_bar_is_tqdm_on_a_terminal_and_log_lines_otherwise():
    from tqdm import tqdm

    tty = Tty()
    with progress.bar(total=3, desc="x", file=tty) as b:
        assert isinstance(b, tqdm)
        b.update(3)
    assert "\r" in tty.getvalue()  # a real redrawn bar
    log = io.StringIO()
    with progress.bar(total=3, desc="x", file=log) as b:
        assert isinstance(b, progress.LogLineBar)
        b.update(3)
    assert log.getvalue().count("\n") == 1
    silent = progress.bar(range(3), disable=True)
    assert list(silent) == [0, 1, 2] and silent.update(1) is None


def test_interval_from_environment(monkeypatch):
    monkeypatch.setenv(progress.INTERVAL_ENV, "5")
    assert progress.interval_seconds() == 5.0
    monkeypatch.setenv(progress.INTERVAL_ENV, "soon")
    with pytest.raises(ValueError, match="BIASLAB_PROGRESS_SECONDS='soon'"):
        progress.interval_seconds()


def test_library_bars_are_switched_off_only_without_a_terminal(monkeypatch):
    for key in progress._LIBRARY_ENV:
        monkeypatch.delenv(key, raising=False)
    progress.quiet_library_bars(Tty())
    assert all(key not in __import__("os").environ for key in progress._LIBRARY_ENV)
    progress.quiet_library_bars(io.StringIO())
    import os

    assert os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] == "1"
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")  # the user's own choice is kept
    progress.quiet_library_bars(io.StringIO())
    assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "0"


def test_trainer_callback_follows_steps_and_loss(monkeypatch, capsys):
    monkeypatch.setattr(progress, "interval_seconds", lambda: 0.0)  # a line per step
    callback = progress.trainer_callback("trial")
    state = SimpleNamespace(is_world_process_zero=True, max_steps=4, global_step=1)  # resumed at step 1
    callback.on_train_begin(None, state, None)
    for step in (2, 3, 4):
        state.global_step = step
        callback.on_step_end(None, state, None)
        callback.on_log(None, state, None, logs={"loss": 2.0 / step, "epoch": 1.0})
    callback.on_train_end(None, state, None)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("trial:") and "1/4" in lines[0]
    assert lines[-1].endswith(" done") and "4/4" in lines[-1] and "loss=0.5" in lines[-1]
    assert "epoch" not in lines[-1]
