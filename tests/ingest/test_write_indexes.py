"""The indexes an append writes, pinned on PostgreSQL (docs/decisions/ingest-api.md, "Indexes the
append writes"): each table the append writes holds the indexes its reads use and no other, and
each of those reads is planned through its index, never a scan of the table.

Plans are asked for with sequential scans priced out (`enable_seqscan = off`): on a test's few
rows the planner would rightly read the whole table, so what is pinned is that an index can
serve the read; a read no index serves is still planned as a scan, and fails here."""

from __future__ import annotations

import re
import time

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.events import selectors as log
from apps.events import services as events
from apps.events.positions import Position
from apps.ingest import idempotency
from apps.ingest.models import IdempotencyKey
from apps.recordings import selectors as recordings
from apps.recordings import services
from apps.recordings.models import Session
from tests import factories
from tests.ingest.conftest import batch

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's indexes and plans")

# Every index on the tables an append writes, and the reads that need it.
INDEXES = {
    "ingest_idempotencykey": {
        "ingest_idempotencykey_pkey",  # the answer stored, or the claim released, by id
        "idempotency_one_per_key",  # one claim per (credential, key); a repeat's lookup
        "idempotency_created",  # the hourly purge, by age
    },
    "recordings_segment": {
        "recordings_segment_pkey",  # ids are unique; vectors' segments, the backfill's walk
        "segment_unique_sequence",  # one segment per (revision, sequence); search's texts; a final revision
        "segment_commit_order",  # a committed revision in its order; the append's numbering
    },
    "recordings_revisionword": {
        "recordings_revisionword_pkey",  # the upsert of the insert trigger; a word of a revision
        "revision_word_newest",  # search: the newest revisions containing a word
    },
    "events_event": {
        "events_event_pkey",  # an event by id (resume, webhook recover, purge's deletes)
        "event_ws_position",  # a workspace's log in order (REST pages, resume)
        "event_position",  # the whole log in order (the follower)
        "event_type_id",  # purge: a type's oldest ids first; the admin list filtered by type
    },
}
TABLES = tuple(INDEXES)


def plan(sql: str, params: list | None = None) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def scans(text: str) -> set[str]:
    return set(re.findall(r"Seq Scan on (\w+)", text))


@pytest.fixture
def recorded(ingest, acme_ingest_key) -> Session:
    """A recorder's session with two appends, one of them keyed, and its events."""
    assert ingest.put("rec-1", {"label": "Standup"}, acme_ingest_key).status_code == 201
    assert ingest.post("rec-1/segments", batch(0, 3), acme_ingest_key).status_code == 200
    keyed = ingest.post("rec-1/segments", batch(3, 2), acme_ingest_key, **{"Idempotency-Key": "k-1"})
    assert keyed.status_code == 200, keyed.content
    return Session.objects.get(external_id="rec-1")


def test_the_tables_an_append_writes_hold_only_the_indexes_reads_use(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename, indexname FROM pg_indexes WHERE tablename = ANY(%s)", [list(TABLES)])
        found: dict[str, set[str]] = {}
        for table, index in cursor.fetchall():
            found.setdefault(table, set()).add(index)
    assert found == INDEXES


def test_every_statement_of_a_keyed_append_reads_through_an_index(ingest, acme_ingest_key, recorded):
    with CaptureQueriesContext(connection) as captured:
        answer = ingest.post("rec-1/segments", batch(5, 3), acme_ingest_key, **{"Idempotency-Key": "k-2"})
    assert answer.status_code == 200, answer.content
    statements = [q["sql"] for q in captured.captured_queries
                  if any(t in q["sql"] for t in TABLES) and not q["sql"].upper().startswith(("SAVEPOINT", "RELEASE"))]
    assert len(statements) >= 4, statements  # claim, numbering, insert, events, answer
    for sql in statements:
        text = plan(sql)
        assert not scans(text) & set(TABLES), (sql, text)
    numbering = next(s for s in statements if s.startswith("INSERT INTO recordings_segment"))
    assert "segment_commit_order" in plan(numbering) or "segment_unique_sequence" in plan(numbering)


def test_a_repeated_key_is_found_by_its_unique_constraint_and_answered_by_id(db, alice):
    claimed = IdempotencyKey.objects.create(workspace=alice.workspace, credential_id="cred", key="k",
                                            fingerprint="f", created_at=timezone.now())
    lookup = IdempotencyKey.objects.filter(credential_id="cred", key="k")
    assert "idempotency_one_per_key" in plan(*_sql(lookup))
    store = IdempotencyKey.objects.filter(pk=claimed.pk)
    assert "ingest_idempotencykey_pkey" in plan(*_sql(store))
    with CaptureQueriesContext(connection) as captured:
        IdempotencyKey.objects.filter(created_at__lt=timezone.now() - idempotency.KEEP).delete()
    purge = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("DELETE")]
    assert purge and all("idempotency_created" in plan(sql) for sql in purge), purge


