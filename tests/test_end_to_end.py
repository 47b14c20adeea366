"""The service as users meet it: `manage.py serve` (daphne) in a subprocess, real HTTP."""

from __future__ import annotations

import pytest

from apps.recordings import services
from tests import factories
from tests.servers import without_request_id

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def workspace_with_data(transactional_db):
    acme = factories.workspace("acme")
    alice = factories.member(acme, "alice@acme.test")
    sessions = factories.sessions_at_distinct_times(acme, 3)
    session = factories.session(acme, label="Quarterly planning", committed=["we discussed the budget"], final=["We discussed the budget."])
    services.publish_board(session=session, board_id="summary", payload={"points": ["budget"]}, source_revision_kind="final")
    return {"key": factories.api_key(alice), "session": session, "all": [*sessions, session]}


def test_live_server_answers_the_contract(live_server_daphne, workspace_with_data):
    key, session = workspace_with_data["key"], workspace_with_data["session"]
    with live_server_daphne.client(headers={"Authorization": f"Bearer {key}"}) as http:
        listed = http.get("/api/v1/sessions", params={"limit": 2})
        assert listed.status_code == 200 and listed.headers["content-type"] == "application/json"
        page = listed.json()
        assert [s["id"] for s in page["items"]] == [session.id, workspace_with_data["all"][2].id]
        rest = http.get("/api/v1/sessions", params={"cursor": page["nextCursor"]}).json()
        assert len(rest["items"]) == 2 and rest["nextCursor"] is None

        assert http.get(f"/api/v1/sessions/{session.id}").json()["session"]["label"] == "Quarterly planning"
        flat = http.get(f"/api/v1/sessions/{session.id}/transcript").json()
        assert [s["text"] for s in flat["transcript"]] == ["We discussed the budget."]
        revisions = http.get(f"/api/v1/sessions/{session.id}/transcripts").json()["transcripts"]
        assert {r["revisionKind"] for r in revisions} == {"committed", "final"}
        hits = http.get("/api/v1/transcripts/search", params={"query": "budget"}).json()["items"]
        assert {h["revisionKind"] for h in hits} == {"committed", "final"}
        assert "budget" in hits[0]["snippet"]
        board = http.get(f"/api/v1/sessions/{session.id}/boards/summary").json()["board"]
        assert board["payload"] == {"points": ["budget"]}

        missing = http.get("/api/v1/sessions/nope")
        assert missing.status_code == 404 and without_request_id(missing.json()) == {"error": "not_found"}
        assert without_request_id(http.delete("/api/v1/sessions").json()) == {"error": "method_not_allowed"}

    anonymous = live_server_daphne.client().get("/api/v1/sessions")
    assert anonymous.status_code == 401
    assert anonymous.json()["error"] == "unauthorized"
    assert anonymous.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{live_server_daphne.url}/.well-known/oauth-protected-resource"'
    )


def test_live_server_publishes_metadata_and_openapi(live_server_daphne, transactional_db):
    with live_server_daphne.client() as http:
        metadata = http.get("/.well-known/oauth-protected-resource").json()
        assert metadata["resource"] == live_server_daphne.url
        assert metadata["authorization_servers"] == [f"{live_server_daphne.url}/api/auth"]
        assert metadata["scopes_supported"] == ["svc:sessions:read", "svc:transcripts:read", "svc:boards:read"]
        openapi = http.get("/openapi.json").json()
        assert openapi["info"]["version"] == "1.0.0"
        assert http.get("/docs").status_code == 200


def test_connections_are_pooled_not_leaked_per_request(live_server_daphne, workspace_with_data):
    """Under ASGI each request runs in a thread of its own: a per-thread persistent connection
    would stay open per concurrent request until PostgreSQL refuses new clients."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("server-side connection count")
    headers = {"Authorization": f"Bearer {workspace_with_data['key']}"}

    def connections() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
            return cursor.fetchone()[0]

    before = connections()

    def burst(_: int) -> list[int]:
        with live_server_daphne.client(headers=headers) as http:
            return [http.get("/api/v1/sessions").status_code for _ in range(10)]

    with ThreadPoolExecutor(max_workers=32) as pool:
        statuses = [s for batch in pool.map(burst, range(32)) for s in batch]
    assert set(statuses) == {200}
    assert connections() - before <= 10  # the server process's pool (max_size), at most
