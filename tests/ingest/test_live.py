"""The ingest API on a live `serve --workers 2`: concurrent producers, a reader racing the final
revision's replacement, and the read doors that refuse an ingest key (stream, MCP)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection, transaction

from apps.recordings.models import Segment, Session
from apps.tenancy import services as tenancy
from tests import factories
from tests.servers import start

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PREFIX = "/api/v1/ingest/sessions/"


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    live = start(tmp_path_factory.mktemp("ingest-live"), workers=2)
    yield live
    live.stop()


@pytest.fixture
def keys(alice):
    return tenancy.issue_ingest_key(membership=alice).key, factories.api_key(alice, factories.READ_SCOPES)


def http(server, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def batch(first: int, count: int, who: str) -> dict:
    return {"segments": [{"sequence": i, "timestampStart": i, "timestampEnd": i + 1, "text": f"{who}:{i}"}
                         for i in range(first, first + count)]}


def test_the_read_doors_refuse_an_ingest_key_and_the_ingest_door_a_read_key(server, keys):
    ingest_key, read_key = keys
    with http(server, ingest_key) as recorder:
        stream = recorder.get("/api/v1/events/stream")
        assert stream.status_code == 403 and stream.json()["error"] == "insufficient_scope"
        mcp = recorder.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                            headers={"Accept": "application/json, text/event-stream"})
        assert mcp.status_code == 403 and mcp.json()["error"] == "insufficient_scope"
        assert recorder.get("/api/v1/sessions").status_code == 403
    with http(server, read_key) as reader:
        refused = reader.put(PREFIX + "rec-1", json={})
        assert refused.status_code == 403 and refused.json()["error"] == "insufficient_scope"


def test_two_producers_on_one_session_keep_one_numbering(server, keys):
    """Each round both producers send the same five sequences with their own text at once: one
    batch is stored whole, the other loses whole with `409` and the sequence expected next."""
    ingest_key, _ = keys
    with http(server, ingest_key) as setup:
        assert setup.put(PREFIX + "shared", json={}).status_code == 201
    clients = [http(server, ingest_key), http(server, ingest_key)]
    rounds = 8
    with ThreadPoolExecutor(2) as pool:
        for r in range(rounds):
            barrier = threading.Barrier(2)

            def send(n: int) -> httpx.Response:
                barrier.wait()
                return clients[n].post(PREFIX + "shared/segments", json=batch(r * 5, 5, "AB"[n]))

            answers = list(pool.map(send, range(2)))
            assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
            loser = next(a for a in answers if a.status_code == 409).json()
            assert loser["error"] == "conflict" and loser["expectedSequence"] == (r + 1) * 5
            winner = "AB"[[a.status_code for a in answers].index(200)]
            texts = list(Segment.objects.filter(transcript__session__external_id="shared",
                                                sequence__gte=r * 5).order_by("sequence").values_list("text", flat=True))
            assert texts == [f"{winner}:{i}" for i in range(r * 5, r * 5 + 5)]
    for c in clients:
        c.close()
    sequences = list(Segment.objects.filter(transcript__session__external_id="shared")
                     .order_by("sequence").values_list("sequence", flat=True))
    assert sequences == list(range(rounds * 5))


@pytest.mark.skipif("connection.vendor != 'postgresql'",
                    reason="SQLite serialises every writer: sessions there share one write lock by design")
def test_producers_on_different_sessions_never_block_each_other(server, keys):
    ingest_key, _ = keys
    with http(server, ingest_key) as recorder:
        for name in ("held", "free"):
            recorder.put(PREFIX + name, json={})
        held = Session.objects.get(external_id="held")
        with ThreadPoolExecutor(1) as pool, transaction.atomic():
            Session.objects.select_for_update().get(pk=held.pk)  # a long writer on "held"
            waiting = pool.submit(recorder.post, PREFIX + "held/segments", json=batch(0, 2, "h"))
            started = time.monotonic()
            free = recorder.post(PREFIX + "free/segments", json=batch(0, 2, "f"))
            assert free.status_code == 200 and time.monotonic() - started < 30
            time.sleep(0.5)
            assert not waiting.done()  # the same session's writer waits for the lock
        assert waiting.result(timeout=60).status_code == 200


def test_a_reader_never_sees_half_a_final_revision(server, keys):
    ingest_key, read_key = keys
    versions = {
        "x": [{"timestampStart": i, "timestampEnd": i + 1, "text": f"x{i}"} for i in range(40)],
        "y": [{"timestampStart": i, "timestampEnd": i + 1, "text": f"y{i}"} for i in range(25)],
    }
    whole = {tuple(s["text"] for s in segments) for segments in versions.values()}
    with http(server, ingest_key) as recorder:
        session_id = recorder.put(PREFIX + "swap", json={}).json()["id"]
        recorder.post(PREFIX + "swap/segments", json=batch(0, 3, "committed"))
        assert recorder.put(PREFIX + "swap/transcripts/final", json={"segments": versions["x"]}).status_code == 200
    done = threading.Event()
    seen: list[tuple[str, ...]] = []

    def read() -> None:
        with http(server, read_key) as reader:
            while not done.is_set():
                body = reader.get(f"/api/v1/sessions/{session_id}/transcript").json()
                seen.append(tuple(s["text"] for s in body["transcript"]))

    def write() -> None:
        with http(server, ingest_key) as recorder:
            for n in range(30):
                version = versions["y" if n % 2 == 0 else "x"]
                assert recorder.put(PREFIX + "swap/transcripts/final", json={"segments": version}).status_code == 200
        done.set()

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    write()
    for t in readers:
        t.join(timeout=120)
    assert len(seen) >= 10
    assert set(seen) <= whole, {len(s) for s in set(seen) - whole}


def test_simulate_activity_via_api_drives_the_ingest_door(server, alice):
    import subprocess
    import sys

    from apps.events.models import Event
    from apps.tenancy.models import ApiKey
    from tests.servers import ROOT, server_env

    result = subprocess.run(
        [sys.executable, "manage.py", "simulate_activity", "acme", "--sessions", "2", "--segments", "3",
         "--interval", "0", "--via-api", "--base-url", server.url],
        cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    sessions = Session.objects.filter(workspace=alice.workspace)
    assert sessions.count() == 2 and all(s.external_id.startswith("simulated-") for s in sessions)
    assert all(s.status == "completed" for s in sessions)
    assert Event.objects.filter(type="transcript.segment.created").count() == 6
    assert Event.objects.filter(type="session.status_changed").count() == 4
    assert ApiKey.objects.get(name="simulate_activity", revoked_at__isnull=True).is_ingest
