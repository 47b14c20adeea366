"""The SQLite engine: a window's candidates, walked through the workspace's part of the FTS5 index.

The index (migrations 0002-0004) is a contentless FTS5 table whose rowid is
`revision key << SEQUENCE_BITS | sequence`, the revision key `workspace key << REVISION_BITS | n`
with n counting down, so that one workspace is one rowid range and its newest revision comes
first in it. A window is found by walking that range upwards from where the previous window
ended: each step asks FTS5 for the next few matching rowids above the last one, and jumps to
the next revision once a revision has given its segments. Every step is a seek in the index, so
the cost follows the candidates, never the number of matches; a word that matches nothing costs
one step. The walk is bounded by MAX_STEPS, so a window can end before it is full (a
revisionKind filter skipping the other kind): the next window goes on from where it stopped.

"Newest" here is the order revisions were first indexed (bulk imports index oldest first),
the same as creation order for data written as it happens. The index holds no text: the
candidates' texts are read in one query after the walk.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from django.db import connection

import apps.recordings.search.windows as windows
from apps.recordings.search.terms import fts5_match
from apps.recordings.search.windows import CandidateWindow, HitSession, HitTranscript, WindowBounds

if TYPE_CHECKING:  # the driver is imported by Django's SQLite backend, where this module runs
    import sqlite3

SEQUENCE_BITS = 24  # the rowid's low bits hold the sequence (migrations 0002, 0003)
SEQUENCE_MASK = (1 << SEQUENCE_BITS) - 1
REVISION_BITS = 20  # a revision key's low bits number the workspace's revisions
WORKSPACE_SHIFT = SEQUENCE_BITS + REVISION_BITS  # rowid = workspace key << 44 | ...
MAX_STEPS = 4 * windows.CANDIDATE_REVISIONS  # walk steps per window; a revisionKind filter skips the other kind


def step_query(terms: list[str], workspace_id: Any, resume: int | None, limit: int,
               until: int | None = None) -> tuple[str, list[Any]]:  # fmt: skip
    """One step of the walk, never touching other workspaces' entries or scanning segments:
    the `limit` lowest matching rowids of the workspace at or above `resume` (None = from the
    newest revision) and below `until` (None = to the workspace's end), with their revision:
    (rowid, transcript id, revision kind). The revision kind is filtered by the caller."""
    # FTS5 seeks one rowid range (>= and <) and walks it upwards, so LIMIT stops it early.
    # CROSS JOIN: from the matches into revision keys by primary key.
    sql = f"""
        SELECT m.rowid, k.transcript_id, k.revision_kind
        FROM (
            SELECT f.rowid AS rowid FROM recordings_segment_fts AS f
            WHERE recordings_segment_fts MATCH %s
            AND f.rowid >= max(coalesce(%s, 0),
                (SELECT id << {WORKSPACE_SHIFT} FROM recordings_search_workspace WHERE workspace_id = %s))
            AND f.rowid < min(coalesce(%s, {1 << 62}),
                (SELECT (id + 1) << {WORKSPACE_SHIFT} FROM recordings_search_workspace WHERE workspace_id = %s))
            ORDER BY f.rowid LIMIT %s
        ) AS m
        CROSS JOIN recordings_segment_search AS k ON k.id = m.rowid >> {SEQUENCE_BITS}
        ORDER BY m.rowid
    """
    return sql, [fts5_match(terms), resume, workspace_id, until, workspace_id, limit]


@contextlib.contextmanager
def raw_cursor() -> Iterator[sqlite3.Cursor]:
    """The sqlite3 module's own cursor on Django's connection, for statements run many times or
    with many placeholders: Django's wrapper rewrites every placeholder on every execute. Errors
    are still Django's (the request deadline's `interrupted` among them)."""
    connection.ensure_connection()
    with connection.wrap_database_errors, contextlib.closing(connection.connection.cursor()) as raw:
        yield raw


def find_window(
    terms: list[str], workspace_id: Any, revision_kind: str | None, start: int | None, shown: WindowBounds | None
) -> CandidateWindow:
    """The window from rowid `start` (None = the newest revision), or the window `shown` again."""
    max_revisions, per_revision = windows.CANDIDATE_REVISIONS, windows.CANDIDATE_SEGMENTS
    sql, _ = step_query(terms, workspace_id, None, per_revision)
    sql = sql.replace("%s", "?")
    match = fts5_match(terms)
    candidates: dict[str, list[int]] = {}
    keys: dict[str, int] = {}  # transcript id: revision key
    resume, steps, exhausted = (shown.first if shown else start), 0, False
    with raw_cursor() as raw:  # a step runs up to MAX_STEPS times
        # A window shown before ends where it ended; a new one where the common words' range ends.
        until = shown.last if shown else common_words_end(raw, terms, workspace_id, start)
        while len(candidates) < max_revisions and steps < MAX_STEPS:
            rows = raw.execute(sql, (match, resume, workspace_id, until, workspace_id, per_revision)).fetchall()
            steps += 1
            for rowid, transcript_id, kind in rows:
                if revision_kind and kind != revision_kind:
                    continue
                sequences = candidates.setdefault(transcript_id, [])
                keys.setdefault(transcript_id, rowid >> SEQUENCE_BITS)
                if len(sequences) < per_revision:
                    sequences.append(rowid & SEQUENCE_MASK)
            if len(rows) < per_revision:
                exhausted = True  # nothing further matches before `until`
                break
            last_rowid, last_transcript, last_kind = rows[-1]
            wanted = not revision_kind or last_kind == revision_kind
            if wanted and len(candidates[last_transcript]) < per_revision:
                resume = last_rowid + 1  # the last revision has more to give
            else:
                resume = ((last_rowid >> SEQUENCE_BITS) + 1) << SEQUENCE_BITS  # skip to the next revision
    window = CandidateWindow(dict(list(candidates.items())[:max_revisions]))
    if window.candidates:
        window.first = keys[next(iter(window.candidates))] << SEQUENCE_BITS
    if len(candidates) > max_revisions or (len(candidates) == max_revisions and not exhausted):
        # Full: the window ends after its last revision.
        window.last, window.more = (keys[list(window.candidates)[-1]] + 1) << SEQUENCE_BITS, True
    elif exhausted:
        window.last, window.more = until, (shown.more if shown else until is not None)
    else:
        # The step bound: the window ends where the walk stopped, at a revision's end.
        window.last, window.more = (resume + SEQUENCE_MASK) >> SEQUENCE_BITS << SEQUENCE_BITS, True
    if window.candidates:
        add_candidate_texts(window)
    return window.settle(shown)


def common_words_end(db: sqlite3.Cursor, terms: list[str], workspace_id: Any, start: int | None = None) -> int | None:
    """The rowid that ends `common_words_range(terms)` revisions from `start` (a rowid; None =
    the newest revision) when every word of a query of several words is common (COMMON_SHARE or
    more of the segments of the workspace's newest SAMPLE_REVISIONS revisions), else None; also
    None when fewer revisions than that remain. FTS5 intersects such words entry by entry, so
    over the whole workspace a rare combination of common words would cost in proportion to its
    size."""
    if len(terms) < 2:
        return None
    db.execute("SELECT id FROM recordings_search_workspace WHERE workspace_id = ?", (workspace_id,))
    row = db.fetchone()
    if row is None:
        return None
    lo, hi = row[0] << REVISION_BITS, (row[0] + 1) << REVISION_BITS
    window, sample_size = windows.common_words_range(terms), windows.SAMPLE_REVISIONS
    db.execute(
        "SELECT id, transcript_id FROM recordings_segment_search WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
        (lo, hi, max(sample_size, window)),
    )
    newest = db.fetchall()
    if len(newest) < max(sample_size, window):
        return None  # the whole workspace is no bigger than the window
    sample = newest[:sample_size]
    sample_end = (sample[-1][0] + 1) << SEQUENCE_BITS
    db.execute(f"SELECT count(*) FROM recordings_segment WHERE transcript_id IN ({', '.join('?' * len(sample))})",
               [t for _, t in sample])  # fmt: skip
    segments = db.fetchone()[0]
    for term in terms:
        db.execute(
            "SELECT count(*) FROM recordings_segment_fts"
            " WHERE recordings_segment_fts MATCH ? AND rowid >= ? AND rowid < ?",
            (fts5_match([term]), lo << SEQUENCE_BITS, sample_end),
        )
        if db.fetchone()[0] < windows.COMMON_SHARE * segments:
            return None
    if start is None:
        return (newest[window - 1][0] + 1) << SEQUENCE_BITS
    db.execute(
        "SELECT id FROM recordings_segment_search WHERE id >= ? AND id < ? ORDER BY id LIMIT 1 OFFSET ?",
        (max(lo, start >> SEQUENCE_BITS), hi, window - 1),
    )
    row = db.fetchone()
    return None if row is None else (row[0] + 1) << SEQUENCE_BITS


def add_candidate_texts(window: CandidateWindow) -> None:
    """The candidate segments' texts and starts, and what a hit shows of each candidate revision
    and its session (its created_at is also the ranking's tie-break), in one query."""
    pairs = [(t, seq) for t, sequences in window.candidates.items() for seq in sequences]
    values = ", ".join(["(?, ?)"] * len(pairs))
    # From the pairs into segments by the (transcript_id, sequence) index (CROSS JOIN fixes that
    # order, as SQLite would otherwise scan segments for a row-value IN). Up to 800 placeholders.
    # Timestamps as text: the connection would parse created_at once per segment, where once per
    # revision is needed.
    with raw_cursor() as raw:
        rows = raw.execute(
            "SELECT seg.transcript_id, seg.sequence, seg.text, seg.timestamp_start, tr.revision_kind,"
            " s.id, s.label, s.status, CAST(s.started_at AS TEXT), CAST(s.ended_at AS TEXT), CAST(s.created_at AS TEXT)"
            f" FROM (SELECT column1 AS t, column2 AS s FROM (VALUES {values}) AS v) AS p"
            " CROSS JOIN recordings_segment AS seg ON seg.transcript_id = p.t AND seg.sequence = p.s"
            " JOIN recordings_transcript AS tr ON tr.id = seg.transcript_id"
            " JOIN recordings_session AS s ON s.id = tr.session_id",
            [v for pair in pairs for v in pair],
        ).fetchall()
    for transcript_id, sequence, text, start, kind, session_id, label, status, started, ended, created in rows:
        window.texts[transcript_id, sequence] = text
        window.starts[transcript_id, sequence] = start
        if transcript_id not in window.revisions:
            session = HitSession(session_id, label, status, _aware(started), _aware(ended), _aware(created))
            window.revisions[transcript_id] = (HitTranscript(transcript_id, kind), session)
            window.created[transcript_id] = session.created_at


def _aware(value: str | None) -> datetime | None:
    """A timestamp read as text without the ORM: the naive UTC value Django wrote, made aware,
    as the ORM would return it."""
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
