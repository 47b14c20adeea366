"""Who imports whom among the apps, the engine and the project top: the per-app graph, upward
imports, circles and function-level imports, read from the source by tests/import_graph.py
(whose rules tests/test_import_graph.py checks; nothing is imported).

    .venv/bin/python bench/imports.py [--root DIR] [--packages apps engine connect]

`--root` reads another checkout (e.g. /work/main), so a before/after comparison comes from one
script; `--packages` names the top-level packages to read (an older checkout's engine lived in
connect/).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.import_graph import APP_ORDER, PACKAGES, ROOT, app_of, cycles, read, upward  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--packages", nargs="*", default=list(PACKAGES))
    args = parser.parse_args()
    graph = read(args.root.resolve(), args.packages)

    def order(app: str) -> tuple[int, str]:
        return APP_ORDER.get(app, 99), app

    print(f"# Import graph of {args.root}")
    print("\n## Per app (module- and function-level imports of other apps; ^ marks an upward one)")
    rising = {(app_of(e.source), app_of(e.target)) for e in upward(graph)}
    for app, targets in sorted(graph.app_edges().items(), key=lambda item: order(item[0])):
        named = [f"^{t}" if (app, t) in rising else t for t in sorted(targets, key=order)]
        print(f"{app:>11} -> {', '.join(named)}")
    print("\n## Upward imports (against tests/import_graph.py APP_ORDER)")
    for edge in upward(graph) or []:
        print(f"  {edge.source} -> {edge.target}{' (in a function)' if edge.in_function else ''}")
    print("\n## The engine's imports of apps")
    for edge in graph.edges:
        if app_of(edge.target) and edge.source.split(".")[0] != "apps" and "engine" in edge.source.split("."):
            print(f"  {edge.source} -> {edge.target}")
    print("\n## Circles between apps")
    for component in cycles(graph.app_edges()) or [["(none)"]]:
        print("  " + " <-> ".join(component))
    print("\n## Circles between files (function-level imports included)")
    for component in cycles(graph.module_edges()) or [["(none)"]]:
        print("  " + " <-> ".join(component))
    in_function = sorted((e.source, e.target) for e in graph.edges if e.in_function)
    print(f"\n## Function-level imports of our modules ({len(in_function)})")
    for source, target in in_function:
        print(f"  {source} -> {target}")


if __name__ == "__main__":
    main()
