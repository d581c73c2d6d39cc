"""No import circles: the graph of the package's modules (writer/ under its installed
name), every import counted, also those inside functions, as test_layers.py reads them,
has no cycle. A module imported by name through its package (`from . import x`) counts
as an edge to that module."""
import pytest

from package.test_layers import MODULES, PACKAGE, imported_modules

NAMES = {module for module, _, _ in MODULES}


def module_graph(modules=MODULES):
    """{module: the package's modules it imports}; an import names the longest module
    it reaches (`a.b.c` of `from a.b import c` where c is a module, else `a.b`)."""
    names = {module for module, _, _ in modules}
    graph = {}
    for module, path, is_package in modules:
        edges = set()
        for target, _ in imported_modules(module, path, is_package):
            if not target or target.split(".")[0] != PACKAGE:
                continue
            while target and target not in names:
                target = target.rpartition(".")[0]
            if target and target != module:
                edges.add(target)
        graph[module] = edges
    return graph


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm,
    iterative), each sorted."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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


def test_the_package_has_no_import_cycle():
    found = cycles(module_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set(), "c": {"b"}}, []),
    ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
])
def test_the_checker_finds_cycles(graph, expected):
    assert sorted(cycles(graph)) == expected


def test_the_checker_sees_an_import_inside_a_function():
    graph = module_graph()
    # format/internal/snapshots.py imports format/encode.py inside a function
    assert PACKAGE + ".format.encode" in graph[PACKAGE + ".format.internal.snapshots"]
