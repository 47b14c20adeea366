"""Search by meaning (`mode=semantic`) and hybrid search (`mode=hybrid`), over the same hits as
keyword search: one per transcript revision, its best segment, a snippet, the session.

semantic: the workspace's segments nearest the query's vector (apps/recordings/semantic/index.py),
best segment per revision, at most MAX_REVISIONS revisions, best first.
hybrid: the keyword list (keyword search's first window, best first) and the semantic list,
fused by reciprocal rank (`fusion`); a revision in the keyword list shows its keyword hit (its
snippet is cut around the words), one only in the semantic list its nearest segment.

Both lists are bounded (MAX_REVISIONS revisions, NEAREST_SEGMENTS segments), so a search costs
one pass over its own workspace's vectors and a few indexed reads. Pages are cut from the list
computed again for each page, at the offset the signed cursor carries (bound to the workspace,
the mode, the query text and revisionKind): data written between two pages can move hits across
a page boundary, which keyword search's windows avoid and a ranked list of the nearest cannot."""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass
from functools import reduce
from typing import Any

from django.db import connection
from django.db.models import Q

from apps.core.cursors import InvalidCursor, decode_cursor, encode_cursor
from apps.core.errors import invalid
from apps.recordings.models import Segment, SegmentEmbedding, Transcript
from apps.recordings.search.fusion import fuse
from apps.recordings.search.pages import SearchHit, search_transcripts
from apps.recordings.search.snippets import make_snippet
from apps.recordings.search.terms import query_terms
from apps.recordings.search.windows import HitSession, HitTranscript
from apps.tenancy.models import Workspace

MODES = ("keyword", "semantic", "hybrid")
MAX_REVISIONS = 100  # the longest list a query pages through
NEAREST_SEGMENTS = 1000  # segments ranked per search, grouped into at most MAX_REVISIONS revisions
READ_BACK = 2 * MAX_REVISIONS  # revisions' best segments read back from the database at a time
LISTING = "search"
EMBEDDINGS = SegmentEmbedding._meta.db_table
SEGMENTS = Segment._meta.db_table
TRANSCRIPTS = Transcript._meta.db_table


@dataclass(frozen=True)
class ScoredHit:
    """A SearchHit (the same attributes, so shapes.SEARCH_HIT encodes it) with its `score`:
    the cosine similarity of its segment (semantic) or its fused rank score (hybrid)."""

    transcript: HitTranscript
    session: HitSession
    snippet: str
    sequence: int
    timestamp_start: int
    score: float


def _digest(mode: str, query: str, revision_kind: str | None) -> str:
    canonical = "\x1f".join([mode, revision_kind or "", " ".join(query.split()).casefold()])
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _offset(workspace: Workspace, cursor: str | None, digest: str) -> int:
    if not cursor:
        return 0
    key = decode_cursor(LISTING, workspace.id, cursor)
    if not (isinstance(key, list) and len(key) == 3 and key[:2] == ["ranked", digest]):
        raise InvalidCursor()
    offset = key[2]
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 < offset <= MAX_REVISIONS:
        raise InvalidCursor()
    return offset


def nearest_revisions(workspace: Workspace, query: str, revision_kind: str | None) -> list[tuple[str, int, float]]:
    """(transcript id, sequence, cosine) of the revisions nearest `query`, best first: each
    revision's nearest segment among the NEAREST_SEGMENTS nearest, at most MAX_REVISIONS."""
    from apps.recordings.semantic import index
    from apps.recordings.semantic.embedders import current, query_vector

    embedder = current()
    # One candidate a revision (grouped in memory), read back in batches until MAX_REVISIONS
    # are kept: a revision whose best segment is gone since is left out of this search.
    candidates = index.nearest_per_transcript(workspace.id, embedder.name, query_vector(query), NEAREST_SEGMENTS)
    kept: list[tuple[str, int, float]] = []
    gone: set[int] = set()
    for start in range(0, len(candidates), READ_BACK):
        batch = candidates[start : start + READ_BACK]
        found = _read_back(workspace, [embedding_id for embedding_id, _, _ in batch])
        for embedding_id, score, _ in batch:
            row = found.get(embedding_id)
            if row is None:
                gone.add(embedding_id)
            elif not revision_kind or row[2] == revision_kind:
                kept.append((row[0], row[1], score))
        if len(kept) >= MAX_REVISIONS:
            break
    index.forget_ids(workspace.id, embedder.name, gone)
    return kept[:MAX_REVISIONS]


