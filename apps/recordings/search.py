"""Full-text search over transcript segments (DESIGN.md §1 "Search", docs/decisions.md "Search").

The index is the database's own, keyed by workspace first (migrations 0002 and 0003): FTS5 on
SQLite, whose rowids put the workspace, then the revision, then the sequence; on PostgreSQL a
GIN index over lexemes prefixed with the workspace id ('<workspace>:word'). A search only reads
its own workspace's entries.

Work per request is bounded by windows, the same on both databases. A window is at most
CANDIDATE_REVISIONS matching revisions (every word in one segment), consecutive from newest to
oldest, and in each of them its first CANDIDATE_SEGMENTS matching segments: the first window
the newest matching revisions, each next one the matching revisions older than the previous
window's end. Each candidate segment is scored from its text (`segment_score`, BM25's
term-frequency part, computed here so both databases score alike); a hit is a revision scored
by its best candidate segment. Hits are ordered best match first within each window of the
newest remaining matches: by window, then score, then session newest first, then transcript id.
A page holds hits of one window; its cursor carries the window (its first and last positions,
so later pages rank the same revisions even while newer ones are written) and the keyset
(score, created, transcript id) inside it, or, once the window is shown, where the next window
begins. Every matching revision is reachable; nextCursor is None only when nothing further
matches. A page can be shorter than `limit`, even empty, with a cursor: at a window's end, when
a walk stopped at its bound before filling the window, and for the ranges of all-common words.

How a window's candidates are found (`_window`), from where the previous window ended:
- SQLite walks the workspace's rowid range upwards, newest revision first: each step asks FTS5
  for the next few matching rowids above the last one, and jumps to the next revision once a
  revision has given its segments. Every step is a seek in the index, so the cost follows the candidates, never the
  number of matches; a word that matches nothing costs one step.
- PostgreSQL asks the planner how many segments of the workspace match, or, for a word its
  table-wide statistics do not know, counts them through the index up to where the answer is
  clear (`_matching_segments`). Few: one query over the GIN index reads them all and keeps the
  newest revisions. Many (`_walk_is_cheaper`): it walks the workspace's revisions newest first
  in batches and probes each for its first matching segments (the segment order index,
  filtered by the stored vector), which for a common word finds them within a few rows. A word
  of middling frequency is the expensive case for both.

Windows of several words that are all common are ranges of revisions, matching or not (SQLite
the next `common_window` revisions, PostgreSQL one walk batch), so a rare combination of them
costs one range per page, and pages through ranges without a match come back empty. On
PostgreSQL a range of two or three such words is first looked up through the GIN index, and
walked only when it holds many matches (`_range_matches`).

The texts of the candidate segments come with them on PostgreSQL and in one query after the
walk on SQLite, whose index is contentless. `services.compact_search_index` keeps both indexes
merged (hourly).

Windows follow the revisions by when they were first indexed (SQLite: revision key; bulk
imports index oldest first) or created (PostgreSQL: transcript created_at): the same order for
data written as it happens.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

from apps.core.cursors import decode_cursor, encode_cursor
from apps.core.errors import InvalidRequest
from apps.core.timestamps import parse_iso
from apps.recordings.models import Session, Transcript
from apps.tenancy.models import Workspace

SNIPPET_MAX = 200
SEQUENCE_BITS = 24  # the FTS5 rowid's low bits hold the sequence (migrations 0002, 0003)
ELLIPSIS = "…"

# Letters and digits of any script; the same classes FTS5's unicode61 tokenizer keeps (L*, N*),
# so a term is never something the index would have split in two.
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class SearchHit:
    transcript: Transcript
    session: Session
    snippet: str


def query_terms(query: str) -> list[str]:
    """The words of a user's query, deduplicated case-insensitively, in order. Everything else
    (quotes, operators, punctuation) is a separator, never syntax. Accents are left to the
    index, which folds them on both databases (FTS5 remove_diacritics, PostgreSQL unaccent)."""
    terms: dict[str, str] = {}
    for word in _WORD.findall(unicodedata.normalize("NFC", query)):
        terms.setdefault(word.casefold(), word)
    return list(terms.values())


def _fold(word: str) -> str:
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def fts5_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression requiring every term. Each term is a double-quoted string, so
    AND/OR/NOT/NEAR, `*`, `^`, `:`, `-` and parentheses in it are plain text."""
    return " AND ".join('"' + term.replace('"', '""') + '"' for term in terms)


