"""The model presets of docs/presets.md name only keys that exist, with values params.yaml accepts.

Every ``dvc exp run ... -S key=value`` of the preset section (docs/presets.md) is applied to a copy of
``params.yaml`` with DVC's own override code (``dvc.utils.hydra.apply_overrides``, what ``dvc exp run -S``
runs: Hydra's grammar, an unknown key is an error) and the result is validated by ``load_params`` (pydantic,
unknown keys and bad values are errors). The memory table is the output of ``bench/preset_memory.py``.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from biaslab.config import load_params

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "docs" / "presets.md").read_text(encoding="utf-8")  # the presets section (linked from README)
MODELS = ("Llama-3-8B-Instruct", "Mistral-7B-Instruct-v0.3", "Qwen2.5-7B-Instruct", "Gemma-2-9b-it", "XLM-R base")


def preset_section() -> str:
    start = README.index("### Presets: the papers' models")
    end = README.index("\n## ", start)
    return README[start:end]


def commands() -> dict[str, str]:
    """``{model: command}`` from the preset table's rows."""
    found = {}
    for line in preset_section().splitlines():
        match = re.match(r"\| ([^|]+?) \| `(dvc exp run [^`]+)` \|", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def overrides(command: str) -> list[str]:
    words = shlex.split(command)
    return [words[i + 1] for i, word in enumerate(words) if word == "-S"]


def apply(tmp_path: Path, sets: list[str]):
    from dvc.utils.hydra import apply_overrides

    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    apply_overrides(params, sets)
    return load_params(params), yaml.safe_load(params.read_text(encoding="utf-8"))


def test_every_paper_model_has_a_preset():
    assert sorted(commands()) == sorted(MODELS)


@pytest.mark.parametrize("model", MODELS)
def test_preset_overrides_are_valid_params(model, tmp_path):
    sets = overrides(commands()[model])
    params, raw = apply(tmp_path, sets)
    for item in sets:
        key, value = item.split("=", 1)
        section = raw
        for part in key.split("."):
            section = section[part]
        assert str(section).lower() == value.lower(), key  # the value landed where the key says
    assert params.model.source and re.fullmatch(r"[0-9a-f]{40}", params.model.revision)  # pinned to a commit


def test_every_override_in_the_section_is_a_valid_key(tmp_path):
    """Also the keys the prose suggests (``-S model.device_map=auto``, ``-S lora.quantization=4bit`` ...)."""
    suggested = re.findall(r"-S ([\w.]+=[\w.-]+)", preset_section())
    assert {s.split("=")[0] for s in suggested} >= {"model.device_map", "lora.quantization", "model.revision"}
    for item in suggested:
        apply(tmp_path, [item])


def test_a_misspelled_key_is_refused(tmp_path):
    from dvc.exceptions import InvalidArgumentError

    with pytest.raises(InvalidArgumentError):
        apply(tmp_path, ["lora.quantisation=4bit"])


@pytest.mark.slow
def test_memory_table_is_the_estimators_output():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import preset_memory
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert preset_memory.table() in preset_section()
    assert [p.name for p in preset_memory.PRESETS] == list(MODELS)
