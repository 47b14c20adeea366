"""The SQL of PostgreSQL's candidate plans (built here, run by `postgresql`). No Django.

The index (migration 0003) is a GIN index over a generated tsvector of lexemes prefixed with the
workspace id ('<workspace>:word'), so a posting list is one workspace's; `connect_search_query`
folds the query's words as the text was folded and prefixes them alike. Revisions are ordered
by transcript (created_at, id), newest first; a window's bounds are such pairs, both inclusive.

Both plans return one row per revision, newest first, with its first CANDIDATE_SEGMENTS
matching segments: (transcript id, created_at, session created_at, sequences, texts), the two
arrays NULL when none matches. A row per revision, not per segment: psycopg parses every
timestamp it returns.
"""

from __future__ import annotations

from typing import Any

import apps.recordings.search.windows as windows

# Every word, folded as the text was, keyed by the workspace (migration 0003): (workspace id, words).
TSQUERY = "connect_search_query(%s, %s)"
# The workspace's segments that contain every word: (workspace id, words).
MATCHES_SQL = f"SELECT 1 FROM recordings_segment AS seg WHERE seg.search_vector @@ {TSQUERY}"


def revision_filters(
    prefix: str, workspace_id: Any, revision_kind: str | None, resume: Any, through: Any, down_to: Any
) -> tuple[list[str], list[Any]]:
    """WHERE terms on transcripts (columns prefixed with `prefix`) and their values: the
    workspace's, of `revision_kind` if given, older than `resume`, no newer than `through` and
    no older than `down_to` (each a (created_at, id) pair or None)."""
    where, params = [f"{prefix}workspace_id = %s"], [workspace_id]
    if revision_kind:
        where.append(f"{prefix}revision_kind = %s")
        params.append(revision_kind)
    for bound, op in ((resume, "<"), (through, "<="), (down_to, ">=")):
        if bound is not None:
            where.append(f"({prefix}created_at, {prefix}id) {op} (%s, %s)")
            params += list(bound)
    return where, params


def direct_plan(
    terms: list[str],
    workspace_id: Any,
    revision_kind: str | None,
    resume: Any,
    limit: int,
    through: Any = None,
    down_to: Any = None,
) -> tuple[str, list[Any]]:
    """The direct plan, for words that are not common: every match read through the GIN index,
    never scanning segments, and the `limit` newest matching revisions kept: those older than
    `resume` ((created_at, transcript id); None = from the newest), no newer than `through` and
    no older than `down_to` (a window shown before)."""
    where, params = revision_filters("t.", workspace_id, revision_kind, resume, through, down_to)
    params = [workspace_id, " ".join(terms), *params]
    # The matches first (MATERIALIZED: the planner must not trade the index for an index
    # scan in transcript order to feed the window), then the newest revisions among them.
    sql = f"""
        WITH hit AS MATERIALIZED (
            SELECT seg.transcript_id, seg.sequence FROM recordings_segment AS seg
            WHERE seg.search_vector @@ {TSQUERY}
        ), m AS (
            SELECT hit.transcript_id, hit.sequence, t.created_at,
                   row_number() OVER (PARTITION BY hit.transcript_id ORDER BY hit.sequence) AS nth
            FROM hit JOIN recordings_transcript AS t ON t.id = hit.transcript_id
            WHERE {" AND ".join(where)}
        ), r AS (
            SELECT DISTINCT transcript_id, created_at FROM m
            ORDER BY created_at DESC, transcript_id DESC LIMIT %s
        )
        SELECT m.transcript_id, m.created_at, s.created_at,
               array_agg(m.sequence ORDER BY m.sequence), array_agg(seg.text ORDER BY m.sequence)
        FROM m JOIN r USING (transcript_id)
        JOIN recordings_segment AS seg ON seg.transcript_id = m.transcript_id AND seg.sequence = m.sequence
        JOIN recordings_transcript AS t ON t.id = m.transcript_id
        JOIN recordings_session AS s ON s.id = t.session_id
        WHERE m.nth <= %s
        GROUP BY m.transcript_id, m.created_at, s.created_at
        ORDER BY m.created_at DESC, m.transcript_id DESC
    """
    return sql, params + [limit, windows.CANDIDATE_SEGMENTS]


def walk(
    terms: list[str],
    workspace_id: Any,
    revision_kind: str | None,
    resume: Any,
    revisions: int,
    through: Any = None,
    down_to: Any = None,
) -> tuple[str, list[Any]]:
    """The walk, for common words: `revisions` of the workspace's revisions older than `resume`
    (and within `through` … `down_to`, as in `direct_plan`), newest first, each probed for its
    first matching segments through the (transcript_id, sequence) index, which for a common
    word finds them within a few rows. Run with enable_sort off (see `postgresql`)."""
    where, params = revision_filters("", workspace_id, revision_kind, resume, through, down_to)
    sql = f"""
        SELECT t.id, t.created_at, s.created_at, m.sequences, m.texts
        FROM (
            SELECT id, created_at, session_id FROM recordings_transcript WHERE {" AND ".join(where)}
            ORDER BY created_at DESC, id DESC LIMIT %s
        ) AS t
        JOIN recordings_session AS s ON s.id = t.session_id
        LEFT JOIN LATERAL (
            SELECT array_agg(x.sequence ORDER BY x.sequence) AS sequences,
                   array_agg(x.text ORDER BY x.sequence) AS texts
            FROM (
                SELECT seg.sequence, seg.text FROM recordings_segment AS seg
                WHERE seg.transcript_id = t.id AND seg.search_vector @@ {TSQUERY}
                -- the unique (transcript_id, sequence) index in order: stops at the first matches
                ORDER BY seg.transcript_id, seg.sequence LIMIT %s
            ) AS x
        ) AS m ON true
    """
    return sql, params + [revisions, workspace_id, " ".join(terms), windows.CANDIDATE_SEGMENTS]