def make_snippet(text: str, terms: list[str], limit: int = SNIPPET_MAX) -> str:
    """Plain text of at most `limit` characters around the first occurrence of any term,
    cut at word boundaries where one is near, with "…" where text was left out."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    keys = {_fold(t) for t in terms}
    first = next((m for m in _WORD.finditer(text) if _fold(m.group()) in keys), None)
    match_start, match_end = (first.start(), first.end()) if first else (0, 0)

    # Some context before the match, the rest after it.
    start = max(0, min(match_start - limit // 4, len(text) - (limit - 1)))
    if start > 0:
        start = _word_start_at_or_after(text, start, match_start)
    lead = ELLIPSIS if start > 0 else ""
    end = start + limit - len(lead)
    if end >= len(text):
        return lead + text[start:]
    end -= len(ELLIPSIS)
    end = _word_end_at_or_before(text, end, max(match_end, start + 1))
    return lead + text[start:end].rstrip() + ELLIPSIS


def _word_start_at_or_after(text: str, i: int, latest: int) -> int:
    """`i` moved forward past a partly cut word, unless that would pass `latest` or go far."""
    if text[i - 1].isspace():
        return i
    space = text.find(" ", i, min(latest, i + 30))
    return space + 1 if space != -1 else i


def _word_end_at_or_before(text: str, end: int, earliest: int) -> int:
    """`end` moved back to the end of a whole word, unless that would cut before `earliest`."""
    if text[end].isspace():
        return end
    space = text.rfind(" ", max(earliest, end - 30), end)
    return space if space != -1 else end


def _scope_digest(terms: list[str], revision_kind: str | None) -> str:
    """What a cursor is bound to besides the workspace: the query's terms and the filter."""
    canonical = "\x1f".join([revision_kind or "", *sorted(t.casefold() for t in terms)])
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


# --- Scoring ---------------------------------------------------------------------------------

# BM25's term-frequency saturation and length normalisation. No inverse document frequency:
# every word must occur in every hit, and corpus statistics would make the cost and the
# order depend on other workspaces' data.
K1, B, AVERAGE_WORDS = 1.2, 0.75, 12.0


def _folded_words(text: str) -> list[str]:
    text = text.casefold()
    return _WORD.findall(text if text.isascii() else _fold(text))


def segment_score(text: str, keys: list[str]) -> float:
    """How well one segment matches the folded query words `keys`; higher is better."""
    words = _folded_words(text)
    norm = K1 * (1 - B + B * len(words) / AVERAGE_WORDS)
    score = 0.0
    for key in keys:
        tf = words.count(key)
        score += tf * (K1 + 1) / (tf + norm)
    return score


# --- Candidates ------------------------------------------------------------------------------

CANDIDATE_REVISIONS = 100  # the newest matching revisions that are ranked
CANDIDATE_SEGMENTS = 4  # matching segments scored per revision (its first ones)
SQLITE_MAX_STEPS = 4 * CANDIDATE_REVISIONS  # walk steps; a revisionKind filter skips the other kind
POSTGRES_COMMON_MATCHES = 2000  # below this many matches PostgreSQL always ranks them all
# What a segment the walk checks costs against a match the direct plan ranks (_walk_is_cheaper).
# Measured in process on `solo` (146,051 segments), direct / walk p50: 'lisbon' (111 matches)
# 5.3 / 78.6 ms, 'renewal' (4,076) 15.5 / 10.5, 'numbers' (7,642) 21.6 / 8.3, 'customer'
# (10,689) 25.4 / 7.9: the plans cross near 3,000 matches, where sqrt(R·P·N) said 7,600.
WALK_SEGMENT_COST = 1 / 6
POSTGRES_MAX_BATCHES = 4  # batches of CANDIDATE_REVISIONS revisions the walk looks at
# Several words that are all common: only the newest revisions are searched (see
# _sqlite_common_until). "Common" is judged on the newest SAMPLE_REVISIONS on SQLite and on
# the planner's statistics on PostgreSQL.
COMMON_SHARE = 0.02
COMMON_QUERY_REVISIONS = 100
# PostgreSQL, several common words: up to this many words, a range's matches are first sought
# through the GIN index (`_range_matches`), and used when there are at most RANGE_MATCHES_MAX.
# More words make GIN intersect more long lists (12 common words: 131 ms against 36 for the walk).
RANGE_LOOKUP_MAX_WORDS = 3
RANGE_MATCHES_MAX = COMMON_QUERY_REVISIONS * CANDIDATE_SEGMENTS
SAMPLE_REVISIONS = 8
REVISION_BITS = 20

