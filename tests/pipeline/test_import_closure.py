"""DVC code deps = import closure: a code change must re-run every stage whose code it changes.

For each stage of ``dvc.yaml`` (``python -m pipelines.<stage>``) the test
computes the set of files inside ``src/biaslab`` that the stage can execute: everything its script or module imports, statically,
anywhere in a file (lazy imports inside functions included), transitively, with every package
``__init__.py`` on the way; plus the modules imported by name (the benchmarks of ``evaluation.benchmarks.*.module``, the
converters of derived data files) and the files a module loads by path (the local ``evaluate`` metric
modules, the package's data specs). It fails when ``dvc.yaml`` misses one of them (a stale output ``dvc repro`` would never
rebuild) and when a ``src/`` dep covers a file outside the closure (a needless re-run, e.g. retraining
the base model because the CLI changed).

The failure message prints the deps the stage should list; ``python tests/pipeline/test_import_closure.py``
prints them for every stage, and ``… --write`` writes them into ``dvc.yaml`` (other deps are kept). A module that starts importing by name (``importlib.import_module``) or
loading files shipped with the package (``__file__``, ``importlib.resources``) must be declared in :data:`DYNAMIC_IMPORTS` /
:data:`LOADED_BY_PATH`, or the test fails, so the closure cannot silently become incomplete.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGE = "biaslab"
DVC = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
STAGE_CMD = re.compile(r"^python -m (?P<module>pipelines\.\w+)(\s|$)")
PIPELINES = "pipelines"
PACKAGES = {PACKAGE: SRC, PIPELINES: ROOT}
"""The two code roots a stage executes: the library (``src/biaslab``) and the stage layer (``pipelines/``)."""


def _benchmark_modules() -> set[str]:
    return {entry["module"] for entry in PARAMS["evaluation"]["benchmarks"].values()}


def _derived_file_converters() -> set[str]:
    from biaslab.data.sources import DERIVED

    return {derived.convert.partition(":")[0] for derived in DERIVED.values()}


DYNAMIC_IMPORTS: dict[str, Callable[[], set[str]]] = {
    "biaslab.benchmarks.registry": _benchmark_modules,  # load_benchmark(): evaluation.benchmarks.<name>.module
    "biaslab.data.sources": _derived_file_converters,  # DerivedFile.convert = "<module>:<function>"
    "biaslab.reporting.headlines": _benchmark_modules,  # each benchmark's headline metrics, modules named in params
    "biaslab.registry.package": set,  # transformers' pipeline classes, named by transformers: none of ours
}
"""Modules that import other modules by name, and the names they can import."""

LOADED_BY_PATH: dict[str, list[str]] = {
    "biaslab.metrics.classification": ["src/biaslab/metrics/modules"],  # evaluate.load(<folder>)
    "biaslab.data.sources": ["src/biaslab/data/specs"],  # packaged_path(): files committed as package data
    "biaslab.data.corpora": ["src/biaslab/data/specs/corpora"],  # the corpora recipes (<lang>.tsv)
    "biaslab.benchmarks.agreement.items": ["src/biaslab/benchmarks/agreement/data"],  # the minimal-pair templates
}
"""Modules that read files shipped in the package (``__file__``, ``importlib.resources``), and those files."""


@cache
def modules() -> dict[str, Path]:
    """``biaslab.x.y`` -> its file, for every module of the package."""
    found = {}
    for package, parent in PACKAGES.items():
        for path in sorted((parent / package).rglob("*.py")):
            parts = path.relative_to(parent).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def _ours(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in PACKAGES)


@cache
def imported_by(name: str, dynamic: bool = True) -> frozenset[str]:
    """Package modules that ``name`` imports anywhere in its file (absolute and relative imports), plus
    (``dynamic``) those it imports by name (:data:`DYNAMIC_IMPORTS`)."""
    path = modules()[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set(imports_in(path, package))
    if dynamic and name in DYNAMIC_IMPORTS:
        found |= DYNAMIC_IMPORTS[name]()
    return frozenset(m for m in found if _ours(m))


def imports_in(path: Path, package: str) -> set[str]:
    """Modules the file at ``path`` (a module of ``package``, or a script: ``package=""``) imports anywhere."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            submodules = {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules()}
            found |= submodules
            if len(submodules) < len(node.names):  # names defined in the module itself, not just its submodules
                found.add(base)  # (a submodule brings its packages anyway: see with_packages)
    return found


