"""The SQL of PostgreSQL's search (built here, run by `postgresql`). No Django.

All of it reads `recordings_revisionword` (migration 0005): one row per (revision, word) with
the sorted sequences of the revision's segments that contain the word; words are the lexemes of
the segments' search_vector without the workspace prefix (migration 0003), and a query's words
are folded by the same text search configuration, `connect_search`. Revisions are ordered by
transcript (created_at, id), newest first; a window's bounds are such pairs, both inclusive.
"""

from __future__ import annotations

from typing import Any

# The query's words as the segments' search_vector holds them (its lexemes without the
# workspace prefix: migration 0003's connect_search_vector), each with its count of revisions.
WORDS_SQL = """
    SELECT q.word, (SELECT count(*) FROM (
        SELECT 1 FROM recordings_revisionword AS w WHERE w.workspace_id = %s AND w.word = q.word LIMIT %s
    ) AS c)
    FROM unnest(tsvector_to_array(to_tsvector('connect_search'::regconfig, %s))) AS q(word)
"""
TEXTS_SQL = """
    SELECT t.id, s.created_at, array_agg(seg.sequence ORDER BY seg.sequence), array_agg(seg.text ORDER BY seg.sequence)
    FROM unnest(%s::varchar[], %s::integer[]) AS c(transcript_id, sequence)
    JOIN recordings_segment AS seg ON seg.transcript_id = c.transcript_id AND seg.sequence = c.sequence
    JOIN recordings_transcript AS t ON t.id = c.transcript_id
    JOIN recordings_session AS s ON s.id = t.session_id
    GROUP BY t.id, s.created_at
"""
OTHER_WORD_SQL = "SELECT transcript_id, sequences FROM recordings_revisionword WHERE transcript_id = ANY(%s) AND word = %s"


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
    with the sequences its rows for `words[:SQL_WORDS]` share (its segments that hold each of
    them), intersected in the database so that no long list leaves it: the first
    `per_revision` of them when that is every word, else all (the rest are checked after);
    an empty array when they share none."""
    driver, params = driver_sql(workspace_id, words[0], revision_kind, resume, through, down_to, limit)
    others = words[1:SQL_WORDS]  # read when called: tests lower it
    cut = len(words) <= SQL_WORDS  # every word is in this batch's SQL
    if not others:
        shared = "d.sequences[1:%s]" if cut else "d.sequences"
    else:
        common = " INTERSECT ".join(["SELECT unnest(d.sequences)"] + [f"SELECT unnest(o{n}.sequences)"
                                                                       for n in range(1, len(others) + 1)])  # fmt: skip
        shared = f"ARRAY(SELECT s FROM ({common}) AS i(s) ORDER BY s{' LIMIT %s' if cut else ''})"
    joins = "".join(f" LEFT JOIN recordings_revisionword AS o{n} ON o{n}.transcript_id = d.transcript_id"
                    f" AND o{n}.word = %s" for n in range(1, len(others) + 1))  # fmt: skip
    sql = (f"SELECT d.transcript_id, d.created_at, {shared} FROM ({driver}) AS d{joins}"
           " ORDER BY d.created_at DESC, d.transcript_id DESC")  # fmt: skip
    # Parameters in the order of their placeholders: the cut, the driver's, the other words.
    return sql, [*([per_revision] if cut else []), *params, *others]
