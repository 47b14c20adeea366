"""Who imports whom among the apps: the per-app graph, upward edges, module circles and the
function-level `from apps…` imports, read from the source with `ast` (nothing is imported).

    .venv/bin/python bench/imports.py [--root DIR] [--modules PREFIX ...]

`--root` reads another checkout (e.g. /work/main) so a before/after comparison comes from one
script. `--modules` also lists the module-level edges of the modules under those prefixes
(e.g. `apps.access apps.tenancy`).

The layer order is docs/decisions/authentication.md "One doorkeeper": an import from a lower layer into a
higher one is upward. Imports under `if TYPE_CHECKING:` are not counted (they never run).
`ALLOWED_UPWARD` names the module-level exceptions the decisions justify.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

# Lower number = lower layer; equal numbers may not import each other either way.
LAYERS = {
    "core": 0,
    "tenancy": 1,
    "oauth": 2,
    "access": 3,
    "recordings": 4,
    "events": 5,
    "mcp": 6,
    "webhooks": 6,
}
# (importing module prefix, imported app): HTTP edges of a lower app that use the doorkeeper's
# pure rules (docs/decisions/authentication.md "One doorkeeper"), and
# recordings' services write each change's event into the outbox in the same transaction
# (docs/decisions/event-log.md "Layering: the outbox under the services").
ALLOWED_UPWARD = {("apps.oauth.views", "access"), ("apps.recordings.services", "events")}


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(tree: ast.Module, module: str) -> list[tuple[str, bool]]:
    """(imported module, at function level) for every `apps…` import that can run."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, in_function)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names if alias.name.startswith("apps."))
            elif isinstance(child, ast.ImportFrom) and child.module:
                name = child.module
                if child.level:
                    base = module.split(".")[: -child.level]
                    name = ".".join([*base, child.module])
                if name == "apps" or name.startswith("apps."):
                    if name.count(".") == 1:  # `from apps.x import y`: y may be a module
                        found.extend((f"{name}.{alias.name}", in_function) for alias in child.names)
                    else:
                        found.append((name, in_function))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def app_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "apps" else None


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10_000)

    def strong(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                strong(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
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

    for node in sorted(edges):
        if node not in index:
            strong(node)
    return found


def analyse(root: Path) -> dict:
    modules: dict[str, list[tuple[str, bool]]] = {}
    for path in sorted((root / "apps").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        name = module_name(root, path)
        modules[name] = imports_of(ast.parse(path.read_text(), str(path)), name)

    def resolve(target: str) -> str | None:
        # `from apps.x import name` names a module only when that module exists.
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    module_edges: dict[str, set[str]] = defaultdict(set)
    all_edges: dict[str, set[str]] = defaultdict(set)
    function_level: list[tuple[str, str]] = []
    for module, found in modules.items():
        for target, in_function in found:
            resolved = resolve(target)
            if resolved is None or resolved == module:
                continue
            all_edges[module].add(resolved)
            if in_function:
                function_level.append((module, resolved))
            else:
                module_edges[module].add(resolved)

    app_edges: dict[str, set[str]] = defaultdict(set)
    upward: list[tuple[str, str]] = []
    for module, targets in all_edges.items():
        source_app = app_of(module)
        for target in targets:
            target_app = app_of(target)
            if source_app is None or target_app is None or source_app == target_app:
                continue
            app_edges[source_app].add(target_app)
            low, high = LAYERS.get(source_app), LAYERS.get(target_app)
            if low is not None and high is not None and high >= low:
                if not any(module.startswith(prefix) and target_app == app for prefix, app in ALLOWED_UPWARD):
                    upward.append((module, target))
    return {
        "modules": modules,
        "module_edges": module_edges,
        "app_edges": app_edges,
        "upward": sorted(set(upward)),
        "module_cycles": cycles(module_edges),
        "cycles_with_function_imports": cycles(all_edges),
        "function_level": sorted(set(function_level)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--modules", nargs="*", default=[])
    args = parser.parse_args()
    result = analyse(args.root.resolve())

    print(f"# Import graph of {args.root}")
    print("\n## Per app (module- and function-level imports of other apps)")
    for app in sorted(result["app_edges"], key=lambda a: (LAYERS.get(a, 99), a)):
        print(f"{app:>11} -> {', '.join(sorted(result['app_edges'][app], key=lambda a: (LAYERS.get(a, 99), a)))}")
    print("\n## Upward imports (against the layer order)")
    for module, target in result["upward"] or [("(none)", "")]:
        print(f"  {module} -> {target}" if target else f"  {module}")
    print("\n## Module circles held by module-level imports")
    for component in result["module_cycles"] or [["(none)"]]:
        print("  " + " <-> ".join(component))
    print("\n## Module circles once function-level imports count too")
    for component in result["cycles_with_function_imports"] or [["(none)"]]:
        print("  " + " <-> ".join(component))
    print(f"\n## Function-level `from apps…` imports ({len(result['function_level'])})")
    for module, target in result["function_level"]:
        print(f"  {module} -> {target}")
    if args.modules:
        print("\n## Module-level edges of " + ", ".join(args.modules))
        for module in sorted(result["modules"]):
            if any(module == p or module.startswith(p + ".") for p in args.modules):
                targets = sorted(result["module_edges"].get(module, ()))
                print(f"  {module} -> {', '.join(targets) or '-'}")


if __name__ == "__main__":
    main()
