"""Every `apps…`/`connect…`/`engine…` module named in an import statement — at module level or inside a
function, in the apps, the engine room, the benchmarks and the tests — exists. A function-level
import of a module that moved fails only when that function runs (bench/webhooks.py's fairness
phase did, after the doorkeeper took over authentication), so the check reads the source."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREES = ("apps", "connect", "engine", "bench", "tests", "clients")
OURS = ("apps", "connect", "engine")


def _exists(module: str) -> bool:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imported_modules(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def test_every_import_of_our_modules_names_one_that_exists():
    missing = []
    for top in TREES:
        for path in sorted((ROOT / top).rglob("*.py")) if (ROOT / top).is_dir() else ():
            if ".venv" in path.parts:
                continue
            for line, module in _imported_modules(ast.parse(path.read_text(), str(path))):
                if module.split(".")[0] in OURS and not _exists(module):
                    missing.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)
