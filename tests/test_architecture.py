"""The package's shape, as docs/ARCHITECTURE.md states it: layers that depend only downwards, and
no import cycles between modules.

The import graph is read from the source (``ast``), function-level imports included: an import
put inside a function to keep torch out of a light module is still a dependency, so it may not
point upwards or close a cycle either.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

from tests.helpers.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "equiv"

# Lower layers never import higher ones; a module may import its own layer and any below.
LAYERS: dict[str, int] = {
    "errors": 0, "devices": 0, "cache": 0, "backbones": 0, "registry": 0, "text": 0, "quiet": 0, "helptext": 0, "cliargs": 0,
    "fastexit": 0,  # the entry points' shutdown (gc.freeze at exit)
    "httpbounds": 0,  # the HTTP clients' deadline and answer cap (remote judge, llama.cpp, labeller)
    "rundir": 1,  # the run directory's files: below everything that reads or writes them
    "data": 2,
    "judge": 3,
    "labelling": 3,  # LLM labels for pairs (data.records below it); nothing in the package imports it
    "prune": 4,
    "search": 5,
    "serve": 5,  # beside search: serves a prune judge, imports no search module
    "adapters": 5,  # beside search: other frameworks' searches pruned by a prune judge
    "report": 6,
}

# Upward imports that are allowed, each for a reason.
EXCEPTIONS: set[tuple[str, str]] = set()  # none since compare moved into report (issue 67)


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=1)
def import_graph() -> dict[str, set[str]]:
    """Module -> the equiv modules it imports (anywhere in its source)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from equiv.prune import strategies` imports the submodule too
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            deps |= {r for t in targets if t.split(".")[0] == "equiv" and (r := resolve(t)) and r != name}
        graph[name] = deps
    return graph


def layer_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:  # the package itself
        return -1
    assert parts[1] in LAYERS, f"{module}: a new top-level part of equiv needs a layer in LAYERS"
    return LAYERS[parts[1]]


def test_the_graph_sees_every_module_and_function_level_imports():
    graph = import_graph()
    assert "equiv.search.runner" in graph and "equiv.prune.strategies" in graph["equiv.search.expansion"]
    # imported inside a function (torch only when a model judge is built), and still seen
    assert "equiv.judge.members" in graph["equiv.prune.model_judge"]


@pytest.mark.parametrize("layer", sorted(LAYERS, key=LAYERS.get))
def test_lower_layers_do_not_import_higher_ones(layer):
    graph = import_graph()
    mine = [m for m in graph if m.split(".")[1:2] == [layer]]
    assert mine, f"no modules in layer {layer}"
    upward = sorted(
        f"{m} imports {d}" for m in mine for d in graph[m]
        if layer_of(d) > LAYERS[layer] and (m, d) not in EXCEPTIONS
    )
    assert not upward, "\n".join(upward)


def test_every_exception_is_still_needed():
    graph = import_graph()
    assert all(d in graph[m] for m, d in EXCEPTIONS), "drop exceptions the code no longer needs"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of more than one module (iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
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


def test_no_import_cycles():
    assert strongly_connected(import_graph()) == []


def test_the_cycle_check_finds_a_cycle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
