"""PostgreSQL: which candidate plan a query takes, from what the database knows of its words.

Two plans find a window (`postgresql_queries`): the direct plan reads every match through the
GIN index and keeps the newest revisions, so its cost follows the number of matches; the walk
probes the newest revisions one by one for their first matches, so its cost follows how far
apart matches are. One word: the planner's estimate of its matches in the workspace chooses
(`walk_is_cheaper`). Several words: the planner multiplies their frequencies as if they were
independent, which for common words that go together is off by orders of magnitude, so only
single words are costed; a query whose words are all common walks one range of revisions per
window (`all_words_common`), any other takes the direct plan, whose cost its rarest word bounds.

The planner's statistics are the whole table's and keep only its most common lexemes; every
other word gets one fixed guess, so in a table of many workspaces most words of a small one
look alike, whether in no segment or in thousands. Such a word is counted through the index,
the count stopping as soon as the answer is clear (`matching_segments`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.db import connection

import apps.recordings.search.windows as windows
from apps.recordings.search.postgresql_queries import MATCHES_SQL

MIN_MATCHES_TO_WALK = 2000  # a word in fewer of the workspace's segments always takes the direct plan
# What a segment the walk checks costs against a match the direct plan ranks (`walk_is_cheaper`),
# calibrated where the two plans cross (docs/decisions.md "Search at scale").
WALK_SEGMENT_COST = 1 / 6


def estimated_rows(sql: str, params: list[Any]) -> float:
    """The planner's estimate of the rows `sql` returns (statistics only, nothing executed)."""
    with connection.cursor() as db:
        db.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        plan = db.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return float(plan[0]["Plan"]["Plan Rows"])


def unknown_estimate() -> float:
    """The planner's estimate for a word its statistics do not know (one fixed guess, half the
    least common kept frequency). No workspace id is empty: '' names a lexeme never indexed."""
    return estimated_rows(MATCHES_SQL, ["", "unknown"])


def matching_segments(workspace_id: Any, word: str, enough: float, unknown: float) -> float:
    """How many of the workspace's segments contain `word`, as far as it takes to tell whether
    `enough` do: the planner's estimate when its statistics know the word (it is above
    `unknown`, `unknown_estimate()`), else a count through the index that stops there. Known
    words keep the estimate: counting a common word of a big workspace would read its whole
    posting list."""
    estimate = estimated_rows(MATCHES_SQL, [workspace_id, word])
    if estimate > unknown:
        return estimate
    with connection.cursor() as db:
        db.execute(f"SELECT count(*) FROM ({MATCHES_SQL} LIMIT %s) AS m", [workspace_id, word, math.ceil(enough)])
        return db.fetchone()[0]


def all_words_common(terms: list[str], workspace_id: Any) -> bool:
    """Whether a query of several words has only common words (each in COMMON_SHARE of the
    workspace's segments or more). GIN intersects their long posting lists whole, so such a
    query walks ranges of COMMON_QUERY_REVISIONS revisions instead."""
    if len(terms) < 2:
        return False
    segments = estimated_rows("SELECT 1 FROM recordings_segment WHERE workspace_id = %s", [workspace_id])
    if segments < windows.COMMON_QUERY_REVISIONS * windows.CANDIDATE_SEGMENTS:
        return False
    common, unknown = windows.COMMON_SHARE * segments, unknown_estimate()
    return all(matching_segments(workspace_id, term, common, unknown) >= common for term in terms)


def walk_is_cheaper(terms: list[str], workspace_id: Any) -> bool:
    """One word: whether walking revisions beats ranking every match. The walk checks about
    R·P/d segments for a density d of matches (R revisions of P candidate segments), the direct
    plan ranks every match (d·N for N segments in the workspace), each WALK_SEGMENT_COST times
    as costly as a check: the walk wins from d·N > sqrt(WALK_SEGMENT_COST·R·P·N)."""
    segments = estimated_rows("SELECT 1 FROM recordings_segment WHERE workspace_id = %s", [workspace_id])
    revisions, per_revision = windows.CANDIDATE_REVISIONS, windows.CANDIDATE_SEGMENTS
    walk_from = max(MIN_MATCHES_TO_WALK, math.sqrt(WALK_SEGMENT_COST * revisions * per_revision * segments))
    return matching_segments(workspace_id, " ".join(terms), walk_from + 1, unknown_estimate()) > walk_from
