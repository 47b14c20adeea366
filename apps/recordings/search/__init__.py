"""Full-text search over transcript segments (DESIGN.md §1 "Search", docs/decisions/search.md).

The index is the database's own, keyed by workspace first (migrations 0002 and 0003): FTS5 on
SQLite, whose rowids put the workspace, then the revision, then the sequence; on PostgreSQL a
GIN index over lexemes prefixed with the workspace id ('<workspace>:word'). A search only reads
its own workspace's entries.

Work per request is bounded by windows, the same on both databases (`windows`): a page ranks
one window of at most CANDIDATE_REVISIONS matching revisions, consecutive from newest to oldest,
each scored by its best of its first CANDIDATE_SEGMENTS matching segments (`scoring`). Hits are
ordered best match first within each window of the newest remaining matches: by window, then
score, then session newest first, then transcript id. A page holds hits of one window; its
cursor (`cursors`) carries the window, so later pages rank the same revisions even while newer
ones are written, and the last hit's ranking key, or, once the window is shown, where the next
window begins. Every matching revision is reachable; nextCursor is None only when nothing
further matches. A page can be shorter than `limit`, even empty, with a cursor: at a window's
end, when a walk stopped at its bound before filling the window, and for the ranges of
all-common words.

Modules, by what changes together:
- `terms`, `scoring`, `snippets`, `windows`: the query's words, the ranking, the snippet and
  the window's bounds; pure, no Django.
- `cursors`: what a page's cursor carries.
- `sqlite`: the SQLite engine, a walk through the workspace's rowid range.
- `postgresql`, `postgresql_queries`: the PostgreSQL engine, the rarest word's revisions read
  in batches and checked against the other words, ranked from the weights its index keeps
  (migration 0008) so that only a page's hits read their texts, and its SQL.
- `pages`: one page: the window, ranked, cut, and its cursor.

`services.compact_search_index` keeps both indexes merged (hourly).
"""

from __future__ import annotations

from apps.recordings.search.pages import SearchHit, search_transcripts
from apps.recordings.search.terms import query_terms

__all__ = ["SearchHit", "query_terms", "search_transcripts"]
