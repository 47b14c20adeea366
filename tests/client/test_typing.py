"""`mypy --strict` on the installed client (var/client-venv's copy, tests/client/installed.py),
on clients/python/README.md's examples read in order as one program, on clients/python/examples/
and on typing_probe.py (what each method must be inferred as, sync and async). A deliberately
wrong snippet proves the check can fail. Also at run time: every async method is a coroutine
function and every method has its `.with_raw_response` twin."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import connect_client
import pytest

from tests import docs
from tests.client.installed import ROOT, SOURCE, site_packages

pytestmark = [pytest.mark.e2e]

HERE = Path(__file__).resolve().parent
# Names the README's examples leave to the reader (it says so where it uses them).
README_PRELUDE = '''from connect_client import Event


def handle(event: Event) -> None: ...


request_headers: dict[str, str] = {}
raw_body: bytes = b""
'''


def mypy(tmp_path: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    """`mypy --strict` with the installed `connect_client` on its path (a link to the clean
    venv's copy, so no other module of that venv is involved), run outside the repository."""
    path = tmp_path / "mypypath"  # the package is also named as a target by this path
    path.mkdir(exist_ok=True)
    link = path / "connect_client"
    if not link.exists():
        link.symlink_to(site_packages() / "connect_client", target_is_directory=True)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-version", "3.11", "--no-error-summary",
         "--cache-dir", str(ROOT / "var" / "mypy-cache"), *targets],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**os.environ, "MYPYPATH": str(path)},
    )


def readme_program(tmp_path: Path) -> Path:
    blocks = [b.text for b in docs.blocks(SOURCE / "README.md") if b.info == "python"]
    assert len(blocks) >= 8  # read, export, raw, errors, stream, poll, webhooks, verify, async
    program = tmp_path / "readme_examples.py"
    program.write_text(README_PRELUDE + "\n\n".join(blocks))
    return program


def test_mypy_strict_passes_on_the_package_the_readme_the_examples_and_the_probe(tmp_path):
    examples = sorted(str(p) for p in (SOURCE / "examples").glob("*.py"))
    assert len(examples) >= 4
    result = mypy(tmp_path, "mypypath/connect_client", str(readme_program(tmp_path)), *examples,
                  str(HERE / "typing_probe.py"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_can_fail(tmp_path):
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from connect_client import AsyncConnect, Connect\n"
        "text = Connect().transcripts.get('s', format='vtt')\n"
        "print(text.segments)\n"                      # an export is a str
        "async def f(client: AsyncConnect) -> None:\n"
        "    print(client.sessions.get('s').label)\n"  # not awaited: a coroutine has no label
    )
    result = mypy(tmp_path, str(wrong))
    assert result.returncode == 1
    assert '"str" has no attribute "segments"' in result.stdout
    assert '"Coroutine[Any, Any, Session]" has no attribute "label"' in result.stdout


def namespaces(client: object) -> dict[str, object]:
    found = {}
    for dotted in connect_client.OPERATIONS.values():
        owner, _, method = dotted.rpartition(".")
        target = client
        for name in owner.split("."):
            target = getattr(target, name)
        found[dotted] = (target, method)
    return found


def test_async_methods_are_coroutine_functions_and_each_has_a_raw_twin():
    sync = connect_client.Connect("http://connect.test", api_key="k")
    asynchronous = connect_client.AsyncConnect("http://connect.test", api_key="k")
    lazy = {"list", "search", "stream"}  # return a paginator or a stream: iterated, not awaited
    for dotted, (namespace, name) in namespaces(asynchronous).items():
        method = getattr(namespace, name)
        if name in lazy and not (dotted == "boards.list"):
            assert not inspect.iscoroutinefunction(method), dotted
        else:
            assert inspect.iscoroutinefunction(method), dotted
    for client in (sync, asynchronous):
        for dotted, (namespace, name) in namespaces(client).items():
            assert type(namespace).__name__.startswith("Async") == (client is asynchronous), dotted
            if name != "stream":
                assert callable(getattr(namespace.with_raw_response, name)), dotted
    sync.close()


def test_every_exception_class_is_exported():
    errors = connect_client.errors
    defined = {name for name, value in vars(errors).items()
               if isinstance(value, type) and issubclass(value, Exception) and value.__module__ == errors.__name__}
    assert set(errors.__all__) == defined
    assert all(getattr(connect_client, name) is getattr(errors, name) for name in defined)