def test_the_log_is_read_through_its_indexes(recorded, globex):
    workspace_id = recorded.workspace_id
    # Most of the log is another workspace's, so that one workspace's page is a range of its own.
    events.record_events(workspace_id=globex.id, session_id="other", occurred_at=timezone.now(),
                         items=[("transcript.segment.created", {"n": n}) for n in range(300)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE events_event")
    after = Position(0, "", 0)
    sql, params = log._rows_statement("postgresql", after=after, limit=100, workspace_id=workspace_id, types=None,
                                      session_id=None, bound=2**40, own=None)  # fmt: skip
    assert "event_ws_position" in plan(sql, params)
    sql, params = log._statement("postgresql", "follow", after=after, workspace_id=None, types=None,
                                 session_id=None, bound=2**40, own=None)  # fmt: skip
    assert "event_position" in plan(sql, [*params, 100])
    event_id = log.read_log(after=None, limit=1, workspace_id=workspace_id, settled=False)[0][0].id
    with CaptureQueriesContext(connection) as captured:
        assert log.position_of(workspace_id=workspace_id, event_id=event_id) is not None
    assert "events_event_pkey" in plan(captured.captured_queries[0]["sql"])
    with CaptureQueriesContext(connection) as captured:  # webhook recover: a time window of ids
        list(log.events_recorded_between(workspace_id=workspace_id, types=["session.created"], start_ms=0,
                                         end_ms=2**45, chunk=100))  # fmt: skip
    for query in captured.captured_queries:
        assert not scans(plan(query["sql"])), query["sql"]
    # The purge, 40 days on (everything is past retention), undone: its reads by type. A type
    # that is most of the log may be read through the primary key; a rare one needs its index.
    with transaction.atomic(), CaptureQueriesContext(connection) as captured:
        events.purge_events(now_ms=int(time.time() * 1000) + 40 * 86_400_000)
        transaction.set_rollback(True)
    by_type = {re.search(r'"events_event"\."type" = \'([\w.]+)\'', q["sql"]).group(1): q["sql"]
               for q in captured.captured_queries if q["sql"].startswith("SELECT") and '"type" =' in q["sql"]}
    assert not any(scans(plan(sql)) for sql in by_type.values()), by_type
    assert "event_type_id" in plan(by_type["session.created"]), by_type["session.created"]


def test_a_revision_is_read_through_its_indexes(recorded, alice):
    """The transcript read, both orders. (Search's plans, which read the index by revision and a
    matched revision's segments by (revision, sequence), are pinned in
    tests/recordings/test_search_postgresql_batches.py and test_search_scale.py.)"""
    services.write_final_transcript(session=recorded, segments=factories.segments(["one", "two"]))
    with CaptureQueriesContext(connection) as captured:
        rows = recordings.transcript_rows(workspace=alice.workspace, session_id=recorded.id)
    assert sorted(len(segments) for _, segments in rows.revisions) == [2, 5]
    reads = [q["sql"] for q in captured.captured_queries if "recordings_segment" in q["sql"]]
    in_commit_order = 'ORDER BY "session_committed_index", "sequence"'
    committed, final = sorted(reads, key=lambda sql: in_commit_order not in sql)
    assert in_commit_order in committed and 'ORDER BY "sequence"' in final
    assert "segment_commit_order" in plan(committed), committed
    assert "segment_unique_sequence" in plan(final), final


def _sql(queryset) -> tuple[str, list]:
    sql, params = queryset.query.sql_with_params()
    return sql, list(params)