SEQUENCE_MASK = (1 << SEQUENCE_BITS) - 1
WORKSPACE_SHIFT = 44  # revision key << 24, where the revision key is workspace key << 20 | n

# Every word, folded as the text was, keyed by the workspace (migration 0003): (workspace id, words).
_TSQUERY = "connect_search_query(%s, %s)"


def _page_sql(
    vendor: str,
    terms: list[str],
    workspace_id: Any,
    revision_kind: str | None,
    resume: Any,
    limit: int,
    until: int | None = None,
    through: Any = None,
    down_to: Any = None,
) -> tuple[str, list[Any]]:
    """The query that finds candidates through the full-text index, never touching other
    workspaces' entries or scanning segments.

    SQLite: one step of the walk, the `limit` lowest matching rowids of the workspace at or
    above `resume` (a rowid; None = from the newest revision) and below `until` (None = to the
    workspace's end), with their revision: (rowid, transcript id, revision kind). The revision
    kind is filtered by the caller.
    PostgreSQL: the direct plan, the `limit` newest matching revisions older than `resume`
    ((created_at, transcript id); None = from the newest), no newer than `through` and no older
    than `down_to` (a pinned window, both inclusive), one row each with its first
    CANDIDATE_SEGMENTS matching segments, newest first: (transcript id, created_at, session
    created_at, sequences, texts), as `_walk_sql` returns them."""
    if vendor == "sqlite":
        # FTS5 seeks one rowid range (>= and <=) and walks it upwards (newest revision first:
        # migration 0003), so LIMIT stops it early. CROSS JOIN: from the matches into revision
        # keys by primary key.
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
    if vendor == "postgresql":
        where, params = _revision_filters("t.", workspace_id, revision_kind, resume, through, down_to)
        params = [workspace_id, " ".join(terms), *params]
        # The matches first (MATERIALIZED: the planner must not trade the index for an index
        # scan in transcript order to feed the window), then the newest revisions among them.
        sql = f"""
            WITH hit AS MATERIALIZED (
                SELECT seg.transcript_id, seg.sequence FROM recordings_segment AS seg
                WHERE seg.search_vector @@ {_TSQUERY}
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
        return sql, params + [limit, CANDIDATE_SEGMENTS]
    raise NotImplementedError(f"transcript search has no full-text index for {vendor}")


def _revision_filters(
    prefix: str, workspace_id: Any, revision_kind: str | None, resume: Any, through: Any, down_to: Any
) -> tuple[list[str], list[Any]]:
    """PostgreSQL: WHERE terms on transcripts (columns prefixed with `prefix`) and their values:
    the workspace's, of `revision_kind` if given, older than `resume`, no newer than `through`
    and no older than `down_to` (each a (created_at, id) pair or None)."""
    where, params = [f"{prefix}workspace_id = %s"], [workspace_id]
    if revision_kind:
        where.append(f"{prefix}revision_kind = %s")
        params.append(revision_kind)
    for bound, op in ((resume, "<"), (through, "<="), (down_to, ">=")):
        if bound is not None:
            where.append(f"({prefix}created_at, {prefix}id) {op} (%s, %s)")
            params += list(bound)
    return where, params


def _walk_sql(
    terms: list[str],
    workspace_id: Any,
    revision_kind: str | None,
    resume: Any,
    revisions: int,
    through: Any = None,
    down_to: Any = None,
):
    """PostgreSQL, common words: `revisions` of the workspace's revisions older than `resume`
    (and within `through` … `down_to`, as in _page_sql), newest first, one row each with its
    first CANDIDATE_SEGMENTS matching segments: (transcript id, created_at, session created_at,
    sequences, texts), the two arrays NULL when none matches. (A row per revision, not per
    segment: psycopg parses each timestamp it returns, 900 of them a page before.)"""
    where, params = _revision_filters("", workspace_id, revision_kind, resume, through, down_to)
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
                WHERE seg.transcript_id = t.id AND seg.search_vector @@ {_TSQUERY}
                -- the unique (transcript_id, sequence) index in order: stops at the first matches
                ORDER BY seg.transcript_id, seg.sequence LIMIT %s
            ) AS x
        ) AS m ON true
    """
    return sql, params + [revisions, workspace_id, " ".join(terms), CANDIDATE_SEGMENTS]


