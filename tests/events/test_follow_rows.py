"""The follower's read (apps/events/selectors.follow_log): one written-out statement over every
workspace's log, its frames made from the stored text (representations.frame_for_row). It must
answer exactly what the model path (`read_log` without a workspace + `frame_for`) answers: the
same events, the same place, the same frame bytes, on both databases."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import orjson

from apps.events import selectors
from apps.events.models import Event, EventType
from apps.events.positions import Position
from apps.events.representations import frame_for, frame_for_row
from apps.events.services import record_event
from apps.recordings import services
from apps.recordings.services import SegmentInput

UTC = timezone.utc
# Data whose keys a stored jsonb gives back in another order than the declaration's, keys the
# declaration does not know, text that must survive the round trip, numbers of every kind.
ODD = [
    {"previousStatus": "recording", "status": "processing", "sessionId": "s1", "zz": [1, -2, 3.5e-7, True, None]},
    {"z": 1, "a": "Grüße — 会議 🎉 \u2028line\u2029 \"q\" back\\slash\t", "sessionId": "s2", "empty": {},
     "big": 2**53 + 1},
]


def record_life(workspace) -> list[str]:
    """A session's life through the services (the events as producers record them), then odd
    documents recorded directly; their ids."""
    start = datetime(2026, 11, 25, 10, 0, 59, 999999, tzinfo=UTC)
    session = services.create_session(workspace=workspace, label="Weekly", at=start)
    services.append_committed_segments(session=session, at=start + timedelta(seconds=1), segments=[
        SegmentInput(0, 1500, "Grüße, hello", "A", 0.1 + 0.2), SegmentInput(1500, 2000, "second", None, None)])
    services.change_session_status(session=session, status="processing", at=start + timedelta(hours=5, microseconds=1))
    odd = [record_event(workspace_id=workspace.id, type=t, session_id=d["sessionId"], occurred_at=start, data=d)
           for t, d in zip((EventType.SESSION_STATUS_CHANGED, EventType.TRANSCRIPT_SEGMENT_CREATED), ODD)]
    return list(Event.objects.filter(workspace=workspace, session_id=session.pk).values_list("id", flat=True)) + [
        e.id for e in odd]


def read_both(after: Position | None, limit: int):
    """Both readers, the rows' read between two of the model path's: the horizon is the whole
    cluster's on PostgreSQL and only moves forward, so when the two model reads agree it held
    still for the rows' read as well."""
    for _ in range(100):
        events, place = selectors.read_log(after=after, limit=limit)
        rows, row_place = selectors.follow_log(after=after, limit=limit)
        _, again = selectors.read_log(after=after, limit=limit)
        if (again.seq, again.event_id) == (place.seq, place.event_id):
            return events, place, rows, row_place
    raise AssertionError("the log's horizon never held still for three reads")


def test_rows_answer_what_the_model_path_answers(acme, globex):
    mine = record_life(acme) + record_life(globex)  # two workspaces interleave: the follower reads both
    stored = sorted(Event.objects.filter(pk__in=mine), key=lambda e: (e.position, e.id))
    assert len(stored) == len(mine) == 12
    for limit in (1, 3, 1000):
        for after in (None, *(Position(e.position, e.id, 0) for e in stored[:4]), Position(stored[2].position, "", 0)):
            events, place, rows, row_place = read_both(after, limit)
            assert [r.id for r in rows] == [e.id for e in events]
            assert (row_place.seq, row_place.event_id) == (place.seq, place.event_id)
            assert [(r.workspace_id, r.type, r.session_id, r.position) for r in rows] == [
                (e.workspace_id, e.type, e.session_id, e.position) for e in events]
            assert [frame_for_row(r) for r in rows] == [frame_for(e) for e in events]
    events, _, rows, _ = read_both(None, 1000)
    assert {r.id for r in rows} >= set(mine)


def test_a_frame_carries_the_data_in_its_declaration_order(acme):
    record_life(acme)
    rows, _ = selectors.follow_log(after=None, limit=1000)
    frame = next(frame_for_row(r) for r in rows if r.type == EventType.TRANSCRIPT_SEGMENT_CREATED)
    envelope = orjson.loads(frame.split(b"\ndata: ", 1)[1])
    assert list(envelope) == ["type", "sessionId", "occurredAt", "data"]
    assert envelope["occurredAt"] == "2026-11-25T10:01:00.999Z"  # truncated, as iso_ms does
    from apps.events.shapes import DATA_SHAPES

    declared = [f.name for f in DATA_SHAPES[EventType.TRANSCRIPT_SEGMENT_CREATED].fields]
    assert list(envelope["data"]) == [k for k in declared if k in envelope["data"]]
    odd = next(orjson.loads(frame_for_row(r).split(b"\ndata: ", 1)[1]) for r in rows if r.session_id == "s2")
    assert odd["data"] == ODD[1]  # unknown keys kept, text and numbers unchanged