def with_packages(name: str) -> set[str]:
    """``name`` and every package above it (importing a module runs their ``__init__``)."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


def closure(entry: str) -> set[Path]:
    """Every file of ``src/biaslab`` that running ``entry`` (a module name, or a script's path) can execute or read."""
    seen: set[str] = set()
    if entry.endswith(".py"):
        todo = [m for m in imports_in(ROOT / entry, "") if _ours(m)]
    else:
        todo = [entry]
    while todo:
        name = todo.pop()
        for candidate in with_packages(name):
            if candidate in seen:
                continue
            if candidate not in modules():
                raise AssertionError(f"{name}: imports {candidate!r}, which is not a module of src/{PACKAGE} or {PIPELINES}/")
            seen.add(candidate)
            todo.extend(imported_by(candidate))
    files = {modules()[m] for m in seen}
    for name in seen & set(LOADED_BY_PATH):
        for rel in LOADED_BY_PATH[name]:
            files |= {p for p in (ROOT / rel).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    return files


def stage_bodies():
    for name, stage in DVC["stages"].items():
        yield name, stage.get("do", stage)


def stage_module(body: dict) -> str:
    """The stage's module: ``dvc.yaml`` runs ``python -m pipelines.<stage>``, so its code is one hop away."""
    match = STAGE_CMD.match(body["cmd"])
    assert match, f"cmd {body['cmd']!r} is not `python -m pipelines.<stage>`"
    return match.group("module")


def source_files(rel: str) -> set[Path]:
    path = ROOT / rel
    if path.is_dir():
        return {p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    return {path}


def _is_code(dep: str) -> bool:
    """A dep on code: a file or folder of ``src/`` or ``pipelines/``."""
    return dep.startswith(("src/", f"{PIPELINES}/")) or dep == PIPELINES


def room_deps(files: set[Path]) -> list[str]:
    """The code deps that cover ``files``: each *room* (a folder right under ``src/biaslab`` or ``pipelines``)
    the closure enters, as one folder dep, and each top-level file (the shared basics, a stage's own script).

    A room is one dep because the stages that enter it are the stages a change in it may affect; listing a
    room's files one by one made ``dvc.yaml`` mostly generated lists. The price is a re-run of a stage when a
    file of a room it enters but never executes changes; the guarantee kept is that every file a stage can
    execute is covered.
    """
    deps: set[str] = set()
    for path in files:
        for package, parent in PACKAGES.items():
            top = parent / package
            if path.is_relative_to(top):
                rel = path.relative_to(top)
                deps.add(str((top / rel.parts[0]).relative_to(ROOT)))
    # pipelines/ first, then the library; in each, files before rooms
    return sorted(deps, key=lambda d: (d.startswith("src/"), not d.endswith(".py"), d))


@pytest.mark.parametrize("stage", [name for name, _ in stage_bodies()])
def test_code_deps_are_the_import_closure(stage):
    body = dict(stage_bodies())[stage]
    needed = closure(stage_module(body))
    listed = [d for d in body.get("deps", []) if _is_code(d)]
    covered = set().union(*(source_files(d) for d in listed)) if listed else set()
    missing = sorted(str(p.relative_to(ROOT)) for p in needed - covered)
    needless = sorted(d for d in listed if not source_files(d) & needed)  # a room or file the stage never enters
    entry = stage_module(body)
    if entry.endswith(".py"):
        assert entry in body.get("deps", []), f"stage {stage}: dvc.yaml deps miss its own script {entry}"
    assert not missing and not needless and listed == room_deps(needed), (
        f"stage {stage}: dvc.yaml deps miss {missing} and list rooms or files it never enters {needless}; "
        f"list exactly: {room_deps(needed)}"
    )


def test_dynamic_imports_and_path_loads_are_declared():
    """A new importlib/``__file__`` use would escape the static closure: it must be declared above."""
    for name, path in modules().items():
        text = path.read_text(encoding="utf-8")
        if "import_module(" in text or "__import__(" in text:
            assert name in DYNAMIC_IMPORTS, f"{path}: imports by name; declare it in DYNAMIC_IMPORTS"
        if "__file__" in text or "resources.files(" in text:
            assert name in LOADED_BY_PATH, f"{path}: loads files by path; declare it in LOADED_BY_PATH"


def test_closure_follows_lazy_and_relative_imports(tmp_path, monkeypatch):
    """The walker itself: an import inside a function counts, ``from . import x`` resolves."""
    package = tmp_path / "src" / PACKAGE
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "stage.py").write_text("def run():\n    from biaslab.sub import lazy\n")
    (package / "sub" / "lazy.py").write_text("from . import helper\n")
    (package / "sub" / "helper.py").write_text("")
    (package / "unused.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path / "src")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGES", {PACKAGE: tmp_path / "src"})
    for cached in (modules, imported_by):
        cached.cache_clear()
    try:
        found = {p.relative_to(package).as_posix() for p in closure("biaslab.stage")}
    finally:
        for cached in (modules, imported_by):
            cached.cache_clear()
    assert found == {"__init__.py", "stage.py", "sub/__init__.py", "sub/lazy.py", "sub/helper.py"}


def _flow(items: list[str], indent: str, width: int = 118) -> list[str]:
    """``deps: [a, b, …]`` wrapped at ``width`` columns, continuation lines aligned after the bracket."""
    quoted = [f'"{i}"' if i.startswith("$") else i for i in items]
    lines, line = [], f"{indent}deps: ["
    pad = " " * len(line)
    for n, item in enumerate(quoted):
        piece = item + ("]" if n == len(quoted) - 1 else ",")
        if len(line) + len(piece) + 1 > width and not line.endswith("["):
            lines.append(line.rstrip())
            line = pad
        line += piece + " "
    return lines + [line.rstrip()]


def rewrite_dvc_yaml(path: Path = ROOT / "dvc.yaml") -> None:
    """Replace every stage's code deps in ``path`` by :func:`room_deps` (data deps kept first, in order).

    A stage's ``deps`` is one flow list: its data deps, then its code deps (the rooms and files of
    :func:`room_deps`), so a dozen rooms take two or three lines instead of one line each.
    """
    text = path.read_text(encoding="utf-8")
    lines, out, stage, i = text.split("\n"), [], None, 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"^  (\w+):$", line):
            stage = line.strip()[:-1]
        match = re.match(r"^(\s+)deps:(.*)$", line)
        if not match:
            out.append(line)
            i += 1
            continue
        indent, rest = match.group(1), match.group(2).strip()
        if rest.startswith("["):  # a flow list, possibly over several lines
            chunk = rest
            while not chunk.rstrip().endswith("]"):
                i += 1
                chunk += " " + lines[i].strip()
            items = yaml.safe_load(chunk)
            i += 1
        else:  # a block list
            items, i = [], i + 1
            while i < len(lines) and lines[i].startswith(indent + "  - "):
                items.append(lines[i].strip()[2:].split(" #")[0].strip())
                i += 1
        body = dict(stage_bodies())[stage]
        data = [d for d in items if not _is_code(str(d))]
        out += _flow(data + room_deps(closure(stage_module(body))), indent)
    path.write_text("\n".join(out), encoding="utf-8")


if __name__ == "__main__":  # print the code deps every stage should list; --write puts them into dvc.yaml
    if sys.argv[1:] == ["--write"]:
        rewrite_dvc_yaml()
    for name, body in stage_bodies():
        print(f"{name}: {room_deps(closure(stage_module(body)))}")
