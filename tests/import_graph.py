"""Who imports whom among our modules (apps/, engine/, connect/), read from the source with `ast`
(nothing is imported): each module's imports of ours, module- or function-level; the graph of
apps; upward imports against the app order; import circles. tests/test_import_graph.py states
the rules, bench/imports.py prints the graph.

Imports under `if TYPE_CHECKING:` are left out (they never run). Function-level imports count
like the others: an import moved into a function still runs, and a circle it closes is a
circle, only one found later.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("apps", "engine", "connect")

# The apps from the ground floor up: an app imports only apps of a lower number. The engine
# (engine/) is below every app and imports none; connect/ is the project's top.
APP_ORDER: dict[str, int] = {
    "core": 0,
    "tenancy": 1,
    "oauth": 2,
    "access": 3,
    "events": 4,
    "recordings": 5,
    "ingest": 6,
    "stream": 7,
    "webhooks": 7,
    # A door over the others: its listen streams run on the stream's hub, and its events
    # extension may deliver through the webhooks' machinery.
    "mcp": 8,
}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    in_function: bool


@dataclass
class Graph:
    modules: set[str] = field(default_factory=set)
    edges: list[Edge] = field(default_factory=list)

    def module_edges(self, *, function_level: bool = True) -> dict[str, set[str]]:
        found: dict[str, set[str]] = defaultdict(set)
        for edge in self.edges:
            if function_level or not edge.in_function:
                found[edge.source].add(edge.target)
        return found

    def app_edges(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = defaultdict(set)
        for edge in self.edges:
            source, target = app_of(edge.source), app_of(edge.target)
            if source and target and source != target:
                found[source].add(target)
        return found


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def app_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "apps" else None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(tree: ast.Module, module: str, *, is_package: bool = False,
               packages: Iterable[str] = PACKAGES) -> list[tuple[str, bool]]:
    """(imported name, at function level) for every import of one of ours (a module of
    `packages`) that can run; a name of `from package import name` is given as `package.name`
    (it may be a module)."""
    found: list[tuple[str, bool]] = []
    here = module.split(".") if is_package else module.split(".")[:-1]
    packages = tuple(packages)

    def ours(name: str) -> bool:
        return name.split(".")[0] in packages

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, in_function)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names if ours(alias.name))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join([*here[: len(here) - child.level + 1], *([base] if base else [])])
                if ours(base):
                    found.extend((f"{base}.{alias.name}", in_function) for alias in child.names)
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def read(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> Graph:
    """The import graph of every module under `packages` (migrations left out)."""
    sources: dict[str, tuple[Path, ast.Module]] = {}
    packages = tuple(packages)
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" not in path.parts:
                sources[module_name(root, path)] = (path, ast.parse(path.read_text(), str(path)))
    return graph_of({name: imports_of(tree, name, is_package=path.name == "__init__.py", packages=packages)
                     for name, (path, tree) in sources.items()})  # fmt: skip


def graph_of(imports: dict[str, list[tuple[str, bool]]]) -> Graph:
    """The graph from each module's imported names: a name resolves to the longest module of
    ours it names (`from apps.x.models import Thing` is an edge to apps.x.models)."""
    graph = Graph(modules=set(imports))

    def resolve(name: str) -> str | None:
        while name and name not in graph.modules:
            name = name.rpartition(".")[0]
        return name or None

    seen: set[Edge] = set()
    for module, names in imports.items():
        for name, in_function in names:
            target = resolve(name)
            # A package's import of its own submodule (`from apps.x import y` in apps/x/__init__)
            # resolves to itself: no edge.
            if target is None or target == module:
                continue
            edge = Edge(module, target, in_function)
            if edge not in seen:
                seen.add(edge)
                graph.edges.append(edge)
    return graph


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node, or one that imports itself
    (Tarjan's algorithm, iterative so that a deep graph needs no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    nodes = sorted(set(edges) | {t for targets in edges.values() for t in targets})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
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
                    if len(component) > 1 or node in edges.get(node, ()):
                        found.append(sorted(component))
    return sorted(found)


def upward(graph: Graph) -> list[Edge]:
    """Edges from an app to an app of the same or a higher number in APP_ORDER."""
    found = []
    for edge in graph.edges:
        source, target = app_of(edge.source), app_of(edge.target)
        if source and target and source != target and APP_ORDER[target] >= APP_ORDER[source]:
            found.append(edge)
    return found
