"""Search index upkeep: `services.compact_search_index` merges what writes left scattered,
hourly on the task cluster and after bulk loads, and no search result changes. PostgreSQL's
index by revision has nothing to merge."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils.module_loading import import_string
from django_q.models import Schedule

from apps.recordings import services
from apps.recordings.search import search_transcripts
from tests import factories


def fts5_btrees() -> int:
    """SQLite: how many b-trees (segments) the FTS5 index holds now."""
    with connection.cursor() as db:
        db.execute("SELECT count(DISTINCT segid) FROM recordings_segment_fts_idx")
        return db.fetchone()[0]


def every_hit(workspace, query: str) -> list[tuple[str, str]]:
    hits, _ = search_transcripts(workspace=workspace, query=query, limit=100)
    return [(hit.transcript.id, hit.snippet) for hit in hits]


@pytest.fixture
def appended_one_by_one(acme):
    """Twelve sessions, each written in transactions of its own: FTS5 flushes a b-tree per write."""
    for i in range(12):
        session = factories.session(acme, label=f"Session {i}")
        for words in (f"budget review number {i}", f"roadmap talk {i}", "budget again"):
            services.append_committed_segments(session=session, segments=factories.segments([words]))
    return acme


def test_compacting_keeps_every_match_and_its_order(appended_one_by_one):
    acme = appended_one_by_one
    queries = ["budget", "roadmap", "budget review", "again number", "zeppelin"]
    before = {q: every_hit(acme, q) for q in queries}

    # PostgreSQL's index by revision is btrees that writes keep in order: nothing to merge.
    steps = services.compact_search_index()
    assert steps >= 1 if connection.vendor == "sqlite" else steps == 0

    assert {q: every_hit(acme, q) for q in queries} == before
    assert len(before["budget"]) == 12 and before["zeppelin"] == []


def set_fts5_automerge(value: int) -> None:
    with connection.cursor() as db:
        db.execute("INSERT INTO recordings_segment_fts(recordings_segment_fts, rank) VALUES ('automerge', %s)", [value])


def test_sqlite_compacting_merges_the_index_btrees(appended_one_by_one):
    """How many b-trees appends leave is FTS5's to decide, not the test's: it merges a level
    once four share it (`automerge`), together with whatever the index already held. So the
    scattered index is made here: merged first, then written with automatic merging off, which
    leaves one b-tree per write, and the test asserts that it is scattered before compacting."""
    if connection.vendor != "sqlite":
        pytest.skip("FTS5 is SQLite's index")
    session = factories.session(appended_one_by_one, label="Scattered")
    services.compact_search_index()
    settled = fts5_btrees()
    set_fts5_automerge(0)
    try:
        for i in range(4):
            services.append_committed_segments(session=session, segments=factories.segments([f"budget {i}"]))
    finally:
        set_fts5_automerge(4)  # FTS5's default (the test's transaction is rolled back as well)
    scattered = fts5_btrees()
    assert scattered >= settled + 4, "each write should have left a b-tree of its own"

    steps = services.compact_search_index()

    # usermerge 2 (migration 0004): at most one b-tree per level is left, far fewer than before.
    assert steps > 1 and 1 <= fts5_btrees() < scattered
    # Nothing left to merge: one step that changes nothing.
    merged = fts5_btrees()
    assert services.compact_search_index() == 1 and fts5_btrees() == merged


def test_sqlite_merge_setting_is_installed_by_the_migration(db):
    if connection.vendor != "sqlite":
        pytest.skip("FTS5 is SQLite's index")
    with connection.cursor() as cursor:
        cursor.execute("SELECT v FROM recordings_segment_fts_config WHERE k = 'usermerge'")
        assert cursor.fetchone() == (2,)


def test_the_hourly_schedule_compacts_the_index(appended_one_by_one):
    schedule = Schedule.objects.get(name="connect.recordings.compact_search_index")
    assert (schedule.schedule_type, schedule.repeats) == (Schedule.HOURLY, -1)
    steps = import_string(schedule.func)()
    assert steps >= 1 if connection.vendor == "sqlite" else steps == 0
    if connection.vendor == "sqlite":
        assert services.compact_search_index() == 1  # the scheduled run left nothing to merge


def test_a_bulk_load_ends_compacted(acme):
    """seed_demo's path: import, then refresh_statistics, which compacts the index."""
    factories.session(acme, committed=["budget review"])
    services.refresh_statistics()
    if connection.vendor == "sqlite":
        assert services.compact_search_index() == 1
    assert every_hit(acme, "budget") != []
