"""A server process (engine/daphne_worker.py): its start-up heap is settled before it serves, a
live server answers every way in, and drf-spectacular's schema views are made on the schema's
first request (connect/schema.py). Every library is imported the ordinary way
(docs/decisions/import-deferral.md)."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import httpx2
from django.db import connection
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engine import daphne_worker
from tests import factories
from tests.servers import cmdline_of, descendants, start, without_request_id


def test_settling_the_start_up_heap_freezes_what_exists_then_and_collects_the_young_less_often():
    import gc

    before = gc.get_freeze_count()
    thresholds = gc.get_threshold()
    kept = [[] for _ in range(10)]  # containers the collector tracks, made since any earlier freeze
    try:
        daphne_worker.settle_start_up_heap()
        assert gc.get_freeze_count() >= before + len(kept)
        assert gc.get_threshold() == (daphne_worker.YOUNG_COLLECTION_THRESHOLD, *thresholds[1:])
    finally:
        gc.set_threshold(*thresholds)
        if before == 0:
            gc.unfreeze()


def mapped(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


async def one_mcp_call(url: str, key: str) -> str:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=20)
    async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        result = await client.call_tool("list_sessions", {"limit": 1})
        return result.content[0].text


def test_a_live_server_answers_every_way_in_and_makes_the_schema_views_on_demand(
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
        if connection.vendor == "postgresql":  # SQLite search's module names the driver only for types
            for pid in workers:
                assert "/_sqlite3." not in mapped(pid)

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
