"""Bad input is refused whole and clearly: a 4xx `{"error", "detail"}` naming the part at fault,
never the value sent, and nothing written."""

from __future__ import annotations

import json

import pytest

from apps.events.models import Event
from apps.ingest import inputs
from apps.recordings.models import BoardContent, Segment, Session, Transcript
from tests.ingest.conftest import batch, segment

pytestmark = pytest.mark.django_db

SECRET = "sk_live_do_not_echo"


@pytest.fixture
def rec(ingest, acme_ingest_key):
    ingest.put("rec-1", {}, acme_ingest_key)
    return Session.objects.get(external_id="rec-1")


def refused(response, status: int, name: str, error: str = "invalid_request") -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["error"] == error
    assert body["detail"].startswith(f"{name}:"), body["detail"]
    assert SECRET not in response.content.decode()
    return body


def nothing_written(session: Session) -> None:
    assert not Segment.objects.filter(transcript__session=session).exists()
    assert not BoardContent.objects.exists()
    assert Event.objects.filter(session_id=session.id).exclude(type="session.created").count() == 0


BAD_SEGMENTS = [
    ({"segments": []}, "segments"),
    ({"segments": [segment(i) for i in range(inputs.MAX_BATCH + 1)]}, "segments"),
    ({"segments": segment(0)}, "segments"),
    ({}, "segments"),
    ([], "body"),
    ({"segments": [segment(0)], "extra": 1}, "extra"),
    ({"segments": [segment(0, speaker=SECRET)]}, "segments[0].speaker"),
    ({"segments": [segment(0), segment(1, text="x" * (inputs.MAX_TEXT + 1))]}, "segments[1].text"),
    ({"segments": [segment(0, text="   ")]}, "segments[0].text"),
    ({"segments": [segment(0, text=5)]}, "segments[0].text"),
    ({"segments": [segment(0, timestampStart=2000, timestampEnd=1000)]}, "segments[0].timestampEnd"),
    ({"segments": [segment(0, timestampStart=-1)]}, "segments[0].timestampStart"),
    ({"segments": [segment(0, timestampEnd=2**31)]}, "segments[0].timestampEnd"),
    ({"segments": [segment(0, timestampStart=True)]}, "segments[0].timestampStart"),
    ({"segments": [segment(0, timestampStart="100")]}, "segments[0].timestampStart"),
    ({"segments": [segment(0, timestampStart=1.5)]}, "segments[0].timestampStart"),
    ({"segments": [segment(0, confidence=1.5)]}, "segments[0].confidence"),
    ({"segments": [segment(0, confidence=False)]}, "segments[0].confidence"),
    ({"segments": [segment(-1)]}, "segments[0].sequence"),
    ({"segments": [{**segment(0), "sequence": None}]}, "segments[0].sequence"),
    ({"segments": [segment(0, speakerLabel=["a"])]}, "segments[0].speakerLabel"),
    ({"segments": [{k: v for k, v in segment(0).items() if k != "text"}]}, "segments[0].text"),
    ({"segments": [segment(0), segment(1), segment(1)]}, "segments[2].sequence"),
]


@pytest.mark.parametrize("body, name", BAD_SEGMENTS)
def test_bad_segment_batches_are_400_and_write_nothing(ingest, acme_ingest_key, rec, body, name):
    refused(ingest.post("rec-1/segments", body, acme_ingest_key), 400, name)
    nothing_written(rec)


@pytest.mark.parametrize("raw", [b'{"segments": [', b'{"segments": [{"sequence": 0, "timestampStart": NaN}]}',
                                 b'{"segments": [{"sequence": 0, "timestampStart": Infinity}]}',
                                 b'{"segments": [{"sequence": 0, "timestampStart": -Infinity}]}',
                                 b"\xff\xfe", b'{"segments": "\\u0000"}'])
def test_malformed_json_and_non_finite_numbers_are_400(ingest, acme_ingest_key, rec, raw):
    refused(ingest.post("rec-1/segments", None, acme_ingest_key, raw=raw), 400, "body")
    nothing_written(rec)


def test_an_empty_body_is_400(ingest, acme_ingest_key, rec):
    response = ingest.post("rec-1/segments", None, acme_ingest_key, raw=b"")
    assert response.status_code == 400 and response.json()["detail"]
    nothing_written(rec)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/jsonx"])
def test_a_body_that_is_not_declared_json_is_400(ingest, acme_ingest_key, rec, content_type):
    response = ingest.post("rec-1/segments", None, acme_ingest_key, raw=json.dumps(batch(0, 1)).encode(),
                           content_type=content_type)
    refused(response, 400, "Content-Type")
    nothing_written(rec)


