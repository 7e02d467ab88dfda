"""Calibration logic: detection by disjoint CIs in the expected direction, removed share, the report."""

from __future__ import annotations

import pytest

from biaslab.calibration import calibrate, detection_status, removal
from biaslab.metrics.values import MetricValue


def mv(value, low=None, high=None, direction="lower"):
    return MetricValue(value, direction, 0.0, low, high)


@pytest.mark.parametrize("planted, control, expected, status", [
    (mv(0.8, 0.7, 0.9), mv(0.2, 0.1, 0.3), "increase", "detected"),
    (mv(0.8, 0.25, 0.9), mv(0.2, 0.1, 0.3), "increase", "overlap"),
    (mv(0.2, 0.1, 0.3), mv(0.8, 0.7, 0.9), "increase", "wrong direction"),
    (mv(0.2, 0.1, 0.3), mv(0.8, 0.7, 0.9), "decrease", "detected"),
    (mv(0.8), mv(0.2, 0.1, 0.3), "increase", "no CI"),
    (None, mv(0.2, 0.1, 0.3), "increase", "missing"),
    (mv(float("nan"), 0.1, 0.2), mv(0.2, 0.1, 0.3), "increase", "missing"),
])
def test_detection_status(planted, control, expected, status):
    assert detection_status(planted, control, expected) == status


def test_removed_share_and_beyond_ci():
    base, control = mv(0.8, 0.7, 0.9), mv(0.2, 0.1, 0.3)
    r = removal("lora", "m", "increase", base, mv(0.35, 0.3, 0.4), control, planted_detected=True)
    assert r.share == pytest.approx((0.8 - 0.35) / (0.8 - 0.2)) and r.beyond_ci
    r = removal("soft", "m", "increase", base, mv(0.75, 0.65, 0.85), control, planted_detected=True)
    assert r.share == pytest.approx(0.05 / 0.6) and not r.beyond_ci
    r = removal("soft", "m", "decrease", mv(0.2, 0.1, 0.3), mv(0.5, 0.45, 0.55), mv(0.8, 0.7, 0.9), True)
    assert r.share == pytest.approx(0.5) and r.beyond_ci
    undefined = removal("lora", "m", "increase", base, mv(0.35, 0.3, 0.4), control, planted_detected=False)
    assert undefined.share is None and "not detected" in undefined.note


def test_report_counts_families_by_their_primary_metric():
    families = {"a": {"a/x": "increase", "a/y": "increase"}, "b": {"b/x": "decrease"}}
    base = {"a/x": mv(0.8, 0.7, 0.9), "a/y": mv(0.5, 0.0, 1.0), "b/x": mv(0.5, 0.4, 0.6), "q": mv(3.0, 2.9, 3.1)}
    control = {"a/x": mv(0.2, 0.1, 0.3), "a/y": mv(0.5, 0.0, 1.0), "b/x": mv(0.5, 0.4, 0.6), "q": mv(3.0, 2.9, 3.1)}
    variants = {"lora": {"a/x": mv(0.3, 0.25, 0.35), "q": mv(3.05, 3.0, 3.1)}}
    report = calibrate(families, ["a/x"], ["q"], base, control, variants, {"dose": 0.25})
    assert report.families_detected() == (1, 2)
    numbers = report.mlflow_metrics()
    assert numbers["calibration/detected/a/x"] == 1.0 and numbers["calibration/detected/a/y"] == 0.0
    assert numbers["calibration/removed/lora/a/x"] == pytest.approx(0.5 / 0.6)
    assert "**1 of 2 benchmark families detect the planted bias.**" in report.markdown
    assert "| lora | `a/x` |" in report.markdown and "83 %" in report.markdown
    assert [row["metric"] for row in report.table()] == ["a/x", "a/y", "b/x"]
