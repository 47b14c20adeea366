"""Full-text search over transcript segments (DESIGN.md §1 "Search").

The index is the database's own (migration 0002): FTS5 with bm25 on SQLite, a generated
tsvector with a GIN index and ts_rank on PostgreSQL. A hit is one transcript revision, scored
by its best-matching segment; hits are ordered by score, then session newest first, then
transcript id, and paged with a keyset cursor on exactly that triple.

Ranks depend on corpus statistics, so a cursor walks a stable order only while the index does
not change between pages; rows written meanwhile can make a later page repeat or skip a hit.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from dataclasses import dataclass
from functools import reduce
from operator import or_
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Q

from apps.core.cursors import decode_cursor, encode_cursor
from apps.core.errors import InvalidRequest
from apps.core.timestamps import parse_iso
from apps.recordings.models import Segment, Session, Transcript
from apps.tenancy.models import Workspace

SNIPPET_MAX = 200
SEQUENCE_BITS = 24  # the FTS5 rowid's low bits hold the sequence (migration 0002)
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


def _page_sql(
    vendor: str,
    terms: list[str],
    workspace_id: Any,
    revision_kind: str | None,
    after: tuple[float, datetime, str] | None,
    limit: int,
) -> tuple[str, list[Any]]:
    """(transcript_id, best segment's sequence, score) rows of one page; higher is better.

    Both variants find matching segments through the index, reduce them to one row per
    transcript (its best segment), keep the workspace's transcripts and only then join
    transcripts and sessions, order and limit."""
    if vendor == "sqlite":
        # The FTS rowid is `transcript key << 24 | sequence` (migration 0002), so grouping needs
        # no lookup per matching segment. `rank` is bm25(), lower is better (the hidden column:
        # an auxiliary function cannot be called inside an aggregate). The bare column beside
        # MIN() comes from the row holding the minimum (SQLite's documented min/max rule).
        best = f"""
            SELECT f.rowid >> {SEQUENCE_BITS} AS key, f.rowid & {(1 << SEQUENCE_BITS) - 1} AS sequence,
                   MIN(f.rank) AS bm25
            FROM recordings_segment_fts AS f
            WHERE recordings_segment_fts MATCH %s
            GROUP BY key
        """
        # CROSS JOIN fixes SQLite's join order: from the grouped matches, by primary key into
        # keys, transcripts and sessions (on small or fresh statistics it may otherwise scan).
        join = "CROSS JOIN recordings_segment_search AS k ON k.id = best.key AND k.workspace_id = %s"
        join_kind = "CROSS JOIN"
        transcript_id, score = "k.transcript_id", "-best.bm25"
        params: list[Any] = [fts5_match(terms), workspace_id]
    elif vendor == "postgresql":
        # float8, not ts_rank's real: the cursor carries the score as a double, and a real
        # printed and read back is not the same number as the real widened in SQL.
        # Normalization 1 divides by 1 + log(length), so long segments do not win by size.
        best = """
            SELECT DISTINCT ON (seg.transcript_id)
                   seg.transcript_id, seg.sequence,
                   ts_rank(seg.search_vector, q.query, 1)::float8 AS rank
            FROM recordings_segment AS seg, plainto_tsquery('connect_search'::regconfig, %s) AS q(query)
            WHERE seg.search_vector @@ q.query AND seg.workspace_id = %s
            ORDER BY seg.transcript_id, rank DESC, seg.sequence
        """
        join, join_kind = "", "JOIN"
        transcript_id, score = "best.transcript_id", "best.rank"
        params = [" ".join(terms), workspace_id]
    else:
        raise NotImplementedError(f"transcript search has no full-text index for {vendor}")

    where = []
    if revision_kind:
        where.append("t.revision_kind = %s")
        params.append(revision_kind)
    if after is not None:
        after_score, after_created, after_id = after
        where.append(f"({score}, s.created_at, t.id) < (%s, %s, %s)")
        params += [after_score, connection.ops.adapt_datetimefield_value(after_created), after_id]
    sql = f"""
        WITH best AS ({best})
        SELECT {transcript_id}, best.sequence, {score} AS score
        FROM best {join}
        {join_kind} recordings_transcript AS t ON t.id = {transcript_id}
        {join_kind} recordings_session AS s ON s.id = t.session_id
        {"WHERE " + " AND ".join(where) if where else ""}
        ORDER BY score DESC, s.created_at DESC, t.id DESC
        LIMIT %s
    """
    params.append(limit)
    return sql, params


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

    sql, params = _page_sql(connection.vendor, terms, workspace.id, revision_kind, after, limit + 1)
    with connection.cursor() as db:
        db.execute(sql, params)
        rows = db.fetchall()
    has_more = len(rows) > limit
    rows = rows[:limit]

    if not rows:
        return [], None
    transcripts = Transcript.objects.select_related("session").in_bulk([r[0] for r in rows])
    best_segments = reduce(or_, (Q(transcript_id=t, sequence=seq) for t, seq, _ in rows))
    texts = {
        (t, seq): text
        for t, seq, text in Segment.objects.filter(best_segments).values_list("transcript_id", "sequence", "text")
    }
    hits, last_score = [], 0.0
    for transcript_id, sequence, score in rows:
        # A revision rewritten between the two queries is left out rather than failing the page.
        if transcript_id in transcripts and (transcript_id, sequence) in texts:
            transcript = transcripts[transcript_id]
            snippet = make_snippet(texts[transcript_id, sequence], terms)
            hits.append(SearchHit(transcript, transcript.session, snippet))
            last_score = score
    if not has_more or not hits:
        return hits, None
    last = hits[-1]
    # Microseconds, not the wire's milliseconds: the key must be exact for the keyset to hold.
    key = [digest, last_score, last.session.created_at.isoformat(), last.transcript.id]
    return hits, encode_cursor("search", workspace.id, key)
