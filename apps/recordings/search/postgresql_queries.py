"""The SQL of PostgreSQL's search (built here, run by `postgresql`). No Django.

All of it reads `recordings_revisionword` (migration 0005): one row per (revision, word) with
the sorted sequences of the revision's segments that contain the word; words are the lexemes of
the segments' search_vector without the workspace prefix (migration 0003), and a query's words
are folded by the same text search configuration, `connect_search`. Revisions are ordered by
transcript (created_at, id), newest first; a window's bounds are such pairs, both inclusive.
"""

from __future__ import annotations

from typing import Any

def epoch_us(column: str) -> str:
    """A timestamp column as microseconds since the epoch (exact: extract gives a numeric):
    what the engine reads instead of timestamptz values (`postgresql.instant`)."""
    return f"(extract(epoch FROM {column}) * 1000000)::bigint"


# The query's words as the segments' search_vector holds them (its lexemes without the
# workspace prefix: migration 0003's connect_search_vector), each with its count of revisions.
WORDS_SQL = """
    SELECT q.word, (SELECT count(*) FROM (
        SELECT 1 FROM recordings_revisionword AS w WHERE w.workspace_id = %s AND w.word = q.word LIMIT %s
    ) AS c)
    FROM unnest(tsvector_to_array(to_tsvector('connect_search'::regconfig, %s))) AS q(word)
"""
# The candidate segments' texts and starts, each revision's in one row with what a hit shows of
# the revision and its session (windows.HitTranscript, HitSession). The segments are grouped
# first, then each revision's transcript and session read by key (OFFSET 0 keeps that a lookup
# per revision, not a hash join over every transcript and session of the database).
TEXTS_SQL = f"""
    SELECT c.transcript_id, x.revision_kind, x.id, x.label, x.status,
           {epoch_us("x.started_at")}, {epoch_us("x.ended_at")}, {epoch_us("x.created_at")}, c.sequences, c.texts, c.starts
    FROM (
        SELECT seg.transcript_id, array_agg(seg.sequence ORDER BY seg.sequence) AS sequences,
               array_agg(seg.text ORDER BY seg.sequence) AS texts,
               array_agg(seg.timestamp_start ORDER BY seg.sequence) AS starts
        FROM unnest(%s::varchar[], %s::integer[]) AS c(transcript_id, sequence)
        JOIN recordings_segment AS seg ON seg.transcript_id = c.transcript_id AND seg.sequence = c.sequence
        GROUP BY seg.transcript_id
    ) AS c
    CROSS JOIN LATERAL (
        SELECT t.revision_kind, s.id, s.label, s.status, s.started_at, s.ended_at, s.created_at
        FROM recordings_transcript AS t JOIN recordings_session AS s ON s.id = t.session_id
        WHERE t.id = c.transcript_id OFFSET 0
    ) AS x
"""
OTHER_WORD_SQL = (
    "SELECT transcript_id, sequences FROM recordings_revisionword WHERE transcript_id = ANY(%s::varchar[]) AND word = %s"
)


def driver_sql(workspace_id: Any, word: str, revision_kind: str | None, resume: Any, through: Any,
               down_to: Any, limit: int) -> tuple[str, list[Any]]:  # fmt: skip
    """The newest revisions containing `word` (older than `resume`, within `through` … `down_to`,
    each a (created_at, id) pair or None), with the word's sequences: one range of the index."""
    where, params = ["workspace_id = %s", "word = %s"], [workspace_id, word]
    if revision_kind:
        where.append("revision_kind = %s")
        params.append(revision_kind)
    for bound, op in ((resume, "<"), (through, "<="), (down_to, ">=")):
        if bound is not None:
            where.append(f"(created_at, transcript_id) {op} (%s, %s)")
            params += list(bound)
    sql = (
        "SELECT transcript_id, created_at, sequences FROM recordings_revisionword"
        f" WHERE {' AND '.join(where)} ORDER BY created_at DESC, transcript_id DESC LIMIT %s"
    )
    return sql, params + [limit]


SQL_WORDS = 8  # words a batch intersects in SQL (the rarest); the others, if any, are checked after


def batch_sql(workspace_id: Any, words: list[str], revision_kind: str | None, resume: Any, through: Any,
              down_to: Any, limit: int, per_revision: int) -> tuple[str, list[Any]]:  # fmt: skip
    """One batch: the `limit` newest revisions containing `words[0]` (as `driver_sql`), each
    with its created_at (`epoch_us`) and the sequences its rows for `words[:SQL_WORDS]` share
    (its segments that hold each of them), intersected in the database so that no long list
    leaves it: the first `per_revision` of them when that is every word, else all (the rest are
    checked after); an empty array or NULL when they share none.

    The words are intersected one after the other in C (`recordings_sequences_and`, migration
    0006), each in a subquery of its own that reads the word's row by primary key only while
    the intersection so far is not empty (a one-time filter: OFFSET 0 keeps the subquery from
    being merged into the join, where the test would come after the read)."""
    driver, params = driver_sql(workspace_id, words[0], revision_kind, resume, through, down_to, limit)
    others = words[1:SQL_WORDS]  # read when called: tests lower it
    cut = len(words) <= SQL_WORDS  # every word is in this batch's SQL
    shared, joins = "d.sequences", []
    for n in range(1, len(others) + 1):
        gate = f"cardinality({shared}) > 0 AND " if n > 1 else ""
        joins.append(f" LEFT JOIN LATERAL (SELECT recordings_sequences_and({shared}, o.sequences) AS s"
                     f" FROM recordings_revisionword AS o WHERE {gate}o.transcript_id = d.transcript_id"
                     f" AND o.word = %s OFFSET 0) AS a{n} ON true")  # fmt: skip
        shared = f"a{n}.s"
    selected = f"{shared}[1:%s]" if cut else shared
    sql = (f"SELECT d.transcript_id, {epoch_us('d.created_at')}, {selected} FROM ({driver}) AS d{''.join(joins)}"
           " ORDER BY d.created_at DESC, d.transcript_id DESC")  # fmt: skip
    # Parameters in the order of their placeholders: the cut, the driver's, the other words.
    return sql, [*([per_revision] if cut else []), *params, *others]
