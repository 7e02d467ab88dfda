"""Progress bars that behave in logs.

On a terminal a bar is a normal tqdm bar. When stderr is not a terminal (``dvc repro > log``, CI, Docker)
a redrawn bar would become one log line per refresh - thousands of lines for the base model's steps or a
benchmark's batches - so a bar prints one plain line every ``BIASLAB_PROGRESS_SECONDS`` seconds (default
30) while it runs and one line when it ends, with tqdm's own counts, rate and ETA::

    base_model: 40/120 step [00:30<01:00, 1.33 step/s, loss=5.412]
    base_model: 120/120 step [01:31, 1.31 step/s, loss=4.870] done

:func:`quiet_library_bars` (called by every stage's entry point, before those libraries load) turns the
other libraries' bars off in that case: Hugging Face hub, datasets and transformers (weight loading,
dataset tokenising) and MLflow's artifact transfers - all short; our own bars cover the long loops.
Training with the transformers ``Trainer`` reports through :func:`trainer_callback` instead of the
Trainer's own bar or its one-dict-per-log-step printer.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

INTERVAL_ENV = "BIASLAB_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 30.0
# Environment variables that turn other libraries' bars into log-friendly ones (only set when unset)
_LIBRARY_ENV = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # huggingface_hub downloads and transformers (follows the hub)
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",  # datasets .map() (TRL tokenising every trial's data)
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",  # MLflow artifact up/downloads (registry, models)
}


def interval_seconds() -> float:
    """Seconds between two log lines of one bar (``BIASLAB_PROGRESS_SECONDS``, default 30)."""
    raw = os.environ.get(INTERVAL_ENV)
    if not raw:
        return DEFAULT_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"environment variable {INTERVAL_ENV}={raw!r}: expected a number of seconds") from None
    if value < 0:
        raise ValueError(f"environment variable {INTERVAL_ENV}={raw!r}: must be >= 0")
    return value


def interactive(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (default stderr, where bars go) is a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced stream
        return False


def quiet_library_bars(stream: TextIO | None = None) -> None:
    """Make other libraries' bars log-friendly when ``stream`` is not a terminal (env, before they load)."""
    if interactive(stream):
        return
    for key, value in _LIBRARY_ENV.items():
        os.environ.setdefault(key, value)


class LogLineBar:
    """A progress bar for logs: one full line per ``interval`` seconds and one at the end, never ``\\r``.

    Implements the part of tqdm's interface used here (iteration, ``update``, ``set_postfix``,
    ``set_description``, ``close``, context manager); the text is tqdm's ``format_meter``.
    """

    def __init__(self, iterable: Iterable | None = None, *, total: int | None = None, desc: str | None = None,
                 unit: str = "it", interval: float | None = None, file: TextIO | None = None,
                 clock=time.monotonic) -> None:
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)
        self.total, self.desc, self.unit = total, desc, unit
        self.interval = interval_seconds() if interval is None else interval
        self.file = file
        self.n = 0
        self.postfix = ""
        self._clock = clock
        self._started = self._last = clock()
        self._closed = False

    # -- tqdm-like interface
    def __iter__(self) -> Iterator:
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()

    def __enter__(self) -> "LogLineBar":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self._clock()
        if now - self._last >= self.interval:
            self._last = now
            self._write(self.text(now))

    def set_postfix(self, ordered_dict: dict[str, Any] | None = None, refresh: bool = True, **kwargs: Any) -> None:
        items = {**(ordered_dict or {}), **kwargs}
        self.postfix = ", ".join(f"{k}={v}" for k, v in items.items())

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self.postfix = s

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc

    def write(self, text: str) -> None:
        self._write(text)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._write(self.text(self._clock()) + " done")

    # -- text
    def text(self, now: float) -> str:
        from tqdm import tqdm

        line = tqdm.format_meter(self.n, self.total, now - self._started, ncols=0, prefix=self.desc or "",
                                 unit=self.unit, postfix=self.postfix or None)
        return line.strip()

    def _write(self, line: str) -> None:
        stream = self.file if self.file is not None else sys.stderr
        stream.write(line + "\n")
        stream.flush()


def bar(iterable: Iterable | None = None, *, total: int | None = None, desc: str | None = None, unit: str = "it",
        leave: bool = True, disable: bool = False, file: TextIO | None = None) -> Any:
    """A tqdm bar on a terminal, a :class:`LogLineBar` otherwise; ``disable`` gives a silent pass-through."""
    if disable:
        return _Silent(iterable)
    if interactive(file):
        from tqdm.auto import tqdm

        return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, dynamic_ncols=True, file=file)
    return LogLineBar(iterable, total=total, desc=desc, unit=unit, file=file)


class _Silent:
    """What ``bar(disable=True)`` returns: iterates, accepts every call, prints nothing."""

    def __init__(self, iterable: Iterable | None) -> None:
        self.iterable = iterable

    def __iter__(self) -> Iterator:
        return iter(self.iterable)

    def __enter__(self) -> "_Silent":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def trainer_callback(desc: str = "train") -> Any:
    """A transformers ``TrainerCallback`` that shows training progress with :func:`bar`.

    Use with ``disable_tqdm=True`` and the Trainer's ``PrinterCallback`` removed (see
    :func:`use_for_trainer`): one bar over the optimizer steps with the latest loss, on a terminal or as
    periodic log lines.
    """
    from transformers import TrainerCallback

    class ProgressLines(TrainerCallback):
        def __init__(self) -> None:
            self.bar: Any = None

        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                self.bar = bar(total=state.max_steps, desc=desc, unit="step")
                self.bar.update(state.global_step)  # resumed runs start where the checkpoint ended

        def on_step_end(self, args, state, control, **kwargs):
            if self.bar is not None:
                self.bar.update(state.global_step - self.bar.n)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if self.bar is None or not logs:
                return
            shown = {k: f"{v:.4g}" for k, v in logs.items()
                     if k in ("loss", "eval_loss", "learning_rate") and isinstance(v, (int, float))}
            if shown:
                self.bar.set_postfix(shown)

        def on_train_end(self, args, state, control, **kwargs):
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    return ProgressLines()


def use_for_trainer(trainer: Any, desc: str = "train") -> None:
    """Replace a Trainer's progress output (its tqdm bar or, with ``disable_tqdm``, its dict printer) by ours."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(trainer_callback(desc))
