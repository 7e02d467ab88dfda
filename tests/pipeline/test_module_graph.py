"""The module graph keeps its layers: stages on top, library code below, nothing importing back up.

* nothing but the ``__main__`` of a stage imports ``pipelines`` (no library code calls a stage);
* ``biaslab.outputs`` (file formats) imports no library code above it;
* no import cycles among the modules of ``src/biaslab`` (lazy imports inside functions count: a cycle
  hidden in a function is still two modules that cannot be understood, or changed, one without the other);
* stages own their MLflow runs: only the tracking layer (:data:`TRACKING_LAYER`) imports
  ``biaslab.tracking.runs``; domain code that logs as it goes gets a :class:`biaslab.run_log.RunLog` from its stage.
"""

from __future__ import annotations

from test_import_closure import imported_by, imports_in, modules

TRACKING = "biaslab.tracking.runs"
TRACKING_LAYER = (
    "pipelines",  # each stage opens its run and logs what the library returned
    "biaslab.cli",  # the user-facing commands (biaslab ui / promote / team ...) configure the store themselves
    "biaslab.registry.promotions",  # the promotion log: an MLflow experiment of its own, tagged as tracking tags it
    "biaslab.tracking.team",  # sets up a team server's experiments and permissions (the tracking experiment's tag)
)
"""Modules that may import :mod:`biaslab.tracking.runs` (see docs/design.md, "Who talks to MLflow")."""

OUTPUTS_MAY_IMPORT = ("biaslab.outputs", "biaslab.atomic", "biaslab.config", "biaslab.errors", "biaslab.metrics.values")


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_nothing_imports_the_stages():
    offenders = sorted(m for m in modules() if not _under(m, ("pipelines",))
                       and any(_under(i, ("pipelines",)) for i in imported_by(m)))
    assert not offenders, f"modules importing pipelines (stages are the top layer): {offenders}"


def test_file_formats_import_nothing_above_them():
    for name in modules():
        if _under(name, ("biaslab.outputs",)):
            above = sorted(i for i in imported_by(name) if not _under(i, OUTPUTS_MAY_IMPORT))
            assert not above, f"{name} imports {above}"


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its file (static, lazy ones included)."""
    names = modules()
    return {m: {i for i in imported_by(m, dynamic=False) if i in names and i != m} for m in names}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_finds_a_lazy_cycle_and_nothing_else():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set(), "f": {"g"}, "g": {"f"}}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["f", "g"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_module_graph_has_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles (move the shared name to the module it belongs to): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_a_lazy_import_is_an_edge_of_the_graph(tmp_path):
    # lexicon.build_lexicon once imported OWN_OCCUPATIONS from english.py inside the function, while english.py
    # imports lexicon at the top: a cycle only an edge for the lazy import shows
    module = tmp_path / "lexicon.py"
    module.write_text("import json\n\ndef build():\n    from biaslab.pretrain.planted.english import frames\n")
    assert "biaslab.pretrain.planted.english" in imports_in(module, "biaslab.pretrain.planted")


def test_only_the_tracking_layer_imports_tracking():
    offenders = sorted(m for m, imported in import_graph().items()
                       if TRACKING in imported and m != TRACKING and not _under(m, TRACKING_LAYER))
    assert not offenders, (f"domain modules importing {TRACKING} (a stage opens the run and logs what they return; "
                           f"pass a biaslab.run_log.RunLog to a loop that logs as it goes): {offenders}")


def test_every_tracking_layer_entry_still_uses_tracking():
    """The allow-list names no module that stopped needing it (an entry nobody needs is a door left open)."""
    graph = import_graph()
    for prefix in TRACKING_LAYER:
        users = [m for m in graph if _under(m, (prefix,)) and TRACKING in graph[m]]
        assert users, f"{prefix} no longer imports {TRACKING}: drop it from TRACKING_LAYER"
