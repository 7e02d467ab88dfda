"""Calibration logic: detection by disjoint CIs in the expected direction, removed share, the report."""

from __future__ import annotations

import pytest

from biaslab.calibration.families import calibrate, detection_status, removal
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
    assert "**1 of 2 benchmark families detect the planted bias** (CIs apart). By the paired reading, 0 of 2." \
        in report.markdown
    assert "| lora | `a/x` |" in report.markdown and "83 %" in report.markdown
    assert [row["metric"] for row in report.table()] == ["a/x", "a/y", "b/x"]


@pytest.mark.parametrize("expected", ["increase", "decrease"])
def test_needed_is_the_effect_at_which_the_cis_separate(expected):
    """Asymmetric CIs: shifting the planted model by ``needed`` (plus or minus a hair) flips overlap/detected."""
    from biaslab.calibration.families import detect_all

    control = mv(0.50, 0.46, 0.53)  # half-widths 0.04 below, 0.03 above
    half_low, half_high = 0.02, 0.05  # the planted CI around its value

    def detection(value):
        planted = mv(value, value - half_low, value + half_high)
        return detect_all({"f": {"m": expected}}, {"m": planted}, {"m": control})[0]

    d = detection(0.51)
    needed = d.needed
    assert needed == pytest.approx(0.02 + 0.03 if expected == "increase" else -(0.05 + 0.04))
    assert d.status == "overlap"
    for eps, status in ((-1e-6, "overlap"), (1e-6, "detected")):
        shifted = detection(0.50 + needed + (eps if expected == "increase" else -eps))
        assert shifted.status == status and shifted.needed == pytest.approx(needed)
    no_ci = detect_all({"f": {"m": expected}}, {"m": mv(0.5)}, {"m": control})[0]
    assert no_ci.status == "no CI" and no_ci.needed is None


def test_report_shows_the_needed_effect():
    families = {"a": {"a/x": "increase"}}
    report = calibrate(families, [], [], {"a/x": mv(0.52, 0.49, 0.55)}, {"a/x": mv(0.50, 0.47, 0.53)}, {}, {})
    assert "| a | `a/x` | increase | 0.520 [0.490, 0.550] | 0.500 [0.470, 0.530] | +0.020 | +0.060 | overlap |" \
        in report.markdown
    assert report.table()[0]["needed"] == pytest.approx(0.06)
    assert report.mlflow_metrics()["calibration/needed/a/x"] == pytest.approx(0.06)


def pd_(value, low, high):
    from biaslab.metrics.paired import PairedDifference

    return PairedDifference(value, low, high, n=10, units=10)


@pytest.mark.parametrize("paired, expected, status", [
    (pd_(0.03, 0.004, 0.056), "increase", "detected"),
    (pd_(0.03, -0.004, 0.056), "increase", "includes 0"),
    (pd_(-0.03, -0.05, -0.01), "increase", "wrong direction"),
    (pd_(-0.03, -0.05, -0.01), "decrease", "detected"),
    (pd_(0.03, None, None), "increase", "no CI"),
    (None, "increase", "n/a"),
])
def test_paired_status(paired, expected, status):
    from biaslab.calibration.families import paired_status

    assert paired_status(paired, expected) == status


