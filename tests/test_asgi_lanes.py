"""How the live server runs Django's sync code (engine/lanes.py): on a few long-lived
threads per process, never one new thread per request, and a slow request does not hold up
a fast one."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.db import connection

pytestmark = [pytest.mark.e2e]


def test_requests_reuse_a_few_long_lived_threads(live_server_daphne, transactional_db):
    # Concurrent requests that hold their thread a moment: a thread per request would show
    # as many live threads as requests in flight (idents of finished threads get reused).
    def thread_of(_: int) -> int:
        return live_server_daphne.client().get("/test/thread", params={"hold": 0.3}).json()["thread"]

    with ThreadPoolExecutor(max_workers=16) as pool:
        threads = set(pool.map(thread_of, range(32)))
    assert len(threads) <= settings.CONNECT_SYNC_THREADS


def test_slow_requests_do_not_hold_up_a_fast_one(live_server_daphne, transactional_db):
    slow_count = settings.CONNECT_SYNC_THREADS - 1  # leaves one lane free
    with ThreadPoolExecutor(max_workers=slow_count) as pool:
        slow = [pool.submit(live_server_daphne.client().get, "/test/sleep", params={"seconds": 4}) for _ in range(slow_count)]
        time.sleep(0.5)  # the slow ones are running
        started = time.monotonic()
        fast = live_server_daphne.client().get("/.well-known/oauth-protected-resource")
        waited = time.monotonic() - started
        assert fast.status_code == 200
        assert all(f.result().status_code == 200 for f in slow)
    # On one shared thread the fast request would wait for the slow ones (about 4 s each).
    assert waited < 2.0, f"a fast request waited {waited:.1f}s behind slow ones"


def test_slow_statements_from_one_client_are_cut_off_before_they_stall_another(tmp_path, transactional_db):
    """More slow requests than there are lanes: without a time limit each would hold its lane
    for two minutes and a fast request queued behind them would wait as long. With
    CONNECT_REQUEST_TIMEOUT_SECONDS=1 they end in 503 timeout and the fast request is served
    (the client's own 10 s timeout is the bound this test puts on the wait)."""
    from tests.servers import serve, without_request_id

    lanes = settings.CONNECT_SYNC_THREADS
    with serve(tmp_path, env={"CONNECT_REQUEST_TIMEOUT_SECONDS": "1"}) as server:
        with httpx.Client(base_url=server.url, timeout=30) as slow_client, ThreadPoolExecutor(max_workers=lanes * 2) as pool:
            slow = [pool.submit(slow_client.get, "/test/slow-query", params={"seconds": 120}) for _ in range(lanes * 2)]
            time.sleep(0.3)  # the slow ones are running or queued on every lane
            fast = httpx.get(f"{server.url}/.well-known/oauth-protected-resource", timeout=10)
            assert fast.status_code == 200
            results = [f.result() for f in slow]
    assert [r.status_code for r in results] == [503] * (lanes * 2)
    assert all(without_request_id(r.json()) == {"error": "timeout"} for r in results)


@pytest.mark.filterwarnings("ignore:No directory at")  # ServeStatic: nothing collected in tests
def test_a_request_hops_between_the_event_loop_and_its_lane_three_times(monkeypatch):
    """request_started, the whole middleware chain with the view, response.close: Django's async
    middleware mode made 15 hops of a /healthz request, each a thread switch on both sides."""
    from connect.asgi import application

    hops = Counter()
    original = SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        hops[getattr(self.func, "__qualname__", repr(self.func))] += 1
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": "/healthz", "raw_path": b"/healthz", "query_string": b"", "root_path": "",
        "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
    }  # fmt: skip
    sent = []

    async def request():
        body = [{"type": "http.request", "body": b"", "more_body": False}]

        async def receive():
            if body:
                return body.pop()
            await asyncio.Event().wait()  # the client stays connected

        async def send(message):
            sent.append(message)

        await application(scope, receive, send)

    asyncio.run(request())
    assert sent[0]["status"] == 200
    assert sum(hops.values()) <= 3, hops


@pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3",
                    reason="PostgreSQL connections come from psycopg's pool")  # fmt: skip
def test_a_lane_keeps_its_sqlite_connection_from_request_to_request(live_server_daphne, transactional_db):
    # A connection per request cost about 1.1 ms of a 3 ms request (connect, PRAGMAs, schema).
    seen: dict[tuple[int, int], set[int]] = {}
    with live_server_daphne.client() as client:
        for _ in range(24):
            body = client.get("/test/thread").json()
            seen.setdefault((body["process"], body["thread"]), set()).add(body["connection"])
    assert sum(len(c) for c in seen.values()) == len(seen), seen
    assert len(seen) < 24  # lanes served several requests each, each on one connection


def test_building_the_application_leaves_the_serving_context_as_it_was():
    """Every request's task starts from a copy of the context the application was imported in.
    Building it sets context variables (Django's URL resolvers flag their population in an
    asgiref Local each, when a middleware reverses a URL at startup); left in the importing
    context, 31 of them rode along with every request and made each `ContextVar.set` and each
    return from a lane cost more (about a tenth of a small request's instructions)."""
    code = ("import contextvars; before = sorted(v.name for v in contextvars.copy_context()); "
            "import connect.asgi; print(before == sorted(v.name for v in contextvars.copy_context()))")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "connect.settings"}
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env, capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent, timeout=120)
    assert out.stdout.strip().splitlines()[-1:] == ["True"], out.stderr[-2000:]


def test_the_one_hop_handler_sends_what_djangos_handler_sends(transactional_db, settings):
    """LaneASGIHandler.handle (one hop to the lane) against Django's own ASGIHandler.handle
    (three hops and a disconnect watch), on the same handler and requests: the same messages."""
    import functools

    from django.core.handlers.asgi import ASGIHandler

    from engine.lanes import LaneASGIHandler, Lanes
    from tests import factories

    settings.CONNECT_RATE_LIMIT_PER_CREDENTIAL = settings.CONNECT_RATE_LIMIT_PER_WORKSPACE = 0
    acme = factories.workspace("acme")
    key = factories.api_key(factories.member(acme, "alice@acme.test"), factories.ALL_SCOPES)
    session = factories.session(acme, label="Kickoff", committed=["hello there", "and again"])
    handler = LaneASGIHandler(Lanes(2, queue_timeout=30))
    requests = [
        ("GET", f"/api/v1/sessions/{session.id}", b""), ("GET", "/api/v1/sessions", b"limit=2"),
        ("GET", "/api/v1/sessions", b"limit=0"), ("GET", "/api/v1/sessions/no-such-session", b""),
        ("GET", f"/api/v1/sessions/{session.id}/transcript", b"format=vtt"),
        ("GET", f"/api/v1/sessions/{session.id}/transcript", b""), ("HEAD", f"/api/v1/sessions/{session.id}", b""),
        ("POST", "/api/v1/webhooks", b""), ("GET", "/healthz", b""), ("GET", "/no/such/page", b""),
    ]  # fmt: skip

    async def run(handle, method: str, path: str, query: bytes) -> list[dict]:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": query, "root_path": "",
            "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {key}".encode())],
            "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
        }  # fmt: skip
        given, sent = False, []

        async def receive():
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await asyncio.Event().wait()  # the client stays

        async def send(message):
            sent.append(message)

        await handler.lanes.enter(handle, scope, receive, send)
        return sent

    for method, path, query in requests:
        ours = asyncio.run(run(handler.handle, method, path, query))
        djangos = asyncio.run(run(functools.partial(ASGIHandler.handle, handler), method, path, query))
        assert ours == djangos, (method, path, query)
        assert ours[0]["type"] == "http.response.start"
