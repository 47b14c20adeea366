"""Broken connections and dependency outages on a live server (engine/faults.py):

- PostgreSQL terminates the server's connections (`pg_terminate_backend`): idle pooled ones
  are replaced by the pool's health check, one that dies under a read-only request is retried
  once, so REST and /mcp keep answering 200; a write is never run twice and answers 503.
- The database is unreachable: REST and /mcp answer 503 unavailable with Retry-After (JSON on
  REST, a JSON-RPC error on /mcp), `/readyz` names the database, `/healthz` stays alive.
- Redis is killed: REST and /mcp keep answering (the rate limiter fails open) and `/readyz`
  names Redis.
"""

from __future__ import annotations

import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import orjson
import psycopg
import pytest
from django.db import connection
from django.db.utils import OperationalError

from tests import factories
from tests.servers import free_port, serve, without_request_id

pytestmark = [pytest.mark.e2e]

postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_terminate_backend: PostgreSQL only")
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json", "MCP-Protocol-Version": "2025-06-18"}


def mcp_tools_list(client: httpx.Client, key: str, request_id: int = 7) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {}}
    return client.post("/mcp", content=orjson.dumps(body), headers={**MCP_HEADERS, "Authorization": f"Bearer {key}"})


def wait_until(condition, *, seconds: float = 60, what: str = "condition"):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def admin_connection() -> psycopg.Connection:
    """A connection of the test's own, outside Django, to look at and end the server's."""
    params = connection.get_connection_params()
    params.pop("pool", None)
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    return psycopg.connect(**params, autocommit=True)


def terminate(admin: psycopg.Connection, *, query_like: str | None = None) -> int:
    """Ends the server's backends on this test database (every one but the test's own and
    `admin`'s), or only those running a query like `query_like`; returns how many."""
    own = {admin.info.backend_pid}
    if connection.connection is not None:
        own.add(connection.connection.info.backend_pid)
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND NOT (pid = ANY(%s))"
        " AND (%s::text IS NULL OR query LIKE %s)",
        [list(own), query_like, query_like],
    ).fetchall()
    for (pid,) in rows:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", [pid])  # waits until it has exited
    return len(rows)


@pytest.fixture
def alice_key_committed(transactional_db):
    alice = factories.member(factories.workspace("acme"), "alice@acme.test")
    factories.sessions_at_distinct_times(alice.workspace, 2)
    return factories.api_key(alice, factories.ALL_SCOPES)


@postgresql_only
def test_requests_after_the_servers_connections_are_terminated_succeed(tmp_path, alice_key_committed):
    key = alice_key_committed
    with serve(tmp_path, workers=1) as server, server.client() as client, admin_connection() as admin:
        auth = {"Authorization": f"Bearer {key}"}
        with ThreadPoolExecutor(max_workers=4) as pool:  # fill the pool with several connections
            assert {r.status_code for r in pool.map(lambda _: client.get("/api/v1/sessions", headers=auth), range(8))} == {200}
        assert mcp_tools_list(client, key).status_code == 200
        assert terminate(admin) >= 1

        statuses = [client.get("/api/v1/sessions", headers=auth).status_code for _ in range(20)]
        assert statuses == [200] * 20
        for i in range(5):
            answer = mcp_tools_list(client, key, request_id=i)
            assert answer.status_code == 200 and answer.json()["id"] == i and "result" in answer.json()


@postgresql_only
def test_a_read_only_request_whose_connection_dies_under_it_runs_once_more(tmp_path, transactional_db):
    with serve(tmp_path, workers=1) as server, admin_connection() as admin:
        with ThreadPoolExecutor(max_workers=1) as pool:
            slow = pool.submit(httpx.get, f"{server.url}/test/slow-query", params={"seconds": 2}, timeout=60)
            wait_until(lambda: terminate(admin, query_like="SELECT pg_sleep%"), what="the request's statement")
            response = slow.result()
    assert response.status_code == 200
    assert response.json() == {"slept": True}


@postgresql_only
def test_a_write_whose_connection_dies_is_never_repeated_and_answers_503(tmp_path, transactional_db):
    attempts = tmp_path / "attempts"
    with serve(tmp_path, workers=1) as server, admin_connection() as admin:
        with ThreadPoolExecutor(max_workers=1) as pool:
            write = pool.submit(httpx.post, f"{server.url}/test/slow-write",
                                params={"seconds": 30, "attempts": str(attempts)}, timeout=60)  # fmt: skip
            wait_until(lambda: terminate(admin, query_like="SELECT pg_sleep%"), what="the write's statement")
            response = write.result()
        # A later request is served on a fresh connection.
        assert httpx.get(f"{server.url}/test/slow-query", params={"seconds": 0}, timeout=30).status_code == 200
    assert response.status_code == 503
    assert without_request_id(response.json()) == {"error": "unavailable"}
    assert int(response.headers["Retry-After"]) > 0
    assert attempts.read_text().splitlines() == ["attempt"]