def _range_matches(
    db, terms: list[str], workspace_id: Any, revision_kind: str | None, resume: Any, revisions: int,
    through: Any = None, down_to: Any = None,
) -> list[tuple] | None:
    """PostgreSQL, a few common words: the walk's rows (`_walk_sql`) for the same range of
    revisions, found through the GIN index instead of probing every segment of every revision;
    None when the range holds more than RANGE_MATCHES_MAX matches (then the walk, which stops at
    each revision's first matches, is the cheaper plan). GIN intersects the words' posting lists
    from the rarest, and a bitmap of the range's segments keeps only theirs: 'release renewal'
    (0.75 % of segments) 9 ms against the walk's 23 ms, which checks all 46,000 segments."""
    where, params = _revision_filters("t.", workspace_id, revision_kind, resume, through, down_to)
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
        f" WHERE seg.transcript_id = ANY(%s) AND seg.search_vector @@ {_TSQUERY} LIMIT %s",
        [[r[0] for r in revision_rows], workspace_id, " ".join(terms), RANGE_MATCHES_MAX + 1],
    )
    matches = db.fetchall()
    if len(matches) > RANGE_MATCHES_MAX:
        return None
    found: dict[str, list[tuple[int, str]]] = {}
    for transcript_id, sequence, text in sorted(matches, key=lambda m: m[1]):
        found.setdefault(transcript_id, []).append((sequence, text))
    rows = []
    for transcript_id, created_at, session_created in revision_rows:
        first = found.get(transcript_id, [])[:CANDIDATE_SEGMENTS]
        sequences, texts = ([s for s, _ in first], [t for _, t in first]) if first else (None, None)
        rows.append((transcript_id, created_at, session_created, sequences, texts))
    return rows


def _estimated_rows(sql: str, params: list[Any]) -> float:
    """The planner's estimate of the rows `sql` returns (statistics only, nothing executed)."""
    with connection.cursor() as db:
        db.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = db.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return float(plan[0]["Plan"]["Plan Rows"])


_MATCHES_SQL = f"SELECT 1 FROM recordings_segment AS seg WHERE seg.search_vector @@ {_TSQUERY}"


def _unknown_estimate() -> float:
    """PostgreSQL: the planner's estimate for a word its statistics do not know. They are the
    whole table's and keep only its most common lexemes (a few thousand at the default target);
    any other gets one fixed guess (half the least common kept frequency), so in a table of many
    workspaces most words of a small one are guessed alike, whether in 0 or 7,000 segments
    (measured: `solo` beside ten others, 'numbers' in 7,642 and 'lisbon' in 111 both 4,519).
    No workspace id is empty: '' names a lexeme never indexed."""
    return _estimated_rows(_MATCHES_SQL, ["", "unknown"])


def _matching_segments(workspace_id: Any, word: str, enough: float, unknown: float) -> float:
    """PostgreSQL: how many of the workspace's segments contain `word`, as far as it takes to
    tell whether `enough` do: the planner's estimate when its statistics know the word (it is
    above `unknown`, `_unknown_estimate()`), else a count through the index that stops there."""
    estimate = _estimated_rows(_MATCHES_SQL, [workspace_id, word])
    if estimate > unknown:
        return estimate
    with connection.cursor() as db:
        db.execute(f"SELECT count(*) FROM ({_MATCHES_SQL} LIMIT %s) AS m", [workspace_id, word, math.ceil(enough)])
        return db.fetchone()[0]


def _all_words_common(terms: list[str], workspace_id: Any) -> bool:
    """PostgreSQL: whether a query of several words has only common words (each in COMMON_SHARE
    of the workspace's segments or more). GIN intersects their long posting lists whole, so such
    a query only walks the newest COMMON_QUERY_REVISIONS."""
    if len(terms) < 2:
        return False
    segments = _estimated_rows("SELECT 1 FROM recordings_segment WHERE workspace_id = %s", [workspace_id])
    if segments < COMMON_QUERY_REVISIONS * CANDIDATE_SEGMENTS:
        return False
    common, unknown = COMMON_SHARE * segments, _unknown_estimate()
    return all(_matching_segments(workspace_id, term, common, unknown) >= common for term in terms)


