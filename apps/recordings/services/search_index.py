"""Search index upkeep: what writes leave scattered in the transcripts' full-text index is
merged in short steps, hourly by the task cluster and after bulk loads. The schedule names
`apps.recordings.services.compact_search_index`, the package's re-export, so stored schedules
keep resolving wherever the function lives."""

from __future__ import annotations

from django.db import transaction


# Leaf pages one merge step writes: a step is one short write transaction, so appends wait at
# most that long behind it.
SEARCH_MERGE_PAGES = 500
SEARCH_MERGE_MAX_STEPS = 2000  # a bound per run, should writes keep adding b-trees; the next run goes on


def compact_search_index() -> int:
    """Merge what writes left scattered in the search index, in short steps; returns the steps.
    Run hourly by the task cluster (schedule `connect.recordings.compact_search_index`) and after
    bulk loads.

    SQLite: FTS5 adds a b-tree per flushed write and merges them only once four share a level
    (`automerge`), so a live or bulk-loaded index holds many, and every search seeks each word
    in every one of them. Migration 0004 sets `usermerge` to 2, so a 'merge' step joins any two
    b-trees of one level: the index ends with at most one per level, and a run after an hour of
    appends rewrites the small recent ones, not the whole index.
    PostgreSQL: nothing to merge (0 steps). Its search reads the index by revision, a table of
    btree indexes (migration 0005), which writes keep in order."""
    from django.db import connection

    if connection.vendor == "sqlite":
        merge = "INSERT INTO recordings_segment_fts(recordings_segment_fts, rank) VALUES ('merge', %s)"
        for steps in range(1, SEARCH_MERGE_MAX_STEPS + 1):
            with transaction.atomic(), connection.cursor() as cursor:
                before = connection.connection.total_changes
                cursor.execute(merge, [SEARCH_MERGE_PAGES])
                # FTS5's own signal: a step that merged nothing changes fewer than two rows.
                if connection.connection.total_changes - before < 2:
                    break
        return steps
    return 0