@postgresql_only
def test_the_read_only_retry_gets_a_fresh_connection_in_process(transactional_db):
    from engine.faults import run_read_only

    def backend_pid() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]

    first = backend_pid()
    with admin_connection() as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", [first])
    second = run_read_only(backend_pid)
    assert second != first
    # Without the retry the same dead connection fails.
    with admin_connection() as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", [second])
    with pytest.raises(OperationalError):
        backend_pid()
    connection.close()


def test_an_unreachable_database_answers_503_with_retry_after_on_rest_and_mcp(tmp_path):
    unreachable = f"postgres://postgres@127.0.0.1:{free_port()}/connect"
    with serve(tmp_path, env={"DATABASE_URL": unreachable}) as server:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            rest = client.get("/api/v1/sessions", headers={"Authorization": "Bearer ck_live_whatever"})
            assert rest.status_code == 503, rest.text
            assert without_request_id(rest.json()) == {"error": "unavailable"}
            assert int(rest.headers["Retry-After"]) > 0

            mcp = mcp_tools_list(client, "ck_live_whatever", request_id="abc")
            assert mcp.status_code == 503, mcp.text
            assert mcp.headers["content-type"] == "application/json"
            assert int(mcp.headers["Retry-After"]) > 0
            body = mcp.json()
            assert body["jsonrpc"] == "2.0" and body["id"] == "abc"
            assert body["error"]["data"] == {"error": "unavailable"}

            assert client.get("/healthz").json() == {"status": "ok"}
            ready = client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["checks"]["database"] == "unavailable"


@pytest.fixture
def redis_server(tmp_path):
    """A redis-server of the test's own on a free port; `.kill()` ends it like an outage."""
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def answers() -> bool:
        try:
            import redis

            return redis.Redis(port=port, socket_timeout=1).ping()
        except Exception:  # noqa: BLE001 - not up yet
            return False

    wait_until(answers, what="redis-server")
    process.url = f"redis://127.0.0.1:{port}/0"
    yield process
    if process.poll() is None:
        process.kill()
        process.wait(timeout=10)


def test_rest_and_mcp_keep_answering_while_redis_is_down_and_readyz_names_it(tmp_path, alice_key_committed, redis_server):
    key = alice_key_committed
    with serve(tmp_path, env={"REDIS_URL": redis_server.url}) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        auth = {"Authorization": f"Bearer {key}"}
        assert client.get("/api/v1/sessions", headers=auth).status_code == 200
        assert client.get("/readyz").json()["checks"] == {"database": "ok", "redis": "ok"}

        redis_server.kill()
        redis_server.wait(timeout=10)

        sessions = client.get("/api/v1/sessions", headers=auth)
        assert sessions.status_code == 200 and len(sessions.json()["items"]) == 2
        assert mcp_tools_list(client, key).status_code == 200
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert without_request_id(ready.json()) == {"error": "not_ready", "checks": {"database": "ok", "redis": "unavailable"}}
        assert int(ready.headers["Retry-After"]) > 0
        assert client.get("/healthz").json() == {"status": "ok"}


@pytest.mark.django_db
def test_an_unexpected_failure_on_the_mcp_lane_is_a_json_rpc_500_never_html(monkeypatch):
    """Anything the lane's work raises that is no outage (a bug): the JSON-RPC error, logged."""
    import asyncio

    from channels.testing import HttpCommunicator

    from apps.mcp import consumer

    def broken(*args):
        raise ValueError("a bug")

    monkeypatch.setattr(consumer, "answer", broken)
    body = orjson.dumps({"jsonrpc": "2.0", "id": 41, "method": "tools/list"})
    headers = [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json")]
    communicator = HttpCommunicator(consumer.McpEndpoint(), "POST", "/mcp", body=body, headers=headers)
    response = asyncio.run(communicator.get_response(timeout=30))
    assert response["status"] == 500
    assert dict(response["headers"])[b"content-type"] == b"application/json"
    assert orjson.loads(response["body"]) == {
        "jsonrpc": "2.0", "id": 41, "error": {"code": -32603, "message": "Internal error", "data": {"error": "internal_server_error"}},
    }


def test_dependency_errors_map_to_503_unavailable_with_retry_after_and_others_do_not():
    import redis

    from apps.core.errors import Unavailable, as_api_error, error_response

    lost = OperationalError("server closed the connection unexpectedly")
    lost.__cause__ = psycopg.OperationalError("server closed the connection unexpectedly")
    shutdown = OperationalError("terminating connection due to administrator command")
    shutdown.__cause__ = psycopg.errors.AdminShutdown()
    for exc in (lost, shutdown, redis.exceptions.ConnectionError("refused"), redis.exceptions.TimeoutError()):
        error = as_api_error(exc)
        assert isinstance(error, Unavailable), exc
        response = error_response(error)
        assert response.status_code == 503 and without_request_id(orjson.loads(response.content)) == {"error": "unavailable"}
        assert int(response["Retry-After"]) > 0

    syntax = OperationalError("syntax error")
    syntax.__cause__ = psycopg.errors.SyntaxError()
    assert as_api_error(syntax) is None  # a bug stays a logged 500
    assert as_api_error(OperationalError("database is locked")) is None
