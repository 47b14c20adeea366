"""Docstrings and comments state invariants and why, never history: no benchmark figure, date,
issue or stop number, or branch name in the code of apps/ and the engine (those live in
docs/decisions/ and bench/results/, where they can be kept current). A module docstring is a
summary of at most 15 lines; a longer design discussion belongs in its decision record."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["apps", "engine", "connect"]
MODULE_DOCSTRING_LINES = 15

HISTORY = [
    (re.compile(r"\b(issues?|stops?)\s+\d+", re.I), "an issue or stop number"),
    # A run's time ("2026-11-28 07:20 UTC"); an example timestamp or a protocol revision is not history.
    (re.compile(r"\b20\d\d-[01]\d-[0-3]\d,? [0-2]\d:[0-5]\d\S* UTC"), "a date"),
    (re.compile(r"\d+(?:\.\d+)?\s*(?:ms|µs|us|MB|KB|GB|req/s|calls/s)?\s*(?:→|->)\s*\d+(?:\.\d+)?\s*"
                r"(?:ms|µs|us|MB|KB|GB|req/s|calls/s)"), "a before → after figure"),
    (re.compile(r"\d+\.\d+\s*(?:ms|µs|us|MB|KB|GB|req/s|calls/s)\b"), "a measured figure"),
    (re.compile(r"\d+(?:\.\d+)?\s*×"), "a ratio"),
    (re.compile(r"bench/README|bench/results"), "a pointer to a benchmark run"),
    (re.compile(r"\bh-[a-z]+\b"), "a branch name"),
]


def sources() -> list[Path]:
    files = []
    for package in PACKAGES:
        files += [p for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]
    return sorted(files)


def prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every docstring and comment in a module."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    found.append((body[0].lineno, body[0].value.value))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string))
    return found


def history_in(source: str) -> list[tuple[int, str, str]]:
    hits = []
    for line, text in prose(source):
        for pattern, what in HISTORY:
            match = pattern.search(text)
            if match:
                hits.append((line, what, match.group(0)))
    return hits


def test_the_check_finds_history():
    source = '"""Faster: 4.8 → 2.9 ms (issue 26, bench/README.md)."""\n# measured 1.3× on h-search\nx = 1\n'
    kinds = {what for _, what, _ in history_in(source)}
    assert kinds >= {"an issue or stop number", "a before → after figure", "a ratio", "a branch name",
                     "a pointer to a benchmark run"}
    assert history_in('"""A slot lives as long as its stream; a lease is 45 s."""\n') == []


def test_no_history_in_docstrings_or_comments():
    found = []
    for path in sources():
        for line, what, text in history_in(path.read_text()):
            found.append(f"{path.relative_to(ROOT)}:{line}: {what} ({text!r})")
    assert found == [], "\n".join(found)


def test_module_docstrings_are_summaries():
    long = []
    for path in sources():
        docstring = ast.get_docstring(ast.parse(path.read_text()))
        if docstring and docstring.count("\n") + 1 > MODULE_DOCSTRING_LINES:
            long.append(f"{path.relative_to(ROOT)}: {docstring.count(chr(10)) + 1} lines")
    assert long == [], "\n".join(long)
