"""Output paths are spelled once: ``biaslab.outputs.paths`` lists exactly the outs of every dvc.yaml stage."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from biaslab.config import load_params
from biaslab.outputs import paths

ROOT = Path(__file__).resolve().parents[2]
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))
PARAMS = load_params(ROOT / "params.yaml")


def declared_outputs(body: dict, item: str | None) -> set[str]:
    """``outs``, ``metrics`` and ``plots`` of one (expanded) stage, with ``${item}`` / ``${key}`` filled in."""
    found = set()
    for section in ("outs", "metrics", "plots"):
        for out in body.get(section, []):
            path = out if isinstance(out, str) else next(iter(out))
            found.add(path.replace("${item}", item or "").replace("${key}", item or ""))
    return found


def expanded_stages():
    for name, stage in DVC["stages"].items():
        if "foreach" not in stage:
            yield name, None, stage
            continue
        items = PARAMS.variants if stage["foreach"] == "${variants}" else stage["foreach"]
        for item in items:
            yield name, item, stage["do"]


@pytest.mark.parametrize("name,item,body", list(expanded_stages()),
                         ids=[f"{n}@{i}" if i else n for n, i, _ in expanded_stages()])
def test_stage_outputs_match_dvc_yaml(name, item, body):
    assert {str(p) for p in paths.stage_outputs(name, PARAMS, item)} == declared_outputs(body, item)


def test_report_files_are_under_reports():
    assert all(p.parts[0] == "reports" for p in paths.ReportFiles.under().all())
