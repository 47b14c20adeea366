"""The documentation as tests read it: fenced blocks (by file and info string), inline code
spans and indented command lines of README.md, docs/*.md and bench/README.md. The one place
that parses our Markdown; tests that run a documented snippet take it from here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(`{3,}|~{3,})(.*)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    info: str  # the info string: "sh", "python client", "" …
    text: str

    @property
    def name(self) -> str:
        """How the inventory names a block: page, info string and first line."""
        first = next((line for line in self.text.splitlines() if line.strip()), "")
        return f"{self.path.relative_to(ROOT)} ```{self.info} {first.strip()}"


def _split(path: Path) -> tuple[list[Block], str]:
    """The fenced blocks of a page and its text outside them (fences blanked, lines kept)."""
    blocks: list[Block] = []
    prose: list[str] = []
    fence, info, start, body = None, "", 0, []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if fence is None:
            match = FENCE.match(line)
            if match:
                fence, info, start, body = match.group(1), match.group(2).strip(), number, []
                prose.append("")
            else:
                prose.append(line)
        elif line.strip() == fence:
            blocks.append(Block(path, start, info, "\n".join(body) + "\n"))
            fence = None
            prose.append("")
        else:
            body.append(line)
            prose.append("")
    assert fence is None, f"{path}:{start}: unclosed fence"
    return blocks, "\n".join(prose)


def blocks(path: Path) -> list[Block]:
    return _split(path)[0]


def prose(path: Path) -> str:
    return _split(path)[1]


def block(path: Path, info: str) -> str:
    """The text of the one fenced block of `path` whose info string is `info`."""
    [found] = [b for b in blocks(path) if b.info == info]
    return found.text


def run_block(path: Path, info: str, *, name: str, replace: dict[str, str] | None = None) -> ModuleType:
    """Execute a python block as a module named `name`, after the reader's substitutions."""
    code = block(path, info)
    for old, new in (replace or {}).items():
        assert old in code, f"{path} ```{info}: no {old!r} to substitute"
        code = code.replace(old, new)
    module = ModuleType(name)
    exec(compile(code, str(path), "exec"), module.__dict__)  # noqa: S102 - our own documentation
    return module


def code_spans(path: Path) -> list[str]:
    """Inline code spans outside fenced blocks, whitespace (line breaks) collapsed."""
    return [" ".join(m.group(1).split()) for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", prose(path))]


def indented_lines(path: Path) -> list[str]:
    """Indented (4 spaces) code lines after a blank line, outside lists: commands shown that way."""
    lines = prose(path).splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.startswith("    ") and line.strip() and (not lines[i - 1].strip() or lines[i - 1] in found):
            found.append(line)
    return [line.strip() for line in found]
