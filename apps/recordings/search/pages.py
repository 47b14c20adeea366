"""One page of search hits: the window the cursor points at, ranked, the page cut from it, and
the cursor of the next page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection

import apps.recordings.search.postgresql as postgresql
import apps.recordings.search.sqlite as sqlite
from apps.recordings.search.cursors import (
    PageStart,
    next_window_cursor,
    read_cursor,
    same_window_cursor,
    scope_digest,
)
from apps.recordings.search.scoring import RankedHit, rank
from apps.recordings.search.snippets import make_snippet
from apps.recordings.search.terms import query_keys, query_terms
from apps.recordings.search.windows import CandidateWindow, HitSession, HitTranscript, WindowBounds
from apps.tenancy.models import Workspace


@dataclass(frozen=True)
class SearchHit:
    """One hit: a transcript revision, its session (rows of the fields shapes.SEARCH_HIT reads,
    read with the candidates' texts), and where it matches: its best candidate segment (the
    best-scoring of its first CANDIDATE_SEGMENTS matching segments, the earliest of equal ones,
    `scoring.rank`), the snippet cut from that segment's text, its sequence and its start
    (milliseconds from the session start)."""

    transcript: HitTranscript
    session: HitSession
    snippet: str
    sequence: int
    timestamp_start: int


def find_window(
    terms: list[str], workspace_id: Any, revision_kind: str | None, start: Any, shown: WindowBounds | None
) -> CandidateWindow:
    """The window that begins at `start` (where the previous one stopped; None = the newest
    revision), or the window `shown` again: at most CANDIDATE_REVISIONS revisions."""
    if connection.vendor == "sqlite":
        return sqlite.find_window(terms, workspace_id, revision_kind, start, shown)
    if connection.vendor == "postgresql":
        return postgresql.find_window(terms, workspace_id, revision_kind, start, shown)
    raise NotImplementedError(f"transcript search has no full-text index for {connection.vendor}")


def _shown(window: CandidateWindow, hit: RankedHit) -> bool:
    """Whether the window has read all that `hit` shows (its segment's text, its revision)."""
    return (hit.transcript_id, hit.sequence) in window.texts and hit.transcript_id in window.revisions


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
    holds hits of one window only, so it can be shorter than `limit`, even empty, while a
    cursor still follows."""
    terms = query_terms(query)
    digest = scope_digest(terms, revision_kind)
    start = read_cursor(workspace.id, cursor, digest, connection.vendor) if cursor else PageStart()
    if not terms:
        return [], None

    window = find_window(terms, workspace.id, revision_kind, start.window_from, start.shown)

    def next_window() -> str | None:
        """The cursor of the next window: signed only for a page that ends its window."""
        return next_window_cursor(workspace.id, digest, window.last) if window.more else None

    if not window.candidates:
        return [], next_window()
    ranked = rank(window.candidates, window.texts, window.created, query_keys(terms), start.after, window.scores)
    page = ranked[: limit + 1]
    has_more = len(page) > limit
    page = page[:limit]
    # Ranked from the weights the index keeps (PostgreSQL): what the page shows is read now. A
    # hit whose revision or segment is gone since (rewritten) is left out, as rank leaves out
    # one found without its text.
    if unread := [(hit.transcript_id, hit.sequence) for hit in page if not _shown(window, hit)]:
        postgresql.add_page(window, unread)

    hits = [
        SearchHit(*window.revisions[hit.transcript_id], make_snippet(window.texts[hit.transcript_id, hit.sequence], terms),
                  hit.sequence, window.starts[hit.transcript_id, hit.sequence])
        for hit in page
        if _shown(window, hit)
    ]  # fmt: skip
    if not has_more:
        return hits, next_window()
    # The window as found now, so that its next page ranks the same revisions.
    return hits, same_window_cursor(workspace.id, digest, window.bounds(), page[-1])
