"""The outbox: every change records its event in its own transaction, with the data REST shows."""

from __future__ import annotations

import pytest
from django.db import transaction

from apps.events import fanout, filters
from apps.events.models import Event, EventType
from apps.events.representations import event_envelope
from apps.events.signals import event_recorded
from apps.recordings import services as recordings
from apps.recordings.representations import flat_segment_repr, session_repr
from apps.recordings.models import Segment, Transcript
from tests import factories


def _events(ws):
    return list(Event.objects.filter(workspace=ws).order_by("id"))


def test_create_session_records_session_created(acme):
    session = recordings.create_session(workspace=acme, label="Kickoff")
    [event] = _events(acme)
    assert event.id.startswith("evt_") and len(event.id) == 30
    assert (event.type, event.session_id, event.workspace_id) == ("session.created", session.id, acme.id)
    assert event.data == {
        "sessionId": session.id,
        "occurredAt": event_envelope(event)["occurredAt"],
        "session": session_repr(session),
    }


def test_status_change_records_previous_status_and_snapshot(acme):
    session = recordings.create_session(workspace=acme, label="Kickoff")
    session = recordings.change_session_status(session=session, status="processing")
    recordings.change_session_status(session=session, status="completed")
    created, processing, completed = _events(acme)
    assert processing.data["status"] == "processing" and processing.data["previousStatus"] == "recording"
    assert completed.data["status"] == "completed" and completed.data["previousStatus"] == "processing"
    assert set(completed.data) == {"sessionId", "status", "previousStatus", "occurredAt", "session"}
    # The snapshot is fixed at that moment: the earlier event still shows the earlier status.
    assert processing.data["session"]["status"] == "processing"
    assert completed.data["session"]["status"] == "completed"


def test_each_committed_segment_records_its_event_with_exactly_the_contract_fields(acme):
    session = recordings.create_session(workspace=acme)
    recordings.append_committed_segments(session=session, segments=factories.segments(["one", "two"]))
    segment_events = [e for e in _events(acme) if e.type == "transcript.segment.created"]
    assert len(segment_events) == 2
    rows = list(Segment.objects.filter(transcript__session=session).order_by("sequence"))
    for event, row in zip(segment_events, rows):
        assert event.data == {"sessionId": session.id, "occurredAt": event.data["occurredAt"], **flat_segment_repr(row)}
        assert set(event.data) == {
            "sessionId", "occurredAt", "id", "sequence", "timestampStart", "timestampEnd",
            "speakerLabel", "text", "confidence", "createdAt",
        }


def test_final_transcript_boards_and_field_edits_record_internal_events_only(acme, monkeypatch):
    session = factories.session(acme, committed=["a"], completed=True)
    public = Event.objects.filter(type__in=EventType.values)
    before = public.count()
    told = []
    monkeypatch.setattr(event_recorded, "send", lambda **kw: told.append(kw["event"]))
    recordings.write_final_transcript(session=session, segments=factories.segments(["final", "words"]))
    recordings.publish_board(session=session, board_id="summary", payload={"x": 1}, source_revision_kind="final")
    recordings.publish_board(session=session, board_id="summary", payload={"x": 2}, source_revision_kind="final")
    recordings.update_session(session=session, label="Renamed")
    recordings.update_session(session=session, label="Renamed")  # no change, no event
    assert public.count() == before and told == []  # no public event, no receiver told
    internal = list(Event.objects.filter(workspace=acme, type__in=filters.INTERNAL_TYPES).order_by("position", "id"))
    assert [(e.type, e.session_id) for e in internal] == [
        ("transcript.revision.replaced", session.id), ("board.version.created", session.id),
        ("board.version.created", session.id), ("session.updated", session.id)]
    final = Transcript.objects.get(session=session, revision_kind="final")
    assert internal[0].data == {"sessionId": session.id, "revisionKind": "final", "transcriptId": final.id,
                                "segments": 2, "occurredAt": internal[0].data["occurredAt"]}
    assert [(e.data["boardId"], e.data["version"], e.data["previousVersion"]) for e in internal[1:3]] == [
        ("summary", 1, None), ("summary", 2, 1)]
    assert internal[3].data["fields"] == ["label"]


def test_envelope_has_exactly_the_four_keys_and_millisecond_z_time(acme):
    recordings.create_session(workspace=acme)
    envelope = event_envelope(_events(acme)[0])
    assert set(envelope) == {"type", "sessionId", "occurredAt", "data"}
    assert envelope["occurredAt"].endswith("Z") and len(envelope["occurredAt"]) == len("2026-01-01T00:00:00.000Z")


def test_ids_sort_by_time(acme):
    session = recordings.create_session(workspace=acme)
    recordings.append_committed_segments(session=session, segments=factories.segments(["a", "b", "c"]))
    ids = [e.id for e in Event.objects.filter(workspace=acme).order_by("occurred_at", "id")]
    assert ids[0] < ids[-1]


@pytest.mark.django_db(transaction=True)
def test_nothing_is_recorded_or_announced_when_the_transaction_rolls_back(monkeypatch):
    ws = factories.workspace("rollback")
    announced = []
    monkeypatch.setattr(fanout, "announce_committed", announced.extend)
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            session = recordings.create_session(workspace=ws)
            recordings.append_committed_segments(session=session, segments=factories.segments(["x"]))
            raise RuntimeError("boom")
    assert Event.objects.filter(workspace=ws).count() == 0
    assert announced == []
    # And a committed change is announced once, after commit.
    recordings.create_session(workspace=ws)
    assert [e.type for e in announced] == ["session.created"]


def test_receivers_run_inside_the_recording_transaction(acme):
    seen = []

    def receiver(sender, event, **kwargs):
        seen.append((event.id, transaction.get_connection().in_atomic_block))

    event_recorded.connect(receiver)
    try:
        recordings.create_session(workspace=acme)
    finally:
        event_recorded.disconnect(receiver)
    [(event_id, in_atomic)] = seen
    assert in_atomic and Event.objects.filter(pk=event_id).exists()