def test_a_family_can_be_detected_by_the_paired_reading_alone():
    """RuBia on the default run: CIs overlapping (needed +0.064), the paired CI above 0."""
    families = {"rubia": {"rubia/pro_share/gender": "increase"}, "crows": {"crows/x": "increase"}}
    base = {"rubia/pro_share/gender": mv(0.520, 0.488, 0.553), "crows/x": mv(0.477, 0.416, 0.538)}
    control = {"rubia/pro_share/gender": mv(0.490, 0.462, 0.522), "crows/x": mv(0.492, 0.431, 0.554)}
    paired = {"rubia/pro_share/gender": pd_(0.030, 0.004, 0.056), "crows/x": pd_(-0.015, -0.073, 0.050)}
    report = calibrate(families, [], [], base, control, {}, {}, paired)
    assert report.families_detected() == (0, 2) and report.families_detected_paired() == 1
    assert "**0 of 2 benchmark families detect the planted bias** (CIs apart). By the paired reading, 1 of 2." \
        in report.markdown
    assert "| overlap | +0.030 [+0.004, +0.056] | **detected** |" in report.markdown
    assert "| overlap | -0.015 [-0.073, +0.050] | includes 0 |" in report.markdown
    numbers = report.mlflow_metrics()
    assert numbers["calibration/families_detected_paired"] == 1.0
    assert numbers["calibration/paired_detected/rubia/pro_share/gender"] == 1.0
    assert numbers["calibration/paired_ci_low/rubia/pro_share/gender"] == pytest.approx(0.004)
    row = report.table()[0]
    assert row["paired_verdict"] == "detected" and row["paired_effect"] == pytest.approx(0.03)


def test_a_mitigation_s_paired_change_is_beyond_when_its_ci_is_on_the_control_s_side():
    """lora_clp_cda on the default run: half the group gap removed, CIs touching, the paired change below 0."""
    families = {"occ": {"occ/gap": "increase"}}
    base, control = {"occ/gap": mv(0.086, 0.059, 0.115)}, {"occ/gap": mv(0.005, -0.005, 0.013)}
    variants = {"cda": {"occ/gap": mv(0.045, 0.024, 0.069)}, "worse": {"occ/gap": mv(0.1, 0.08, 0.12)}}
    changes = {"cda": {"occ/gap": pd_(-0.041, -0.060, -0.022)}, "worse": {"occ/gap": pd_(0.014, 0.002, 0.026)}}
    report = calibrate(families, ["occ/gap"], [], base, control, variants, {}, None, changes)
    cda, worse = report.removals
    assert not cda.beyond_ci and cda.paired_beyond and not worse.paired_beyond
    assert "| 51 % | no | -0.041 [-0.060, -0.022] | yes |" in report.markdown
    assert "| +0.014 [+0.002, +0.026] | no |" in report.markdown
    numbers = report.mlflow_metrics()
    assert numbers["calibration/paired_beyond/cda/occ/gap"] == 1.0 and numbers["calibration/paired_beyond/worse/occ/gap"] == 0.0
    decrease = removal("v", "m", "decrease", mv(0.2), mv(0.5), mv(0.8), True, pd_(0.3, 0.1, 0.5))
    assert decrease.paired_beyond  # a decrease: the control is above, so variant − base > 0 moves towards it


def test_the_calibration_figure_shows_both_readings_per_family(tmp_path):
    """One row of panels per family: planted and control with CIs, then the paired difference around 0."""
    from biaslab.reporting.plots import calibration_figure, save_figure

    families = {"rubia": {"rubia/pro_share/gender": "increase", "rubia/other": "increase"},
                "crows": {"crows/x": "increase"}}
    base = {"rubia/pro_share/gender": mv(0.520, 0.488, 0.553), "crows/x": mv(0.477, 0.416, 0.538)}
    control = {"rubia/pro_share/gender": mv(0.490, 0.462, 0.522), "crows/x": mv(0.492, 0.431, 0.554)}
    paired = {"rubia/pro_share/gender": pd_(0.030, 0.004, 0.056)}
    report = calibrate(families, [], [], base, control, {}, {}, paired)
    rows = [row for row in report.table() if row["primary"]]
    fig = calibration_figure(rows)
    axes = fig.get_axes()
    assert len(axes) == 4  # two families x (values, paired difference)
    assert axes[0].get_title(loc="left") == "rubia/pro_share/gender: overlap"
    assert axes[1].get_title(loc="left") == "planted − control, paired: detected"
    assert axes[3].get_title(loc="left") == "planted − control, paired: n/a"  # crows: no paired reading given
    (marker,) = [line for line in axes[1].get_lines() if line.get_marker() == "s"]
    assert marker.get_xdata()[0] == pytest.approx(0.030)
    path = save_figure(fig, tmp_path / "families.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