@pytest.mark.parametrize("body, name", [
    ({"label": 5}, "label"),
    ({"label": "x" * (inputs.MAX_LABEL + 1)}, "label"),
    ({"memo": ["x"]}, "memo"),
    ({"startedAt": "yesterday"}, "startedAt"),
    ({"startedAt": "2026-12-01T09:00:00"}, "startedAt"),
    ({"endedAt": 1764579600}, "endedAt"),
    ({"startedAt": "2026-12-01T10:00:00Z", "endedAt": "2026-12-01T09:00:00Z"}, "endedAt"),
    ({"status": "completed"}, "status"),
    ({"externalId": "other"}, "externalId"),
    ("label", "body"),
])
def test_bad_session_bodies_are_400_and_create_nothing(ingest, acme_ingest_key, body, name):
    refused(ingest.put("rec-2", body, acme_ingest_key), 400, name)
    assert not Session.objects.exists()


def test_an_update_that_would_end_before_the_start_is_400(ingest, acme_ingest_key):
    ingest.put("rec-1", {"startedAt": "2026-12-01T10:00:00Z"}, acme_ingest_key)
    refused(ingest.put("rec-1", {"endedAt": "2026-12-01T09:00:00Z"}, acme_ingest_key), 400, "endedAt")
    assert Session.objects.get(external_id="rec-1").ended_at is None


@pytest.mark.parametrize("external_id", ["a" * 201, "has space", "semi;colon", "ünïcode"])
def test_a_bad_external_id_is_400(ingest, acme_ingest_key, external_id):
    from urllib.parse import quote

    refused(ingest.put(quote(external_id), {}, acme_ingest_key), 400, "externalId")
    assert not Session.objects.exists()


@pytest.mark.parametrize("body, name", [
    ({"status": "done"}, "status"),
    ({"status": None}, "status"),
    ({}, "status"),
    ({"status": "completed", "reason": "x"}, "reason"),
])
def test_bad_status_bodies_are_400(ingest, acme_ingest_key, rec, body, name):
    refused(ingest.post("rec-1/status", body, acme_ingest_key), 400, name)
    assert Session.objects.get(pk=rec.pk).status == "recording"


@pytest.mark.parametrize("body, name", [
    ({"segments": [{"sequence": 0, "timestampStart": 0, "timestampEnd": 1, "text": "x"}]}, "segments[0].sequence"),
    ({"segments": [{"timestampStart": 5, "timestampEnd": 1, "text": "x"}]}, "segments[0].timestampEnd"),
    ({"segments": None}, "segments"),
    ({"segments": [{"timestampStart": 0, "timestampEnd": 1, "text": "x"}] * (inputs.MAX_FINAL_SEGMENTS + 1)},
     "segments"),
])
def test_bad_final_revisions_are_400_and_keep_the_old_one(ingest, acme_ingest_key, rec, body, name):
    good = {"segments": [{"timestampStart": 0, "timestampEnd": 1, "text": "kept"}]}
    assert ingest.put("rec-1/transcripts/final", good, acme_ingest_key).status_code == 200
    refused(ingest.put("rec-1/transcripts/final", body, acme_ingest_key), 400, name)
    final = Transcript.objects.get(session=rec, revision_kind="final")
    assert list(final.segments.values_list("text", flat=True)) == ["kept"]


@pytest.mark.parametrize("board_id, body, name", [
    ("summary", {"status": "done", "sourceRevisionKind": "final", "payload": {}}, "status"),
    ("summary", {"status": "ready", "sourceRevisionKind": "draft", "payload": {}}, "sourceRevisionKind"),
    ("summary", {"status": "ready", "sourceRevisionKind": "final"}, "payload"),
    ("summary", {"status": "ready", "sourceRevisionKind": "final", "payload": {}, "version": 3}, "version"),
    ("summary", {"status": "ready", "sourceRevisionKind": "final",
                 "payload": {"text": "x" * inputs.MAX_BOARD_PAYLOAD_BYTES}}, "payload"),
    ("b" * 101, {"status": "ready", "sourceRevisionKind": "final", "payload": {}}, "boardId"),
])
def test_bad_boards_are_400_and_add_no_version(ingest, acme_ingest_key, rec, board_id, body, name):
    refused(ingest.put(f"rec-1/boards/{board_id}", body, acme_ingest_key), 400, name)
    nothing_written(rec)


def test_a_body_over_the_upload_limit_is_413(ingest, acme_ingest_key, rec, settings):
    huge = {"segments": [segment(0, text="y" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1))]}
    response = ingest.post("rec-1/segments", huge, acme_ingest_key)
    assert response.status_code == 413 and response.json()["error"] == "payload_too_large"
    nothing_written(rec)


@pytest.mark.parametrize("key", ["", "x" * 256, "has space", "tab\tkey"])
def test_a_malformed_idempotency_key_is_400(ingest, acme_ingest_key, rec, key):
    response = ingest.post("rec-1/segments", batch(0, 1), acme_ingest_key, **{"Idempotency-Key": key})
    refused(response, 400, "Idempotency-Key")
    nothing_written(rec)