def _walk_is_cheaper(terms: list[str], workspace_id: Any) -> bool:
    """PostgreSQL, one word: whether walking revisions beats ranking every match. The walk
    checks about R·P/d segments for a density d of matches, the direct plan ranks every match
    (d·N for N segments in the workspace), each WALK_SEGMENT_COST times as costly as a check:
    the walk wins from d·N > sqrt(WALK_SEGMENT_COST·R·P·N)."""
    segments = _estimated_rows("SELECT 1 FROM recordings_segment WHERE workspace_id = %s", [workspace_id])
    walk_from = max(POSTGRES_COMMON_MATCHES,
                    math.sqrt(WALK_SEGMENT_COST * CANDIDATE_REVISIONS * CANDIDATE_SEGMENTS * segments))  # fmt: skip
    return _matching_segments(workspace_id, " ".join(terms), walk_from + 1, _unknown_estimate()) > walk_from


def _sqlite_common_until(db, terms: list[str], workspace_id: Any, start: int | None = None) -> int | None:
    """The rowid that ends `common_window(terms)` revisions from `start` (a rowid; None = the
    newest revision) when every word of a query of several words is common (COMMON_SHARE or more
    of the segments of the workspace's newest SAMPLE_REVISIONS revisions), else None; also None
    when fewer revisions than that remain. FTS5 intersects such words entry by entry, so over the
    whole workspace a rare combination of common words would cost in proportion to its size."""
    if len(terms) < 2:
        return None
    db.execute("SELECT id FROM recordings_search_workspace WHERE workspace_id = ?", (workspace_id,))
    row = db.fetchone()
    if row is None:
        return None
    lo, hi = row[0] << REVISION_BITS, (row[0] + 1) << REVISION_BITS
    window = common_window(terms)
    db.execute(
        "SELECT id, transcript_id FROM recordings_segment_search WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
        (lo, hi, max(SAMPLE_REVISIONS, window)),
    )
    newest = db.fetchall()
    if len(newest) < max(SAMPLE_REVISIONS, window):
        return None  # the whole workspace is no bigger than the window
    sample = newest[:SAMPLE_REVISIONS]
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
        if db.fetchone()[0] < COMMON_SHARE * segments:
            return None
    if start is None:
        return (newest[window - 1][0] + 1) << SEQUENCE_BITS
    db.execute(
        "SELECT id FROM recordings_segment_search WHERE id >= ? AND id < ? ORDER BY id LIMIT 1 OFFSET ?",
        (max(lo, start >> SEQUENCE_BITS), hi, window - 1),
    )
    row = db.fetchone()
    return None if row is None else (row[0] + 1) << SEQUENCE_BITS


