"""No package of ours has import cycles between its modules (TYPE_CHECKING imports included).

A cycle such as framework/plugin.py <-> framework/session.py or runtime/api_view.py <->
runtime/service.py makes the import order matter and hides which module owns what; this lists
every strongly connected component of the module import graph of daemon, store and api (grimp,
the graph import-linter checks) and wants none.
"""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("daemon", "store", "api")


def import_cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """Groups of modules under `package` that import one another in a cycle (Tarjan's SCCs)."""
    modules = sorted(m for m in graph.modules if m == package or m.startswith(package + "."))
    inside = set(modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v) & inside):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group: list[str] = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for m in modules:
        if m not in index:
            visit(m)
    return cycles


def test_import_cycles_finds_a_cycle_in_a_graph_that_has_one() -> None:
    graph = grimp.ImportGraph()
    for m in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(m)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.a")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert import_cycles(graph, "pkg") == [["pkg.a", "pkg.b"]]


@pytest.mark.parametrize("package", PACKAGES)
def test_package_has_no_module_import_cycles(package: str) -> None:
    graph = grimp.build_graph(package, cache_dir=None)
    assert import_cycles(graph, package) == []
