"""The session upsert, status, final revision and board writes: each through the services, with
its events recorded once per change (the outbox rows), and retries that change nothing."""

from __future__ import annotations

import pytest

from apps.events.models import Event, EventType
from apps.recordings.models import BoardContent, Session, Transcript
from apps.recordings.services import payload_hash
from tests.ingest.conftest import batch

pytestmark = pytest.mark.django_db

FINAL = {"segments": [{"timestampStart": 0, "timestampEnd": 900, "speakerLabel": "Ana", "text": "Hello.",
                       "confidence": None},
                      {"timestampStart": 1000, "timestampEnd": 1900, "text": "Hi."}]}
BOARD = {"status": "ready", "sourceRevisionKind": "final", "payload": {"b": [1, 2], "a": "x"}}


def events(type: str) -> list[Event]:
    return list(Event.objects.filter(type=type).order_by("position", "id"))


def test_put_creates_once_then_updates(ingest, acme_ingest_key):
    created = ingest.put("rec-1", {"label": "Standup", "startedAt": "2026-12-01T09:00:00Z"}, acme_ingest_key)
    assert created.status_code == 201
    body = created.json()
    assert body["externalId"] == "rec-1" and body["session"]["id"] == body["id"]
    assert body["session"]["startedAt"] == "2026-12-01T09:00:00.000Z" and body["session"]["status"] == "recording"
    updated = ingest.put("rec-1", {"memo": "notes", "endedAt": "2026-12-01T09:30:00+00:00"}, acme_ingest_key)
    assert updated.status_code == 200 and updated.json()["id"] == body["id"]
    session = updated.json()["session"]
    assert (session["label"], session["memo"], session["endedAt"]) == ("Standup", "notes", "2026-12-01T09:30:00.000Z")
    assert ingest.put("rec-1", {"label": None}, acme_ingest_key).json()["session"]["label"] is None
    assert Session.objects.count() == 1
    assert len(events(EventType.SESSION_CREATED)) == 1


def test_status_follows_the_design_transitions(ingest, acme_ingest_key):
    ingest.put("rec-1", {}, acme_ingest_key)
    processing = ingest.post("rec-1/status", {"status": "processing"}, acme_ingest_key)
    assert processing.status_code == 200 and processing.json()["session"]["status"] == "processing"
    again = ingest.post("rec-1/status", {"status": "processing"}, acme_ingest_key)
    assert again.status_code == 200
    assert ingest.post("rec-1/status", {"status": "completed"}, acme_ingest_key).status_code == 200
    impossible = ingest.post("rec-1/status", {"status": "failed"}, acme_ingest_key)
    assert impossible.status_code == 409
    assert impossible.json() == {**impossible.json(), "error": "conflict"}
    assert "completed session cannot become failed" in impossible.json()["detail"]
    changes = [(e.data["previousStatus"], e.data["status"]) for e in events(EventType.SESSION_STATUS_CHANGED)]
    assert changes == [("recording", "processing"), ("processing", "completed")]


def test_recording_cannot_be_asked_for(ingest, acme_ingest_key):
    ingest.put("rec-1", {}, acme_ingest_key)
    response = ingest.post("rec-1/status", {"status": "recording"}, acme_ingest_key)
    assert response.status_code == 400 and response.json()["detail"].startswith("status:")


def test_the_final_revision_is_replaced_whole(api, ingest, acme_ingest_key, alice_key):
    session_id = ingest.put("rec-1", {}, acme_ingest_key).json()["id"]
    ingest.post("rec-1/segments", batch(0, 2), acme_ingest_key)
    first = ingest.put("rec-1/transcripts/final", FINAL, acme_ingest_key).json()
    assert first["segmentCount"] == 2
    second = ingest.put("rec-1/transcripts/final", {"segments": [FINAL["segments"][1]]}, acme_ingest_key).json()
    assert second["transcriptId"] != first["transcriptId"]
    assert Transcript.objects.filter(session_id=session_id, revision_kind="final").count() == 1
    flat = api.get(f"/api/v1/sessions/{session_id}/transcript", alice_key).json()
    assert [(s["sequence"], s["text"]) for s in flat["transcript"]] == [(0, "Hi.")]


def test_a_board_version_hashes_as_the_read_side_and_a_retry_adds_none(api, ingest, acme_ingest_key, alice_key):
    session_id = ingest.put("rec-1", {}, acme_ingest_key).json()["id"]
    first = ingest.put("rec-1/boards/summary", BOARD, acme_ingest_key)
    assert first.status_code == 201
    assert first.json()["payloadHash"] == payload_hash(BOARD["payload"]) and first.json()["version"] == 1
    retry = ingest.put("rec-1/boards/summary", {**BOARD, "payload": {"a": "x", "b": [1, 2]}}, acme_ingest_key)
    assert retry.status_code == 200 and retry.json()["id"] == first.json()["id"]
    newer = ingest.put("rec-1/boards/summary", {**BOARD, "status": "generating"}, acme_ingest_key)
    assert newer.status_code == 201 and newer.json()["version"] == 2
    read = api.get(f"/api/v1/sessions/{session_id}/boards/summary", alice_key).json()
    assert read["board"] == newer.json()
    assert BoardContent.objects.filter(session_id=session_id).count() == 2


def test_every_change_records_its_event_once_and_retries_none(ingest, acme_ingest_key):
    """The outbox rows a recorder's whole loop leaves, retried call by call."""
    for _ in range(2):
        ingest.put("rec-1", {"label": "Standup"}, acme_ingest_key)
        ingest.post("rec-1/segments", batch(0, 4), acme_ingest_key)
        ingest.post("rec-1/segments", batch(4, 2), acme_ingest_key)
        ingest.post("rec-1/status", {"status": "processing"}, acme_ingest_key)
        ingest.put("rec-1/transcripts/final", FINAL, acme_ingest_key)
        ingest.put("rec-1/boards/summary", BOARD, acme_ingest_key)
        ingest.post("rec-1/status", {"status": "completed"}, acme_ingest_key)
    assert len(events(EventType.SESSION_CREATED)) == 1
    assert [e.data["sequence"] for e in events(EventType.TRANSCRIPT_SEGMENT_CREATED)] == list(range(6))
    assert len(events(EventType.SESSION_STATUS_CHANGED)) == 2
