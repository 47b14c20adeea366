"""What one search request ranks: a window of candidates, and the bounds that keep it small.
Pure: no Django, no database.

A window is at most CANDIDATE_REVISIONS matching revisions (every word in one segment),
consecutive from newest to oldest, each with its first CANDIDATE_SEGMENTS matching segments:
each next window holds those older than the previous window's end. Both engines find windows
the same size, so a request's work is bounded on both, and paging reaches every matching
revision. On SQLite, a query whose words are all common (COMMON_SHARE) takes its windows as
ranges of revisions, matching or not, since FTS5 would intersect such words entry by entry over
the whole workspace (docs/decisions/search.md "Search at scale").

Positions are each engine's walk order; this module only carries them. The engines read these
bounds as `windows.NAME` when they run, not at import, so that a test can shrink a window for
all of them at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

CANDIDATE_REVISIONS = 100  # the newest matching revisions that are ranked
CANDIDATE_SEGMENTS = 4  # matching segments scored per revision (its first ones)
COMMON_SHARE = 0.02  # a word in this share of the workspace's segments or more is common
COMMON_QUERY_REVISIONS = 100  # revisions in one range of an all-common-words query (up to four words)
SAMPLE_REVISIONS = 8  # SQLite judges "common" on this many of the newest revisions

Position = Any  # an engine's place in its walk order: an int rowid, or a (created_at, id) pair


def common_words_range(terms: list[str]) -> int:
    """How many revisions one window of a query of only common words spans: fewer for longer
    queries, as every word's entries are read."""
    return max(SAMPLE_REVISIONS, COMMON_QUERY_REVISIONS * 4 // max(4, len(terms)))


@dataclass(frozen=True)
class WindowBounds:
    """Where a window lies, as a cursor carries it while the window is paged.

    `first` is its newest candidate's position, `last` where it stops (the next window starts
    past it), `more` whether anything past `last` may match. SQLite: `first` inclusive, `last`
    exclusive, None = the workspace's end; PostgreSQL: both inclusive."""

    first: Position
    last: Position
    more: bool


class HitTranscript(NamedTuple):
    """What a hit shows of its revision (shapes.SEARCH_HIT reads these attributes)."""

    id: str
    revision_kind: str


class HitSession(NamedTuple):
    """What a hit shows of its session: shapes.SESSION_SUMMARY's fields, timestamps as aware
    datetimes (as the ORM returns them)."""

    id: str
    label: str | None
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    created_at: datetime


@dataclass
class CandidateWindow:
    """The candidate revisions of one window as an engine found them, and where the window lies.

    `candidates` maps transcript id to candidate segment sequences, in walk order (newest
    first); `texts` holds the candidate segments' texts, `starts` their timestamp_start,
    `created` each candidate revision's session created_at (the ranking's tie-break) and
    `revisions` what a hit shows of the revision and its session: all read in the one query of
    the texts, so a page needs no other. An engine that knows a candidate's score without its
    text puts it in `scores` instead; the texts (and starts) of the page's hits are then read
    once the window is ranked. `first` is None when there are no candidates."""

    candidates: dict[str, list[int]]
    first: Position = None
    last: Position = None
    more: bool = False
    texts: dict[tuple[str, int], str] = field(default_factory=dict)
    created: dict[str, datetime] = field(default_factory=dict)
    starts: dict[tuple[str, int], int] = field(default_factory=dict)
    revisions: dict[str, tuple[HitTranscript, HitSession]] = field(default_factory=dict)
    scores: dict[tuple[str, int], float] = field(default_factory=dict)

    def settle(self, shown: WindowBounds | None) -> CandidateWindow:
        """The window found again for a cursor's `shown` bounds: when it still ends where it
        did, what was known past its end then is kept (a bound reached now says less)."""
        if shown is not None and self.last == shown.last:
            self.more = shown.more
        return self

    def bounds(self) -> WindowBounds:
        """Where this window lies, for the cursor of its next page."""
        return WindowBounds(self.first, self.last, self.more)