def _read_back(workspace: Workspace, embedding_ids: list[int]) -> dict[int, tuple[str, int, str]]:
    """embedding id: (transcript id, sequence, revision kind) of the rows as stored now, each
    read by primary key (a deleted vector or segment is not returned), kept only when of this
    workspace. The workspace is checked here, not in SQL: with it in the WHERE clause SQLite
    chose the workspace's index and read all its rows."""
    if not embedding_ids:
        return {}
    sql = (
        f"SELECT e.id, e.workspace_id, s.workspace_id, s.transcript_id, s.sequence, t.revision_kind"
        f" FROM {EMBEDDINGS} AS e JOIN {SEGMENTS} AS s ON s.id = e.segment_id"
        f" JOIN {TRANSCRIPTS} AS t ON t.id = s.transcript_id WHERE e.id IN ({', '.join(['%s'] * len(embedding_ids))})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, embedding_ids)
        return {row[0]: row[3:] for row in cursor.fetchall() if row[1] == row[2] == workspace.id}


def _hits(workspace: Workspace, wanted: list[tuple[str, int, float]], terms: list[str]) -> list[ScoredHit]:
    """The hits of (transcript id, sequence, score), in that order, read in one query."""
    if not wanted:
        return []
    pairs = {(t, s) for t, s, _ in wanted}
    # One lookup of the (transcript, sequence) index a hit (an OR of the pairs: `transcript IN
    # … AND sequence IN …` read the cross product, up to limit² rows); the workspace is checked
    # on the rows (see above).
    rows = (
        Segment.objects.filter(reduce(operator.or_, (Q(transcript_id=t, sequence=s) for t, s in pairs)))
        .values_list("workspace_id", "transcript_id", "sequence", "text", "timestamp_start", "transcript__revision_kind",
                     "transcript__session_id", "transcript__session__label", "transcript__session__status",
                     "transcript__session__started_at", "transcript__session__ended_at",
                     "transcript__session__created_at")
    )  # fmt: skip
    found = {(r[1], r[2]): r[1:] for r in rows if r[0] == workspace.id and (r[1], r[2]) in pairs}
    hits = []
    for transcript_id, sequence, score in wanted:
        row = found.get((transcript_id, sequence))
        if row is None:
            continue  # deleted since it was ranked
        _, _, text, start, kind, session_id, label, status, started, ended, created = row
        hits.append(ScoredHit(HitTranscript(transcript_id, kind), HitSession(session_id, label, status, started, ended, created),
                              make_snippet(text, terms), sequence, start, score))  # fmt: skip
    return hits


def ranked_list(workspace: Workspace, query: str, mode: str, revision_kind: str | None) -> list[tuple[Any, float]]:
    """The whole ranked list a query pages through: (hit or (transcript id, sequence), score)."""
    semantic = nearest_revisions(workspace, query, revision_kind)
    if mode == "semantic":
        return [((t, s), score) for t, s, score in semantic]
    keyword, _ = search_transcripts(workspace=workspace, query=query, limit=MAX_REVISIONS, revision_kind=revision_kind)
    keyword_hits = {hit.transcript.id: hit for hit in keyword}
    nearest = {t: (t, s) for t, s, _ in semantic}
    fused = fuse([hit.transcript.id for hit in keyword], [t for t, _, _ in semantic])
    return [(keyword_hits.get(t) or nearest[t], score) for t, score in fused[:MAX_REVISIONS]]


def search_by_meaning(*, workspace: Workspace, query: str, mode: str, limit: int, revision_kind: str | None = None,
                      cursor: str | None = None) -> tuple[list[ScoredHit], str | None]:  # fmt: skip
    """One page of the `mode` (semantic or hybrid) list of `query`, and the next page's cursor
    (None at the list's end)."""
    digest = _digest(mode, query, revision_kind)
    offset = _offset(workspace, cursor, digest)
    if not query.strip():
        return [], None
    ranked = ranked_list(workspace, query, mode, revision_kind)
    page = ranked[offset : offset + limit]
    terms = query_terms(query)
    hits: list[ScoredHit] = []
    unread = [(item[0], item[1], score) for item, score in page if not isinstance(item, SearchHit)]
    read = {(h.transcript.id, h.sequence): h for h in _hits(workspace, unread, terms)}
    for item, score in page:
        if isinstance(item, SearchHit):
            hits.append(ScoredHit(item.transcript, item.session, item.snippet, item.sequence, item.timestamp_start, score))
        elif item in read:
            hit = read[item]
            hits.append(ScoredHit(hit.transcript, hit.session, hit.snippet, hit.sequence, hit.timestamp_start, score))
    end = offset + limit
    next_cursor = encode_cursor(LISTING, workspace.id, ["ranked", digest, end]) if end < len(ranked) else None
    return hits, next_cursor


def search_with_mode(*, workspace: Workspace, query: str, mode: str, limit: int, revision_kind: str | None = None,
                     cursor: str | None = None) -> tuple[list[ScoredHit], str | None]:  # fmt: skip
    """`search_by_meaning`, or 400 `invalid_request` saying how to turn search by meaning on
    when it is off (REST and MCP alike)."""
    from apps.recordings.semantic import HOW_TO_TURN_ON, enabled

    if not enabled():
        raise invalid("mode", f"{mode} needs {HOW_TO_TURN_ON}")
    return search_by_meaning(workspace=workspace, query=query, mode=mode, limit=limit, revision_kind=revision_kind,
                             cursor=cursor)  # fmt: skip
