"""Appending committed segments by the producer's numbering: retries never duplicate, a gap or
other content is a clear 409 with the sequence expected next, one transaction per batch, and
one `transcript.segment.created` per stored segment."""

from __future__ import annotations

import pytest

from apps.events.models import Event, EventType
from apps.recordings.models import Segment, Session
from tests.ingest.conftest import batch, segment

pytestmark = pytest.mark.django_db


@pytest.fixture
def rec(ingest, acme_ingest_key):
    assert ingest.put("rec-1", {"label": "Standup"}, acme_ingest_key).status_code == 201
    return Session.objects.get(external_id="rec-1")


def stored(session: Session) -> list[tuple[int, str]]:
    return list(Segment.objects.filter(transcript__session=session, transcript__revision_kind="committed")
                .order_by("sequence").values_list("sequence", "text"))


def segment_events(session: Session) -> int:
    return Event.objects.filter(session_id=session.id, type=EventType.TRANSCRIPT_SEGMENT_CREATED).count()


def test_the_same_batch_three_times_is_stored_once(ingest, acme_ingest_key, rec):
    answers = [ingest.post("rec-1/segments", batch(0, 3), acme_ingest_key).json() for _ in range(3)]
    assert answers[0] == {"sessionId": rec.id, "appended": 3, "acknowledged": 0, "nextSequence": 3}
    assert answers[1] == answers[2] == {"sessionId": rec.id, "appended": 0, "acknowledged": 3, "nextSequence": 3}
    assert [s for s, _ in stored(rec)] == [0, 1, 2]
    assert segment_events(rec) == 3


def test_a_batch_retried_after_its_commit_acknowledges_and_continues(ingest, acme_ingest_key, rec):
    """The response to 0–4 was lost; the producer retries 0–4 together with 5–6."""
    assert ingest.post("rec-1/segments", batch(0, 5), acme_ingest_key).status_code == 200
    answer = ingest.post("rec-1/segments", batch(0, 7), acme_ingest_key).json()
    assert (answer["appended"], answer["acknowledged"], answer["nextSequence"]) == (2, 5, 7)
    assert [s for s, _ in stored(rec)] == list(range(7))
    assert segment_events(rec) == 7


def test_a_lost_response_retried_with_its_idempotency_key_is_answered_again(ingest, acme_ingest_key, rec):
    headers = {"Idempotency-Key": "batch-0-4"}
    first = ingest.post("rec-1/segments", batch(0, 5), acme_ingest_key, **headers)
    again = ingest.post("rec-1/segments", batch(0, 5), acme_ingest_key, **headers)
    assert again.status_code == first.status_code == 200
    assert again.content == first.content and again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert segment_events(rec) == 5


def test_a_gap_is_409_with_the_sequence_expected_next(ingest, acme_ingest_key, rec):
    ingest.post("rec-1/segments", batch(0, 17), acme_ingest_key)
    response = ingest.post("rec-1/segments", batch(20, 2), acme_ingest_key)
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "conflict" and body["expectedSequence"] == 17
    assert "expected sequence 17 next" in body["detail"]
    assert len(stored(rec)) == 17


def test_the_first_batch_starts_at_zero(ingest, acme_ingest_key, rec):
    response = ingest.post("rec-1/segments", batch(1, 2), acme_ingest_key)
    assert response.status_code == 409 and response.json()["expectedSequence"] == 0


def test_a_stored_sequence_with_other_content_is_409_and_writes_nothing(ingest, acme_ingest_key, rec):
    ingest.post("rec-1/segments", batch(0, 3), acme_ingest_key)
    changed = {"segments": [segment(1), segment(2, text="something else"), segment(3)]}
    response = ingest.post("rec-1/segments", changed, acme_ingest_key)
    assert response.status_code == 409
    body = response.json()
    assert body["expectedSequence"] == 3 and "segments[1]" in body["detail"] and "sequence 2" in body["detail"]
    assert [s for s, _ in stored(rec)] == [0, 1, 2] and segment_events(rec) == 3


def test_a_batch_out_of_order_is_400_naming_the_segment(ingest, acme_ingest_key, rec):
    response = ingest.post("rec-1/segments", {"segments": [segment(0), segment(2), segment(1)]}, acme_ingest_key)
    assert response.status_code == 400
    assert response.json()["detail"].startswith("segments[1].sequence:")
    assert stored(rec) == []


def test_sequences_are_the_read_apis_sequences(api, ingest, acme_ingest_key, alice_key, rec):
    ingest.post("rec-1/segments", batch(0, 3), acme_ingest_key)
    transcript = api.get(f"/api/v1/sessions/{rec.id}/transcript", alice_key).json()
    assert [s["sequence"] for s in transcript["transcript"]] == [0, 1, 2]
    assert transcript["transcript"][1]["text"] == "segment number 1"


def test_no_new_segments_once_the_session_stopped_recording(ingest, acme_ingest_key, rec):
    ingest.post("rec-1/segments", batch(0, 2), acme_ingest_key)
    ingest.post("rec-1/status", {"status": "completed"}, acme_ingest_key)
    retry = ingest.post("rec-1/segments", batch(0, 2), acme_ingest_key)
    assert retry.status_code == 200 and retry.json()["acknowledged"] == 2
    late = ingest.post("rec-1/segments", batch(2, 1), acme_ingest_key)
    assert late.status_code == 409 and "completed" in late.json()["detail"]
    assert len(stored(rec)) == 2


def test_an_unknown_session_is_404(ingest, acme_ingest_key):
    response = ingest.post("nobody/segments", batch(0, 1), acme_ingest_key)
    assert response.status_code == 404 and response.json()["error"] == "not_found"
