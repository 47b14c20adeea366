"""The PostgreSQL engine: a window's candidates by the direct plan, the range lookup or the walk.

`postgresql_planner` chooses: the direct plan (`postgresql_queries.direct_plan`) for words that
are not common, the walk over the newest revisions in batches of CANDIDATE_REVISIONS
(`postgresql_queries.walk`, at most MAX_BATCHES a window) for one common word, and for several
words that are all common one range of revisions per window. A range of up to
RANGE_LOOKUP_MAX_WORDS such words is first looked up through the GIN index (`range_lookup`),
and walked only when it holds more than RANGE_MATCHES_MAX matches. A word of middling
frequency is the expensive case for every plan.

The candidates' texts and session times come with them, in the same query. "Newest" is
transcript created_at (then id); a window's bounds are such pairs, both inclusive.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection, transaction

import apps.recordings.search.postgresql_planner as planner
import apps.recordings.search.postgresql_queries as queries
import apps.recordings.search.windows as windows
from apps.recordings.search.windows import CandidateWindow, WindowBounds

MAX_BATCHES = 4  # batches of CANDIDATE_REVISIONS revisions the walk looks at per window
# More words make GIN intersect more long lists, where the walk stops at each revision's first
# matches: a range of more words is walked.
RANGE_LOOKUP_MAX_WORDS = 3
RANGE_MATCHES_MAX = windows.COMMON_QUERY_REVISIONS * windows.CANDIDATE_SEGMENTS

Row = tuple[str, datetime, datetime, list[int] | None, list[str] | None]  # the plans' row shape


def find_window(
    terms: list[str], workspace_id: Any, revision_kind: str | None, start: Any, shown: WindowBounds | None
) -> CandidateWindow:
    """The window from after `start` ((created_at, transcript id); None = the newest revision),
    or the window `shown` again."""
    max_revisions = windows.CANDIDATE_REVISIONS
    through, down_to = (shown.first, shown.last) if shown else (None, None)
    window = CandidateWindow({})
    positions: dict[str, tuple[datetime, str]] = {}
    with connection.cursor() as db:
        common = planner.all_words_common(terms, workspace_id)
        if not common and (len(terms) > 1 or not planner.walk_is_cheaper(terms, workspace_id)):
            # One more revision than a window holds tells whether anything older matches.
            db.execute(*queries.direct_plan(terms, workspace_id, revision_kind, start, max_revisions + 1,
                                            through=through, down_to=down_to))  # fmt: skip
            rows = db.fetchall()
            _add_revisions(rows[:max_revisions], window, positions)
            if len(rows) > max_revisions:
                window.last, window.more = positions[list(window.candidates)[-1]], True
            else:
                window.last, window.more = (shown.last, shown.more) if shown else (None, False)
        else:
            _walk(db, terms, workspace_id, revision_kind, start, shown, common, window, positions)
    if window.candidates:
        window.first = positions[next(iter(window.candidates))]
    return window.settle(shown)


def _add_revisions(rows: list[Row], window: CandidateWindow, positions: dict[str, tuple[datetime, str]]) -> None:
    """Adds the revisions of `rows` (newest first) that have matching segments to the window's
    candidates, up to CANDIDATE_REVISIONS, with their texts, session times and positions."""
    max_revisions = windows.CANDIDATE_REVISIONS
    for transcript_id, created_at, session_created, sequences, segment_texts in rows:
        if sequences and len(window.candidates) < max_revisions:
            window.candidates[transcript_id] = list(sequences)
            positions[transcript_id] = (created_at, transcript_id)
            window.created[transcript_id] = session_created
            window.texts.update(((transcript_id, seq), text) for seq, text in zip(sequences, segment_texts))


def _walk(db, terms: list[str], workspace_id: Any, revision_kind: str | None, start: Any,
          shown: WindowBounds | None, common: bool, window: CandidateWindow,
          positions: dict[str, tuple[datetime, str]]) -> None:  # fmt: skip
    """Fills `window` (empty) by walking the workspace's revisions, and sets where it ends."""
    candidates, max_revisions = window.candidates, windows.CANDIDATE_REVISIONS
    resume, oldest = start, None
    through, down_to = (shown.first, shown.last) if shown else (None, None)
    batch = windows.common_words_range(terms) if common else max_revisions
    exhausted = False
    for _ in range(1 if common else MAX_BATCHES):
        rows = None
        if common and len(terms) <= RANGE_LOOKUP_MAX_WORDS:
            rows = range_lookup(db, terms, workspace_id, revision_kind, resume, batch, through, down_to)
        if rows is None:
            with transaction.atomic():
                # The planner would read each revision whole through the transcript_id index and
                # sort; reading the (transcript_id, sequence) index in order stops at the first
                # matches, which for a common word are a few rows away.
                db.execute("SET LOCAL enable_sort = off")
                db.execute(*queries.walk(terms, workspace_id, revision_kind, resume, batch, through, down_to))
                rows = db.fetchall()
        rows.sort(key=lambda r: (r[1], r[0]), reverse=True)
        _add_revisions(rows, window, positions)
        if rows:
            oldest = (rows[-1][1], rows[-1][0])
        if len(rows) < batch:
            exhausted = True  # no older revisions (in a window shown before: none left in it)
            break
        if len(candidates) >= max_revisions:
            break
        resume = oldest
    if len(candidates) >= max_revisions:
        window.last, window.more = positions[list(candidates)[-1]], True
    elif exhausted:
        window.last, window.more = (shown.last, shown.more) if shown else (oldest, False)
    else:
        # The walk's bound (or the common words' range): the next window starts past the
        # oldest revision it looked at.
        window.last, window.more = oldest, True


