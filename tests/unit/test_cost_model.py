"""The cost model of ``bench/architecture_runs.py --fit`` (issue 41 item 4): per stage, what grows with the model
and what does not, fitted through two sizes, and the 8 B prediction's three parts."""

from __future__ import annotations

import pytest

from tests.bench_scripts import load_bench_script

runs = load_bench_script("architecture_runs")

SMALL, LARGE = 10_000_000, 40_000_000  # parameters; the checkpoint is 4 bytes each (float32)


def record(parameters: int, stages: dict[str, tuple[float, float, float, float]]) -> dict:
    """A stored run: per stage (seconds, checkpoint passes read, written, resident copies of the model)."""
    ckpt = 4 * parameters
    other = 300_000_000  # what every stage reads whatever the model: Python's modules, the data
    return {"shape": "llama3", "n_parameters": parameters, "checkpoint_bytes": ckpt, "stages": {
        name: {"seconds": seconds, "read_bytes": other + read * ckpt, "written_bytes": 1_000 + written * ckpt,
               "peak_rss_bytes": 200_000_000 + resident * ckpt}
        for name, (seconds, read, written, resident) in stages.items()}}


def test_the_fit_separates_start_up_compute_and_checkpoint_passes():
    a, b = 30.0, 5e-6  # an evaluate: 30 s that do not grow, 5 CPU seconds per million parameters
    small = record(SMALL, {"evaluate@base": (a + b * SMALL, 0, 0, 1.8), "base_model": (10, 5, 2, 0),
                           "preflight": (7, 0, 0, 0)})
    large = record(LARGE, {"evaluate@base": (a + b * LARGE, 0, 0, 1.8), "base_model": (10, 5, 2, 0),
                           "preflight": (6, 0, 0, 0)})
    model = runs.fit([large, small])  # order does not matter
    assert model["evaluate@base"] == pytest.approx({"a": a, "b": b, "read": 0, "written": 0, "loads": 1})
    assert model["base_model"] == pytest.approx({"a": 10, "b": 0, "read": 5, "written": 2, "loads": 0})
    assert model["preflight"]["b"] == 0 and model["preflight"]["a"] == 7  # faster when larger: noise, not a slope


def test_the_prediction_has_a_fixed_part_compute_and_bytes():
    model = {"evaluate@base": {"a": 12.0, "b": 5e-6, "read": 0.0, "written": 0.0, "loads": 1.0},
             "base_model": {"a": 10.0, "b": 0.0, "read": 5.0, "written": 2.0, "loads": 0.0}}
    cpu = 100e9
    predicted = runs.predict_h100(model, cpu, parameters=8e9, startup_seconds=25, checkpoint_bytes=16e9,
                                  byte_rate=1.6e9)
    speedup = runs.H100_BF16_FLOPS * runs.H100_UTILISATION / cpu
    assert predicted["evaluate@base"] == pytest.approx({"fixed": 25.0,  # a model stage pays the GPU host's start-up
                                                        "compute": 5e-6 * 8e9 / speedup, "bytes": 10.0})
    assert predicted["base_model"] == pytest.approx({"fixed": 10.0, "compute": 0.0, "bytes": 70.0})
    sampled = runs.predict_h100(model, cpu, data_scale=4.0)["evaluate@base"]["compute"]
    assert sampled == pytest.approx(4 * runs.predict_h100(model, cpu)["evaluate@base"]["compute"])
