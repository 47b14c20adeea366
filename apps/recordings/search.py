"""Full-text search over transcript segments (DESIGN.md §1 "Search", docs/decisions.md "Search").

The index is the database's own, keyed by workspace first (migrations 0002 and 0003): FTS5 on
SQLite, whose rowids put the workspace, then the revision, then the sequence; on PostgreSQL a
GIN index over lexemes prefixed with the workspace id ('<workspace>:word'). A search only reads
its own workspace's entries.

Work per request is bounded by a candidate set, the same on both databases: the newest
CANDIDATE_REVISIONS revisions that match (every word in one segment), and in each of them its
first CANDIDATE_SEGMENTS matching segments. Each candidate segment is scored from its text
(`segment_score`, BM25's term-frequency part, computed here so both databases score alike); a
hit is a revision scored by its best candidate segment. Hits are ordered by score, then session
newest first, then transcript id, and paged with a keyset cursor on exactly that triple. A query
that matches more revisions than the candidate set ranks the newest ones and stops there.

How the candidates are found (`_candidates`):
- SQLite walks the workspace's rowid range upwards, newest revision first: each step asks FTS5
  for the next few matching rowids above the last one, and jumps to the next revision once a
  revision has given its segments. Every step is a seek in the index, so the cost follows the candidates, never the
  number of matches; a word that matches nothing costs one step.
- PostgreSQL asks the planner how many segments of the workspace match. Few: one query over the
  GIN index reads them all and keeps the newest revisions. Many (`_walk_is_cheaper`): it walks
  the workspace's revisions newest first in batches and probes each for its first matching
  segments (the segment order index, filtered by the stored vector), which for a common word
  finds them within a few rows. A word of middling frequency is the expensive case for both.

Candidates are the newest revisions by when they were first indexed (SQLite: revision key; bulk
imports index oldest first) or created (PostgreSQL: transcript created_at): the same order for
data written as it happens.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from dataclasses import dataclass
from datetime import datetime
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
POSTGRES_COMMON_MATCHES = 2000  # below this estimate of matches PostgreSQL always ranks them all
POSTGRES_MAX_BATCHES = 4  # batches of CANDIDATE_REVISIONS revisions the walk looks at
# Several words that are all common: only the newest revisions are searched (see
# _sqlite_common_until). "Common" is judged on the newest SAMPLE_REVISIONS on SQLite and on
# the planner's statistics on PostgreSQL.
COMMON_SHARE = 0.02
COMMON_QUERY_REVISIONS = 100
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
) -> tuple[str, list[Any]]:
    """The query that finds candidates through the full-text index, never touching other
    workspaces' entries or scanning segments.

    SQLite: one step of the walk, the `limit` lowest matching rowids of the workspace at or
    above `resume` (a rowid; None = from the newest revision) and below `until` (None = to the
    workspace's end), with their revision: (rowid, transcript id, revision kind). The revision
    kind is filtered by the caller.
    PostgreSQL: the direct plan, the `limit` newest matching revisions older than `resume`
    ((created_at, transcript id); None = from the newest) with the first CANDIDATE_SEGMENTS
    matching sequences of each: (transcript id, sequence, created_at)."""
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
        where, params = ["t.workspace_id = %s"], [workspace_id, " ".join(terms), workspace_id]
        if revision_kind:
            where.append("t.revision_kind = %s")
            params.append(revision_kind)
        if resume is not None:
            where.append("(t.created_at, t.id) < (%s, %s)")
            params += list(resume)
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
            SELECT m.transcript_id, m.sequence, m.created_at FROM m JOIN r USING (transcript_id)
            WHERE m.nth <= %s
            ORDER BY m.created_at DESC, m.transcript_id DESC, m.sequence
        """
        return sql, params + [limit, CANDIDATE_SEGMENTS]
    raise NotImplementedError(f"transcript search has no full-text index for {vendor}")


def _walk_sql(terms: list[str], workspace_id: Any, revision_kind: str | None, resume: Any, revisions: int):
    """PostgreSQL, common words: `revisions` of the workspace's revisions older than `resume`,
    newest first, each with its first CANDIDATE_SEGMENTS matching sequences (NULL when none):
    (transcript id, sequence, created_at)."""
    where, params = [], [workspace_id]
    if revision_kind:
        where.append("revision_kind = %s")
        params.append(revision_kind)
    if resume is not None:
        where.append("(created_at, id) < (%s, %s)")
        params += list(resume)
    sql = f"""
        SELECT t.id, m.sequence, t.created_at
        FROM (
            SELECT id, created_at FROM recordings_transcript WHERE workspace_id = %s
            {"".join(" AND " + w for w in where)}
            ORDER BY created_at DESC, id DESC LIMIT %s
        ) AS t
        LEFT JOIN LATERAL (
            SELECT seg.sequence FROM recordings_segment AS seg
            WHERE seg.transcript_id = t.id AND seg.search_vector @@ {_TSQUERY}
            -- the unique (transcript_id, sequence) index in order: stops at the first matches
            ORDER BY seg.transcript_id, seg.sequence LIMIT %s
        ) AS m ON true
    """
    return sql, params + [revisions, workspace_id, " ".join(terms), CANDIDATE_SEGMENTS]


def _estimated_rows(sql: str, params: list[Any]) -> float:
    """The planner's estimate of the rows `sql` returns (statistics only, nothing executed)."""
    with connection.cursor() as db:
        db.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = db.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return float(plan[0]["Plan"]["Plan Rows"])


def _all_words_common(terms: list[str], workspace_id: Any) -> bool:
    """PostgreSQL: whether a query of several words has only common words (each in COMMON_SHARE
    of the workspace's segments or more, by the planner's statistics). GIN intersects their
    long posting lists whole, so such a query only walks the newest COMMON_QUERY_REVISIONS."""
    if len(terms) < 2:
        return False
    segments = _estimated_rows("SELECT 1 FROM recordings_segment WHERE workspace_id = %s", [workspace_id])
    if segments < COMMON_QUERY_REVISIONS * CANDIDATE_SEGMENTS:
        return False
    return all(
        _estimated_rows(f"SELECT 1 FROM recordings_segment AS seg WHERE seg.search_vector @@ {_TSQUERY}",
                        [workspace_id, term]) >= COMMON_SHARE * segments  # fmt: skip
        for term in terms
    )


def _walk_is_cheaper(terms: list[str], workspace_id: Any) -> bool:
    """PostgreSQL: whether walking revisions beats ranking every match. The walk reads about
    R·P/d segments for a density d of matches, the direct plan every match (d·N for N segments
    in the workspace): the walk wins from d·N > sqrt(R·P·N)."""
    matches = _estimated_rows(
        f"SELECT 1 FROM recordings_segment AS seg WHERE seg.search_vector @@ {_TSQUERY}",
        [workspace_id, " ".join(terms)],
    )
    if matches < POSTGRES_COMMON_MATCHES:
        return False
    segments = _estimated_rows("SELECT 1 FROM recordings_segment WHERE workspace_id = %s", [workspace_id])
    return matches > math.sqrt(CANDIDATE_REVISIONS * CANDIDATE_SEGMENTS * segments)


def _sqlite_common_until(db, terms: list[str], workspace_id: Any) -> int | None:
    """The rowid that ends the newest `common_window(terms)` revisions when every word of a
    query of several words is common (COMMON_SHARE or more of the segments of the newest
    SAMPLE_REVISIONS revisions), else None. FTS5 intersects such words entry by entry, so over the whole workspace a rare
    combination of common words would cost in proportion to the workspace's size."""
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
    return (newest[window - 1][0] + 1) << SEQUENCE_BITS


def common_window(terms: list[str]) -> int:
    """How many of the newest revisions a query of only common words searches: fewer for
    longer queries, as every word's entries are read."""
    return max(SAMPLE_REVISIONS, COMMON_QUERY_REVISIONS * 4 // max(4, len(terms)))


def _sqlite_candidates(terms: list[str], workspace_id: Any, revision_kind: str | None) -> dict[str, list[int]]:
    sql, _ = _page_sql("sqlite", terms, workspace_id, revision_kind, None, CANDIDATE_SEGMENTS)
    sql = sql.replace("%s", "?")  # the sqlite3 cursor directly: this runs once per step
    match = fts5_match(terms)
    candidates: dict[str, list[int]] = {}
    resume, steps = None, 0
    with connection.cursor() as db:
        raw = db.cursor
        until = _sqlite_common_until(raw, terms, workspace_id)
        while len(candidates) < CANDIDATE_REVISIONS and steps < SQLITE_MAX_STEPS:
            rows = raw.execute(sql, (match, resume, workspace_id, until, workspace_id, CANDIDATE_SEGMENTS)).fetchall()
            steps += 1
            for rowid, transcript_id, kind in rows:
                if revision_kind and kind != revision_kind:
                    continue
                sequences = candidates.setdefault(transcript_id, [])
                if len(sequences) < CANDIDATE_SEGMENTS:
                    sequences.append(rowid & SEQUENCE_MASK)
            if len(rows) < CANDIDATE_SEGMENTS:
                break  # nothing further matches
            last_rowid, last_transcript, last_kind = rows[-1]
            wanted = not revision_kind or last_kind == revision_kind
            if wanted and len(candidates[last_transcript]) < CANDIDATE_SEGMENTS:
                resume = last_rowid + 1  # the last revision has more to give
            else:
                resume = ((last_rowid >> SEQUENCE_BITS) + 1) << SEQUENCE_BITS  # skip to the next revision
    return dict(list(candidates.items())[:CANDIDATE_REVISIONS])


def _postgresql_candidates(terms: list[str], workspace_id: Any, revision_kind: str | None) -> dict[str, list[int]]:
    candidates: dict[str, list[int]] = {}
    with connection.cursor() as db:
        # Several words: the planner multiplies their frequencies as if independent, which
        # for common words that go together is off by orders of magnitude (measured: 1.8 s
        # ranking 200,000 matches it estimated under 2,000), so only single words are costed.
        common = _all_words_common(terms, workspace_id)
        if not common and (len(terms) > 1 or not _walk_is_cheaper(terms, workspace_id)):
            db.execute(*_page_sql("postgresql", terms, workspace_id, revision_kind, None, CANDIDATE_REVISIONS))
            for transcript_id, sequence, _ in db.fetchall():
                candidates.setdefault(transcript_id, []).append(sequence)
            return candidates
        resume = None
        batch = common_window(terms) if common else CANDIDATE_REVISIONS
        for _ in range(1 if common else POSTGRES_MAX_BATCHES):
            with transaction.atomic():
                # The planner would read each revision whole through the transcript_id index and
                # sort; reading the (transcript_id, sequence) index in order stops at the first
                # matches, which for a common word are a few rows away (4x faster measured).
                db.execute("SET LOCAL enable_sort = off")
                db.execute(*_walk_sql(terms, workspace_id, revision_kind, resume, batch))
                rows = db.fetchall()
            rows.sort(key=lambda r: (r[2], r[0], -(r[1] or 0)), reverse=True)
            for transcript_id, sequence, _ in rows:
                if sequence is not None and (transcript_id in candidates or len(candidates) < CANDIDATE_REVISIONS):
                    candidates.setdefault(transcript_id, []).append(sequence)
            if len(candidates) >= CANDIDATE_REVISIONS or len({r[0] for r in rows}) < batch:
                break
            resume = (rows[-1][2], rows[-1][0])
    return candidates


def _candidates(terms: list[str], workspace_id: Any, revision_kind: str | None) -> dict[str, list[int]]:
    """{transcript id: candidate sequences}, at most CANDIDATE_REVISIONS revisions."""
    if connection.vendor == "sqlite":
        return _sqlite_candidates(terms, workspace_id, revision_kind)
    if connection.vendor == "postgresql":
        return _postgresql_candidates(terms, workspace_id, revision_kind)
    raise NotImplementedError(f"transcript search has no full-text index for {connection.vendor}")


def _segment_texts(candidates: dict[str, list[int]]) -> dict[tuple[str, int], str]:
    pairs = [(t, seq) for t, sequences in candidates.items() for seq in sequences]
    values = ", ".join(["(%s, %s)"] * len(pairs))
    # From the pairs into segments by the (transcript_id, sequence) index (CROSS JOIN fixes that
    # order on SQLite, which would otherwise scan segments for a row-value IN).
    join = "CROSS JOIN" if connection.vendor == "sqlite" else "JOIN"
    with connection.cursor() as db:
        db.execute(
            "SELECT seg.transcript_id, seg.sequence, seg.text"
            f" FROM (SELECT column1 AS t, column2 AS s FROM (VALUES {values}) AS v) AS p"
            f" {join} recordings_segment AS seg ON seg.transcript_id = p.t AND seg.sequence = p.s",
            [v for pair in pairs for v in pair],
        )
        return {(t, seq): text for t, seq, text in db.fetchall()}


def _decode_after(workspace: Workspace, cursor: str, digest: str) -> tuple[float, datetime, str]:
    key = decode_cursor("search", workspace.id, cursor)
    try:
        bound, score, created_at, transcript_id = key
        if bound != digest or not isinstance(score, (int, float)) or isinstance(score, bool):
            raise InvalidRequest()
        if not math.isfinite(score) or not isinstance(transcript_id, str):
            raise InvalidRequest()
        return float(score), parse_iso(created_at), transcript_id
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
    transcripts, and the cursor of the next page (None on the last)."""
    terms = query_terms(query)
    digest = _scope_digest(terms, revision_kind)
    after = _decode_after(workspace, cursor, digest) if cursor else None
    if not terms:
        return [], None

    candidates = _candidates(terms, workspace.id, revision_kind)
    if not candidates:
        return [], None
    texts = _segment_texts(candidates)
    created = dict(Transcript.objects.filter(id__in=list(candidates)).values_list("id", "session__created_at"))
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
    if after is not None:
        ranked = [hit for hit in ranked if hit[:3] < after]
    page = ranked[: limit + 1]
    has_more = len(page) > limit
    page = page[:limit]
    if not page:
        return [], None

    transcripts = Transcript.objects.select_related("session").in_bulk([hit[2] for hit in page])
    hits = [
        SearchHit(transcripts[t], transcripts[t].session, make_snippet(texts[t, seq], terms))
        for _, _, t, seq in page
        if t in transcripts
    ]
    if not has_more or not hits:
        return hits, None
    score, created_at, transcript_id, _ = page[-1]
    # Microseconds, not the wire's milliseconds: the key must be exact for the keyset to hold.
    key = [digest, score, created_at.isoformat(), transcript_id]
    return hits, encode_cursor("search", workspace.id, key)