def range_lookup(
    db, terms: list[str], workspace_id: Any, revision_kind: str | None, resume: Any, revisions: int,
    through: Any = None, down_to: Any = None,
) -> list[Row] | None:  # fmt: skip
    """A few common words: the walk's rows for the same range of revisions, found through the
    GIN index instead of probing every segment of every revision; None when the range holds more
    than RANGE_MATCHES_MAX matches (then the walk, which stops at each revision's first matches,
    is the cheaper plan). GIN intersects the words' posting lists from the rarest, and a bitmap
    of the range's segments keeps only theirs, so a rare combination costs its matches, not the
    range's segments."""
    where, params = queries.revision_filters("t.", workspace_id, revision_kind, resume, through, down_to)
    db.execute(
        "SELECT t.id, t.created_at, s.created_at FROM recordings_transcript AS t"
        f" JOIN recordings_session AS s ON s.id = t.session_id WHERE {' AND '.join(where)}"
        " ORDER BY t.created_at DESC, t.id DESC LIMIT %s",
        params + [revisions],
    )
    revision_rows = db.fetchall()
    if not revision_rows:
        return []
    db.execute(
        "SELECT seg.transcript_id, seg.sequence, seg.text FROM recordings_segment AS seg"
        f" WHERE seg.transcript_id = ANY(%s) AND seg.search_vector @@ {queries.TSQUERY} LIMIT %s",
        [[r[0] for r in revision_rows], workspace_id, " ".join(terms), RANGE_MATCHES_MAX + 1],
    )
    matches = db.fetchall()
    if len(matches) > RANGE_MATCHES_MAX:
        return None
    found: dict[str, list[tuple[int, str]]] = {}
    for transcript_id, sequence, text in sorted(matches, key=lambda m: m[1]):
        found.setdefault(transcript_id, []).append((sequence, text))
    per_revision, rows = windows.CANDIDATE_SEGMENTS, []
    for transcript_id, created_at, session_created in revision_rows:
        first = found.get(transcript_id, [])[:per_revision]
        sequences, texts = ([s for s, _ in first], [t for _, t in first]) if first else (None, None)
        rows.append((transcript_id, created_at, session_created, sequences, texts))
    return rows
