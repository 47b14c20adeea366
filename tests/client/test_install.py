"""`pip install ./clients/python` into a clean venv (tests/client/installed.py builds it) gives a
working client with its two declared dependencies and nothing of the server's: run from that
venv's own interpreter, against a live `serve`."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from tests import factories
from tests.client.installed import VENV, site_packages, venv_python

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def in_venv(code: str, **env: str) -> str:
    result = subprocess.run([str(venv_python()), "-c", code], capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", **env}, cwd=VENV)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_package_declares_httpx_and_pynacl_only_and_its_venv_is_consistent():
    requires = json.loads(in_venv(
        "import importlib.metadata as m, json; print(json.dumps(m.requires('connect-client')))"))
    assert sorted(r.split(">")[0].split("<")[0].split("=")[0] for r in requires) == ["PyNaCl", "httpx"]
    assert in_venv("import sys; print(sys.version_info >= (3, 10))").strip() == "True"
    check = subprocess.run([str(venv_python()), "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout
    assert not (site_packages() / "django").exists()  # nothing of the server's stack came along


def test_the_package_imports_nothing_but_the_standard_library_httpx_and_nacl():
    allowed = set(sys.stdlib_module_names) | {"httpx", "nacl", "connect_client"}
    for path in (site_packages() / "connect_client").rglob("*.py"):  # resources/ too
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"
    assert (site_packages() / "connect_client" / "resources" / "sessions.py").exists()  # the subpackage installed
    assert (site_packages() / "connect_client" / "py.typed").exists()


def test_the_installed_client_works_from_its_own_venv(live, acme, key):
    session = factories.session(acme, label="from the clean venv", final=["Hello there."])
    out = in_venv(
        "import os, connect_client\n"
        "c = connect_client.Connect(os.environ['URL'], api_key=os.environ['KEY'])\n"
        "[s] = list(c.sessions.list())\n"
        "t = c.transcripts.get(s.id)\n"
        "print(s.label, s.created_at.tzinfo, t.segments[0].text)\n",
        URL=live.url, KEY=key,
    )
    assert out.strip() == "from the clean venv UTC Hello there."
    assert session.id


def test_the_read_sessions_example_runs_from_the_clean_venv_configured_by_the_environment(live, acme, key):
    from tests.client.installed import SOURCE

    factories.session(acme, label="Example", final=["We agreed on the budget, then on the plan."])
    result = subprocess.run([str(venv_python()), str(SOURCE / "examples" / "read_sessions.py")], capture_output=True,
                            text=True, timeout=120, cwd=VENV,
                            env={"PATH": "/usr/bin:/bin", "CONNECT_BASE_URL": live.url, "CONNECT_API_KEY": key})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "completed  Example: 9 words" in lines[0]
    assert lines[1].startswith("  first cue: 1 | 00:00:00,000 --> ")
    assert lines[2].startswith("  200 then 304 (from cache: True), request req_")
    assert lines[3].startswith("404 not_found")