def common_window(terms: list[str]) -> int:
    """How many of the newest revisions a query of only common words searches: fewer for
    longer queries, as every word's entries are read."""
    return max(SAMPLE_REVISIONS, COMMON_QUERY_REVISIONS * 4 // max(4, len(terms)))


# --- Windows ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pin:
    """A window already shown in part, as its cursor carries it: its first and last positions
    and whether anything past it may match. Positions are the database's walk order: SQLite, a
    rowid (`first` inclusive, `last` exclusive, None = the workspace's end); PostgreSQL, a
    transcript's (created_at, id), both inclusive."""

    first: Any
    last: Any
    more: bool


@dataclass
class _Window:
    """The candidates of one window, in walk order (newest first), with their texts, and where
    it lies: `first` the newest candidate's position (None: no candidates), `last` where the
    window stops (the next window starts past it), `more` whether anything past `last` may match."""

    candidates: dict[str, list[int]]
    first: Any = None
    last: Any = None
    more: bool = False
    # The candidate segments' texts and each candidate revision's session created_at.
    texts: dict[tuple[str, int], str] = field(default_factory=dict)
    created: dict[str, datetime] = field(default_factory=dict)

    def settle(self, pin: _Pin | None) -> _Window:
        # A pinned window that still ends where it did keeps what was known past its end.
        if pin is not None and self.last == pin.last:
            self.more = pin.more
        return self


@contextlib.contextmanager
def _sqlite_cursor():
    """The sqlite3 module's own cursor on Django's connection, for statements run many times or
    with many placeholders: Django's wrapper rewrites every placeholder on every execute (1.5 ms
    of a 100-step walk). Errors are still Django's (the request deadline's `interrupted` among
    them)."""
    connection.ensure_connection()
    with connection.wrap_database_errors, contextlib.closing(connection.connection.cursor()) as raw:
        yield raw


def _sqlite_window(
    terms: list[str], workspace_id: Any, revision_kind: str | None, start: int | None, pin: _Pin | None
) -> _Window:
    sql, _ = _page_sql("sqlite", terms, workspace_id, revision_kind, None, CANDIDATE_SEGMENTS)
    sql = sql.replace("%s", "?")
    match = fts5_match(terms)
    candidates: dict[str, list[int]] = {}
    keys: dict[str, int] = {}  # transcript id: revision key
    resume, steps, exhausted = (pin.first if pin else start), 0, False
    with _sqlite_cursor() as raw:  # a step runs up to SQLITE_MAX_STEPS times
        # A pinned window ends where it ended; a new one where the common words' range ends.
        until = pin.last if pin else _sqlite_common_until(raw, terms, workspace_id, start)
        while len(candidates) < CANDIDATE_REVISIONS and steps < SQLITE_MAX_STEPS:
            rows = raw.execute(sql, (match, resume, workspace_id, until, workspace_id, CANDIDATE_SEGMENTS)).fetchall()
            steps += 1
            for rowid, transcript_id, kind in rows:
                if revision_kind and kind != revision_kind:
                    continue
                sequences = candidates.setdefault(transcript_id, [])
                keys.setdefault(transcript_id, rowid >> SEQUENCE_BITS)
                if len(sequences) < CANDIDATE_SEGMENTS:
                    sequences.append(rowid & SEQUENCE_MASK)
            if len(rows) < CANDIDATE_SEGMENTS:
                exhausted = True  # nothing further matches before `until`
                break
            last_rowid, last_transcript, last_kind = rows[-1]
            wanted = not revision_kind or last_kind == revision_kind
            if wanted and len(candidates[last_transcript]) < CANDIDATE_SEGMENTS:
                resume = last_rowid + 1  # the last revision has more to give
            else:
                resume = ((last_rowid >> SEQUENCE_BITS) + 1) << SEQUENCE_BITS  # skip to the next revision
    window = _Window(dict(list(candidates.items())[:CANDIDATE_REVISIONS]))
    if window.candidates:
        window.first = keys[next(iter(window.candidates))] << SEQUENCE_BITS
    if len(candidates) > CANDIDATE_REVISIONS or (len(candidates) == CANDIDATE_REVISIONS and not exhausted):
        # Full: the window ends after its last revision.
        window.last, window.more = (keys[list(window.candidates)[-1]] + 1) << SEQUENCE_BITS, True
    elif exhausted:
        window.last, window.more = until, (pin.more if pin else until is not None)
    else:
        # The step bound: the window ends where the walk stopped, at a revision's end.
        window.last, window.more = (resume + SEQUENCE_MASK) >> SEQUENCE_BITS << SEQUENCE_BITS, True
    if window.candidates:
        window.texts, window.created = _segment_texts(window.candidates)
    return window.settle(pin)


def _postgresql_window(
    terms: list[str], workspace_id: Any, revision_kind: str | None, start: Any, pin: _Pin | None
) -> _Window:
    through, down_to = (pin.first, pin.last) if pin else (None, None)
    window = _Window({})
    positions: dict[str, tuple[datetime, str]] = {}
    with connection.cursor() as db:
        # Several words: the planner multiplies their frequencies as if independent, which
        # for common words that go together is off by orders of magnitude (measured: 1.8 s
        # ranking 200,000 matches it estimated under 2,000), so only single words are costed.
        common = _all_words_common(terms, workspace_id)
        if not common and (len(terms) > 1 or not _walk_is_cheaper(terms, workspace_id)):
            # One more revision than a window holds tells whether anything older matches.
            sql = _page_sql("postgresql", terms, workspace_id, revision_kind, start, CANDIDATE_REVISIONS + 1,
                            through=through, down_to=down_to)  # fmt: skip
            db.execute(*sql)
            rows = db.fetchall()
            _take_revisions(rows[:CANDIDATE_REVISIONS], window, positions)
            if len(rows) > CANDIDATE_REVISIONS:
                window.last, window.more = positions[list(window.candidates)[-1]], True
            else:
                window.last, window.more = (pin.last, pin.more) if pin else (None, False)
        else:
            _postgresql_walk(db, terms, workspace_id, revision_kind, start, pin, common, window, positions)
    if window.candidates:
        window.first = positions[next(iter(window.candidates))]
    return window.settle(pin)


def _take_revisions(rows, window: _Window, positions: dict[str, tuple[datetime, str]]) -> None:
    """PostgreSQL: adds the revisions of `rows` (`_walk_sql`'s shape, newest first) that have
    matching segments to the window's candidates, up to CANDIDATE_REVISIONS."""
    for transcript_id, created_at, session_created, sequences, segment_texts in rows:
        if sequences and len(window.candidates) < CANDIDATE_REVISIONS:
            window.candidates[transcript_id] = list(sequences)
            positions[transcript_id] = (created_at, transcript_id)
            window.created[transcript_id] = session_created
            window.texts.update(((transcript_id, seq), text) for seq, text in zip(sequences, segment_texts))


def _postgresql_walk(db, terms, workspace_id, revision_kind, start, pin, common, window, positions) -> None:
    """Fills `window` (empty) by walking the workspace's revisions, and sets where it ends."""
    candidates = window.candidates
    resume, oldest = start, None
    through, down_to = (pin.first, pin.last) if pin else (None, None)
    batch = common_window(terms) if common else CANDIDATE_REVISIONS
    exhausted = False
    for _ in range(1 if common else POSTGRES_MAX_BATCHES):
        rows = None
        if common and len(terms) <= RANGE_LOOKUP_MAX_WORDS:
            rows = _range_matches(db, terms, workspace_id, revision_kind, resume, batch, through, down_to)
        if rows is None:
            with transaction.atomic():
                # The planner would read each revision whole through the transcript_id index and
                # sort; reading the (transcript_id, sequence) index in order stops at the first
                # matches, which for a common word are a few rows away (4x faster measured).
                db.execute("SET LOCAL enable_sort = off")
                db.execute(*_walk_sql(terms, workspace_id, revision_kind, resume, batch, through, down_to))
                rows = db.fetchall()
        rows.sort(key=lambda r: (r[1], r[0]), reverse=True)
        _take_revisions(rows, window, positions)
        if rows:
            oldest = (rows[-1][1], rows[-1][0])
        if len(rows) < batch:
            exhausted = True  # no older revisions (in the pinned window: none left in it)
            break
        if len(candidates) >= CANDIDATE_REVISIONS:
            break
        resume = oldest
    if len(candidates) >= CANDIDATE_REVISIONS:
        window.last, window.more = positions[list(candidates)[-1]], True
    elif exhausted:
        window.last, window.more = (pin.last, pin.more) if pin else (oldest, False)
    else:
        # The walk's bound (or the common words' range): the next window starts past the
        # oldest revision it looked at.
        window.last, window.more = oldest, True


def _window(
    terms: list[str], workspace_id: Any, revision_kind: str | None, start: Any, pin: _Pin | None
) -> _Window:
    """The window that begins at `start` (where the previous one stopped; None = the newest
    revision), or the pinned window `pin`: at most CANDIDATE_REVISIONS revisions."""
    if connection.vendor == "sqlite":
        return _sqlite_window(terms, workspace_id, revision_kind, start, pin)
    if connection.vendor == "postgresql":
        return _postgresql_window(terms, workspace_id, revision_kind, start, pin)
    raise NotImplementedError(f"transcript search has no full-text index for {connection.vendor}")


def _segment_texts(candidates: dict[str, list[int]]) -> tuple[dict[tuple[str, int], str], dict[str, datetime]]:
    """SQLite, whose index is contentless: the candidate segments' texts, and when each
    candidate revision's session was created (the ranking's tie-break), in one query.
    (PostgreSQL's candidate queries read both as they find the segments.)"""
    pairs = [(t, seq) for t, sequences in candidates.items() for seq in sequences]
    values = ", ".join(["(?, ?)"] * len(pairs))
    # From the pairs into segments by the (transcript_id, sequence) index (CROSS JOIN fixes that
    # order, as SQLite would otherwise scan segments for a row-value IN). Up to 800 placeholders.
    # created_at as text: the connection would parse it once per segment, where once per
    # revision is needed.
    with _sqlite_cursor() as raw:
        rows = raw.execute(
            "SELECT seg.transcript_id, seg.sequence, seg.text, CAST(s.created_at AS TEXT)"
            f" FROM (SELECT column1 AS t, column2 AS s FROM (VALUES {values}) AS v) AS p"
            " CROSS JOIN recordings_segment AS seg ON seg.transcript_id = p.t AND seg.sequence = p.s"
            " JOIN recordings_transcript AS tr ON tr.id = seg.transcript_id"
            " JOIN recordings_session AS s ON s.id = tr.session_id",
            [v for pair in pairs for v in pair],
        ).fetchall()
    texts, created = {}, {}
    for transcript_id, sequence, text, created_at in rows:
        texts[transcript_id, sequence] = text
        if transcript_id not in created:
            created[transcript_id] = _aware(created_at)
    return texts, created


def _aware(value: str) -> datetime:
    """A timestamp read from SQLite as text, without the ORM: the naive UTC value Django wrote;
    aware, as the ORM would return it."""
    parsed = datetime.fromisoformat(value)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


def _encode_position(position: Any) -> Any:
    if position is None or isinstance(position, int):
        return position
    created_at, transcript_id = position
    return [created_at.isoformat(), transcript_id]


def _decode_position(value: Any) -> Any:
    if value is None:
        return None
    if connection.vendor == "sqlite":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidRequest()
        return value
    created_at, transcript_id = value
    if not isinstance(created_at, str) or not isinstance(transcript_id, str):
        raise InvalidRequest()
    return parse_iso(created_at), transcript_id


@dataclass(frozen=True)
class _Resume:
    """Where a page starts: in the window `pin` after the hit `after`, or, without them, at the
    start of the window that begins at `start` (None = the newest revision)."""

    start: Any = None
    pin: _Pin | None = None
    after: tuple[float, datetime, str] | None = None


def _decode_resume(workspace: Workspace, cursor: str, digest: str) -> _Resume:
    key = decode_cursor("search", workspace.id, cursor)
    try:
        if key[:2] == ["next", digest] and len(key) == 3 and key[2] is not None:
            return _Resume(start=_decode_position(key[2]))
        if key[:2] != ["in", digest] or len(key) != 8:
            raise InvalidRequest()
        first, last, more, score, created_at, transcript_id = key[2:]
        if first is None or not isinstance(more, bool) or not isinstance(transcript_id, str):
            raise InvalidRequest()
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
            raise InvalidRequest()
        pin = _Pin(_decode_position(first), _decode_position(last), more)
        return _Resume(pin=pin, after=(float(score), parse_iso(created_at), transcript_id))
    except (AttributeError, TypeError, ValueError):
        raise InvalidRequest() from None


def search_transcripts(
    *,
    workspace: Workspace,
    query: str,
    limit: int,
    revision_kind: str | None = None,
    cursor: str | None = None,
) -> tuple[list[SearchHit], str | None]:
    """One page of hits for `query` (every word must occur in one segment) in the workspace's
    transcripts, and the cursor of the next page (None when nothing further matches). A page
    holds hits of one window only (see the module's docstring), so it can be shorter than
    `limit`, even empty, while a cursor still follows."""
    terms = query_terms(query)
    digest = _scope_digest(terms, revision_kind)
    resume = _decode_resume(workspace, cursor, digest) if cursor else _Resume()
    if not terms:
        return [], None

    window = _window(terms, workspace.id, revision_kind, resume.start, resume.pin)
    next_window = encode_cursor("search", workspace.id, ["next", digest, _encode_position(window.last)])
    next_window = next_window if window.more else None
    if not window.candidates:
        return [], next_window
    candidates = window.candidates
    texts, created = window.texts, window.created
    keys = list(dict.fromkeys(_fold(t) for t in terms))
    ranked = []
    for transcript_id, sequences in candidates.items():
        # A revision rewritten since its candidates were found is left out rather than failing.
        scored = [(segment_score(texts[transcript_id, seq], keys), -seq) for seq in sequences
                  if (transcript_id, seq) in texts]
        if scored and transcript_id in created:
            score, best = max(scored)
            ranked.append((score, created[transcript_id], transcript_id, -best))
    ranked.sort(reverse=True)
    if resume.after is not None:
        ranked = [hit for hit in ranked if hit[:3] < resume.after]
    page = ranked[: limit + 1]
    has_more = len(page) > limit
    page = page[:limit]

    transcripts = Transcript.objects.select_related("session").in_bulk([hit[2] for hit in page])
    hits = [
        SearchHit(transcripts[t], transcripts[t].session, make_snippet(texts[t, seq], terms))
        for _, _, t, seq in page
        if t in transcripts
    ]
    if not has_more:
        return hits, next_window
    score, created_at, transcript_id, _ = page[-1]
    # The window as found now, so that its next page ranks the same revisions; microseconds,
    # not the wire's milliseconds: the key must be exact for the keyset to hold.
    pinned = [_encode_position(window.first), _encode_position(window.last), window.more]
    key = ["in", digest, *pinned, score, created_at.isoformat(), transcript_id]
    return hits, encode_cursor("search", workspace.id, key)
