"""Appending realtime segments (services.append_committed_segments): how they are numbered,
the event each one records, and what one append costs on a long recording (issue 9, point 4)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from apps.events.models import Event, EventType
from apps.recordings import services
from apps.recordings.models import RevisionKind, Segment, Session, Transcript
from apps.recordings.representations import flat_segment_repr
from apps.recordings.services import SegmentInput
from tests import factories


def stored(session: Session) -> list[tuple[int, int, str]]:
    rows = Segment.objects.filter(transcript__session=session, transcript__revision_kind=RevisionKind.COMMITTED)
    return list(rows.order_by("sequence").values_list("sequence", "session_committed_index", "text"))


def segment_events(session: Session) -> list[dict]:
    events = Event.objects.filter(session_id=session.id, type=EventType.TRANSCRIPT_SEGMENT_CREATED)
    return [e.data for e in events.order_by("data__sequence")]


def test_segments_continue_the_sequence_and_commit_index(acme):
    session = factories.session(acme, committed=["a", "b", "c"])
    services.append_committed_segments(session=session, segments=factories.segments(["d", "e"]))
    assert stored(session) == [(0, 0, "a"), (1, 1, "b"), (2, 2, "c"), (3, 3, "d"), (4, 4, "e")]


def test_first_append_creates_the_committed_revision(acme):
    session = factories.session(acme)
    services.append_committed_segments(session=session, segments=factories.segments(["hello"]))
    services.append_committed_segments(session=session, segments=factories.segments(["again"]))
    assert Transcript.objects.filter(session=session).count() == 1
    assert stored(session) == [(0, 0, "hello"), (1, 1, "again")]


def test_an_empty_append_creates_the_revision_and_nothing_else(acme):
    session = factories.session(acme)
    assert services.append_committed_segments(session=session, segments=[]) == []
    assert Transcript.objects.filter(session=session, revision_kind=RevisionKind.COMMITTED).count() == 1
    assert stored(session) == [] and segment_events(session) == []


def test_returned_segments_are_the_stored_rows(acme):
    session = factories.session(acme, committed=["before"])
    inputs = [
        SegmentInput(timestamp_start=10, timestamp_end=20, text="no speaker, no confidence"),
        SegmentInput(timestamp_start=30, timestamp_end=40, text="both", speaker_label="Ana", confidence=0.75),
    ]
    rows = services.append_committed_segments(session=session, segments=inputs)
    assert [r.sequence for r in rows] == [1, 2]
    for row in rows:
        assert not row._state.adding
        again = Segment.objects.get(pk=row.pk)
        fields = ("workspace_id", "transcript_id", "sequence", "session_committed_index", "timestamp_start",
                  "timestamp_end", "speaker_label", "text", "confidence", "created_at")  # fmt: skip
        assert [getattr(row, f) for f in fields] == [getattr(again, f) for f in fields]
    assert (rows[0].speaker_label, rows[0].confidence) == (None, None)


def test_each_segment_records_its_event(acme):
    session = factories.session(acme, committed=["before"])
    rows = services.append_committed_segments(session=session, segments=factories.segments(["one", "two"]))
    events = segment_events(session)[1:]
    assert [e["sequence"] for e in events] == [1, 2]
    for event, row in zip(events, rows):
        assert event == {"sessionId": session.id, "occurredAt": event["occurredAt"], **flat_segment_repr(row)}


def test_segments_and_events_roll_back_together(acme):
    session = factories.session(acme, committed=["kept"])
    with pytest.raises(RuntimeError), transaction.atomic():
        services.append_committed_segments(session=session, segments=factories.segments(["lost"]))
        raise RuntimeError("the caller's transaction fails")
    assert stored(session) == [(0, 0, "kept")]
    assert [e["text"] for e in segment_events(session)] == ["kept"]


def test_an_append_larger_than_one_statement_is_numbered_contiguously(acme):
    session = factories.session(acme, committed=["first"])
    texts = [f"segment {i}" for i in range(1, services.transcripts._APPEND_BATCH * 2 + 2)]
    rows = services.append_committed_segments(session=session, segments=factories.segments(texts))
    assert [r.sequence for r in rows] == list(range(1, len(texts) + 1))
    assert stored(session) == [(i, i, t) for i, t in enumerate(["first", *texts])]


def test_appending_to_a_deleted_session_fails(acme):
    session = factories.session(acme, committed=["a"])
    Session.objects.filter(pk=session.pk).delete()
    with pytest.raises(Session.DoesNotExist):
        services.append_committed_segments(session=session, segments=factories.segments(["b"]))


def recordings_statements(queries) -> list[str]:
    return [q["sql"] for q in queries if "recordings_" in q["sql"]]


def test_one_append_costs_the_same_statements_on_a_long_recording(acme):
    """Lock with lookup, then the numbered insert: 2 statements on recordings tables, whether
    the session holds 1 or 1,200 segments (no aggregate, no per-transcript index rewrite)."""
    short = factories.session(acme, committed=["one"])
    long = factories.session(acme, committed=[f"segment {i}" for i in range(1200)])
    counts = []
    for session in (short, long):
        with CaptureQueriesContext(connection) as captured:
            services.append_committed_segments(session=session, segments=factories.segments(["live"]))
        mine = recordings_statements(captured.captured_queries)
        assert len(mine) == 2, mine
        assert "FOR UPDATE" in mine[0] or connection.vendor == "sqlite"
        assert mine[1].startswith("INSERT INTO recordings_segment")
        events = [q for q in captured.captured_queries if q["sql"].startswith('INSERT INTO "events_event"')]
        assert len(events) == 1
        counts.append(len(captured.captured_queries))
    assert counts[0] == counts[1]


@pytest.mark.django_db(transaction=True)
def test_concurrent_appenders_number_contiguously():
    """Writers in their own connections, released at once on a session without a committed
    revision yet: every segment lands, numbers 0..n-1 without a gap or a duplicate, one revision."""
    session = factories.session(factories.workspace("acme"), label="shared")
    writers, appends, per_append = 4, 6, 2
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            start.wait(10)
            for i in range(appends):
                texts = [f"w{n} a{i} s{k}" for k in range(per_append)]
                services.append_committed_segments(session=session, segments=factories.segments(texts))
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    total = writers * appends * per_append
    rows = stored(session)
    assert [(seq, idx) for seq, idx, _ in rows] == [(i, i) for i in range(total)]
    assert len({text for _, _, text in rows}) == total
    # One append's segments are consecutive: the lock is held from numbering to commit.
    for seq in range(0, total, per_append):
        assert rows[seq][2].rsplit(" ", 1)[0] == rows[seq + 1][2].rsplit(" ", 1)[0]
    assert Transcript.objects.filter(session=session).count() == 1
    assert [e["sequence"] for e in segment_events(session)] == list(range(total))
