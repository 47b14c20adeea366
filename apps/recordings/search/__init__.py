"""Full-text search over transcript segments (docs/api/search.md, docs/decisions/search.md).

The index is the database's own, keyed by workspace first (FTS5 on SQLite, a GIN index over
workspace-prefixed lexemes on PostgreSQL): a search only reads its own workspace's entries.

Work per request is bounded by windows, the same on both databases (`windows`): a page ranks
one window of matching revisions, newest first, and holds hits of that window only, best match
first; its cursor (`cursors`) carries the window, so later pages rank the same revisions even
while newer ones are written. Every matching revision is reachable; nextCursor is None only when
nothing further matches, and a page can be shorter than `limit`, even empty, with a cursor.

Modules, by what changes together: `terms`, `scoring`, `snippets`, `windows` (pure, no Django);
`cursors`; the engines `sqlite` and `postgresql` (its SQL in `postgresql_queries`); `pages` (one
page: the window, ranked, cut, and its cursor). `services.compact_search_index` keeps both
indexes merged (docs/decisions/search.md "Search as a package")."""

from __future__ import annotations

from apps.recordings.search.pages import SearchHit, search_transcripts
from apps.recordings.search.terms import query_terms

__all__ = ["SearchHit", "query_terms", "search_transcripts"]
