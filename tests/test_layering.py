"""The orchestrator's layers stay true: no import cycle between netarena's modules, and no layer imports one
above it (docs/architecture.md).

Every module under python/netarena is parsed (ast, nothing imported), its imports of netarena read wherever
they stand (at the top or inside a function: an import deferred into a function is still a dependency; only
those under `if TYPE_CHECKING:`, for annotations, are not), and each one mapped to a node: a top-level module
(netarena.runner) or a top-level package taken whole (netarena.backends, netarena.cluster, netarena.report,
netarena.plan, netarena.scenarios). Imports within one node are its own business.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "python" / "netarena"
ROOT = "netarena"  # the package itself (__version__): a node every layer may import

# The layers, lowest first: a node may import its own layer's nodes and those of the layers it names. A node
# not named here is in "core". A new module goes in the lowest layer that can hold it.
LAYERS: dict[str, set[str]] = {
    # What everything stands on: the catalog (scenarios, config, contestants, services, fixtures), the store,
    # statistics, processes and the machine (process, monitor, envinfo, doctor, spread, server_user), the
    # cluster's description (cluster: spec, certs, lab, netns). Imports nothing above it.
    "core": set(),
    # What a run will measure, planned before anything starts: a suite's plan and an external server's.
    "plan": {"plan"},
    # Reading the store and rendering it: reports and exports.
    "output": {"report", "export", "reference"},
    # Measuring one planned item: the backends, and the run's calibration (netarena-load's yardsticks).
    "measure": {"backends", "calibration"},
    # The run: install, measure the plan in rounds through a backend, store.
    "run": {"runner"},
    # The command line: the commands, the run modes, their shared parts.
    "commands": {"cli", "cli_common", "cli_report", "run_modes"},
    "entry": {"__main__"},
}
MAY_IMPORT: dict[str, set[str]] = {
    "core": {"core"},
    "plan": {"core", "plan"},
    "output": {"core", "output"},
    "measure": {"core", "plan", "measure"},
    "run": {"core", "plan", "measure", "run"},
    "commands": {"core", "plan", "output", "measure", "run", "commands"},
    "entry": {"commands"},
}
# Rules beyond the layers' order, each (importer, imported, why).
FORBIDDEN: list[tuple[str, str, str]] = [
    ("backends", "runner", "a backend measures one item for whichever runner calls it"),
    ("backends", "cli", "a backend knows nothing of the command line"),
    ("backends", "run_modes", "a backend knows nothing of the command line"),
    ("plan", "backends", "the plan says what to measure, not how"),
    ("report", "runner", "a report reads the store only"),
]


def layer_of(node: str) -> str:
    if node == ROOT:
        return "core"
    return next((layer for layer, nodes in LAYERS.items() if node in nodes), "core")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def node_of(module: str) -> str:
    """netarena.backends.real -> backends; netarena -> netarena."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def imports(modules: dict[str, Path]) -> dict[tuple[str, str], list[str]]:
    """(importing node, imported node) -> where ("netarena/backends/real.py:12"), for imports between nodes."""
    edges: dict[tuple[str, str], list[str]] = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        tree = ast.parse(path.read_text(), str(path))
        # Imports under `if TYPE_CHECKING:` are for annotations only: never run, they order nothing at import
        # time and carry no behaviour, so they are not edges (a type named in a signature, e.g. config.Request).
        type_only = {id(node) for block in ast.walk(tree)
                     if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                     for child in block.body for node in ast.walk(child)}
        for stmt in ast.walk(tree):
            if id(stmt) in type_only:
                continue
            if isinstance(stmt, ast.Import):
                targets = [alias.name for alias in stmt.names]
            elif isinstance(stmt, ast.ImportFrom):
                if stmt.level:
                    base = package[:len(package) - (stmt.level - 1)]
                    source = ".".join(base + ([stmt.module] if stmt.module else []))
                else:
                    source = stmt.module or ""
                # `from . import stats` imports the module netarena.stats; `from . import __version__` the package.
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                           for alias in stmt.names]
            else:
                continue
            for target in dict.fromkeys(targets):
                if target != ROOT and not target.startswith(ROOT + "."):
                    continue
                edge = (node_of(name), node_of(target))
                if edge[0] != edge[1]:
                    where = f"{path.relative_to(PACKAGE_DIR.parent)}:{stmt.lineno}"
                    edges.setdefault(edge, []).append(where)
    return edges


def cycles(edges) -> list[list[str]]:
    """One cycle (a, b, ..., a) per strongly connected group of nodes."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for group in groups:  # a shortest path back to the group's first node, by breadth-first search
        start = min(group)
        paths = {start: [start]}
        queue = [start]
        while queue:
            v = queue.pop(0)
            for w in sorted(graph[v] & group):
                if w == start:
                    queue = []
                    found.append(paths[v] + [start])
                    break
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    queue.append(w)
    return found


@pytest.fixture(scope="module")
def edges():
    modules = {module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}
    assert "netarena.cli" in modules
    return imports(modules)


def test_no_import_cycle_between_modules(edges):
    found = cycles(edges)
    assert not found, "import cycles between netarena's modules (break each: move what both need lower):\n" + \
        "\n".join(" -> ".join(cycle) + "\n    " + "\n    ".join(
            f"{a} -> {b}: {', '.join(edges[(a, b)][:3])}" for a, b in zip(cycle, cycle[1:])) for cycle in found)


def test_no_layer_imports_one_above_it(edges):
    wrong = [f"{a} ({layer_of(a)}) imports {b} ({layer_of(b)}): {', '.join(where[:3])}"
             for (a, b), where in sorted(edges.items()) if layer_of(b) not in MAY_IMPORT[layer_of(a)]]
    assert not wrong, "imports against the layers (tests/test_layering.py LAYERS, docs/architecture.md):\n" + \
        "\n".join(wrong)


def test_forbidden_imports(edges):
    wrong = [f"{a} imports {b} ({why}): {', '.join(edges[(a, b)][:3])}"
             for a, b, why in FORBIDDEN if (a, b) in edges]
    assert not wrong, "\n".join(wrong)


def test_the_table_names_real_modules():
    names = {module_name(p).split(".")[1] for p in PACKAGE_DIR.rglob("*.py") if module_name(p) != ROOT}
    named = set().union(*LAYERS.values()) | {n for rule in FORBIDDEN for n in rule[:2]}
    assert named <= names, f"the table names modules that do not exist: {sorted(named - names)}"


def test_a_cycle_and_an_upward_import_are_found():
    """The checks themselves: a made-up graph with a cycle through a backend and the runner."""
    edges = {("backends", "runner"): ["x.py:1"], ("runner", "backends"): ["y.py:2"], ("plan", "core_mod"): ["z.py:3"]}
    assert cycles(edges) == [["backends", "runner", "backends"]]
    assert layer_of("runner") not in MAY_IMPORT[layer_of("backends")]
