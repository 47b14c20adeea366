"""What a server process leaves unimported (engine/daphne_worker.py): the deferred
modules load on first use and only then, drf-spectacular's schema machinery stays out until the
schema is asked for, and a live server that has answered every way in has mapped none of the
deferred libraries' shared objects."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from django.db import connection
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engine import daphne_worker
from tests import factories
from tests.servers import ROOT, cmdline_of, descendants, server_env, start, without_request_id

# A shared object each deferred library (or what only it brings) maps when it is imported.
SHARED_OBJECTS = {
    "yaml": "yaml/_yaml.",
    "cbor2": "cbor2/_cbor2.",
    "requests (charset-normalizer)": "charset_normalizer/",
    "django.test (Jinja2's MarkupSafe)": "markupsafe/_speedups.",
}


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package `deferme` on sys.path whose module code counts its runs in `deferme.runs`."""
    root = tmp_path / "deferme"
    root.mkdir()
    (root / "__init__.py").write_text(textwrap.dedent("""
        import time
        RUNS_FILE = __file__ + ".runs"
        with open(RUNS_FILE, "a") as f:
            f.write("x")
        time.sleep(0.05)  # long enough for a second thread to arrive while this runs
        value = 42
    """))
    (root / "sub.py").write_text("from deferme import value\nDOUBLE = value * 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield root
    for name in ("deferme", "deferme.sub"):
        sys.modules.pop(name, None)


def runs(root: Path) -> int:
    path = root / "__init__.py.runs"
    return len(path.read_text()) if path.exists() else 0


def test_a_deferred_module_runs_on_its_first_attribute_read_and_once(package):
    daphne_worker.defer("deferme")
    import deferme

    assert runs(package) == 0 and isinstance(deferme, daphne_worker.DeferredModule)
    assert deferme.value == 42
    assert runs(package) == 1 and type(deferme) is not daphne_worker.DeferredModule
    from deferme import value

    assert value == 42 and runs(package) == 1
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        deferme.missing  # noqa: B018


def test_importing_a_submodule_of_a_deferred_package_runs_the_package_first(package):
    daphne_worker.defer("deferme")
    from deferme import sub

    assert sub.DOUBLE == 84 and runs(package) == 1


def test_threads_reading_a_deferred_module_at_once_run_it_once(package):
    daphne_worker.defer("deferme")
    import deferme

    seen, errors = [], []

    def read():
        try:
            seen.append(deferme.value)
        except Exception as error:  # noqa: BLE001 - the test reports it
            errors.append(error)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and seen == [42] * 8 and runs(package) == 1


def test_deferring_an_imported_or_missing_module_changes_nothing():
    before = sys.modules["json"]
    daphne_worker.defer("json")
    daphne_worker.defer("no_such_module_here")
    assert sys.modules["json"] is before and "no_such_module_here" not in sys.modules


def test_settling_the_start_up_heap_freezes_what_exists_then():
    import gc

    before = gc.get_freeze_count()
    kept = [[] for _ in range(10)]  # containers the collector tracks, made since any earlier freeze
    try:
        daphne_worker.settle_start_up_heap()
        assert gc.get_freeze_count() >= before + len(kept)
    finally:
        if before == 0:
            gc.unfreeze()


PROBE = """
import json, sys
from engine import daphne_worker
daphne_worker.leave_unused_unimported()
import daphne.server  # what daphne's command line imports before the application
from connect.asgi import application
started = {
    "deferred": {name: type(sys.modules[name]).__name__ == "DeferredModule" for name in daphne_worker.DEFERRED},
    "loaded": [name for name in ("django.test", "jinja2", "unittest", "pycparser", "charset_normalizer", "urllib3",
                                 "rest_framework.test")
               if name in sys.modules and type(sys.modules[name]).__name__ != "DeferredModule"],
}
from drf_spectacular import plumbing
factory = plumbing.APIRequestFactory()
import rest_framework.test
started["factory"] = type(factory).__module__ + "." + type(factory).__name__
started["test_module_is_real"] = hasattr(rest_framework.test, "APIClient")
print(json.dumps(started))
"""


def test_a_server_process_starts_without_the_unused_libraries():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["deferred"] == {name: True for name in daphne_worker.DEFERRED}
    assert found["loaded"] == []
    # drf-spectacular's mock request factory, on its first call, is the real one.
    assert found["factory"] == "rest_framework.test.APIRequestFactory" and found["test_module_is_real"]


def mapped(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


async def one_mcp_call(url: str, key: str) -> str:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=20)
    async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        result = await client.call_tool("list_sessions", {"limit": 1})
        return result.content[0].text


def test_a_live_server_answers_every_way_in_without_mapping_the_deferred_libraries(
    django_db_setup, transactional_db, tmp_path, alice
):
    session = factories.session(alice.workspace, label="Imports", final=["we talk about imports"])
    key = factories.api_key(alice, factories.READ_SCOPES)
    server = start(tmp_path)
    try:
        with server.client(headers={"Authorization": f"Bearer {key}"}) as http:
            assert http.get("/api/v1/sessions").status_code == 200
            assert http.get(f"/api/v1/sessions/{session.id}/transcript").status_code == 200
            assert http.get("/api/v1/transcripts/search", params={"query": "imports"}).status_code == 200
            assert http.get("/.well-known/oauth-protected-resource").status_code == 200
            assert http.get("/admin/login/").status_code == 200
            with http.stream("GET", "/api/v1/events/stream", timeout=httpx.Timeout(10, read=10)) as stream:
                assert stream.status_code == 200
                next(stream.iter_raw())
        assert session.id in anyio.run(one_mcp_call, server.url, key)

        workers = [pid for pid in descendants(server.process.pid) if b"daphne" in cmdline_of(pid)]
        assert workers
        unused = dict(SHARED_OBJECTS)
        if connection.vendor == "postgresql":  # SQLite search's module names the driver only for types
            unused["sqlite3"] = "/_sqlite3."
        for pid in workers:
            maps = mapped(pid)
            assert [name for name, path in unused.items() if path in maps] == []

        # The schema and its page still work; they load drf-spectacular's machinery on demand.
        with server.client() as http:
            schema = http.get("/openapi.json")
            assert schema.status_code == 200
            assert {"bearerAuth", "oauth2"} <= set(schema.json()["components"]["securitySchemes"])
            assert http.get("/docs").status_code == 200
            refused = http.post("/openapi.json")
            assert refused.status_code == 405 and without_request_id(refused.json()) == {"error": "method_not_allowed"}
    finally:
        server.stop()
