"""The module graph keeps its layers: stages on top, library code below, nothing importing back up.

* nothing but the ``__main__`` of a stage imports ``biaslab.stages`` (no library code calls a stage);
* ``biaslab.outputs`` (file formats) imports no library code above it;
"""

from __future__ import annotations

from test_import_closure import imported_by, modules

OUTPUTS_MAY_IMPORT = ("biaslab.outputs", "biaslab.atomic", "biaslab.config", "biaslab.errors", "biaslab.metrics.values")


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_nothing_imports_the_stages():
    offenders = sorted(m for m in modules() if not _under(m, ("biaslab.stages",))
                       and any(_under(i, ("biaslab.stages",)) for i in imported_by(m)))
    assert not offenders, f"modules importing biaslab.stages (stages are the top layer): {offenders}"


def test_file_formats_import_nothing_above_them():
    for name in modules():
        if _under(name, ("biaslab.outputs",)):
            above = sorted(i for i in imported_by(name) if not _under(i, OUTPUTS_MAY_IMPORT))
            assert not above, f"{name} imports {above}"
