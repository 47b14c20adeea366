"""The SQL of PostgreSQL's search (built here, run by `postgresql`). No Django.

All of it reads `recordings_revisionword` (migration 0005): one row per (revision, word) with
the sorted sequences of the revision's segments that contain the word; words are the lexemes of
the segments' search_vector without the workspace prefix (migration 0003), and a query's words
are folded by the same text search configuration, `connect_search`. Revisions are ordered by
transcript (created_at, id), newest first; a window's bounds are such pairs, both inclusive.
"""

from __future__ import annotations

from typing import Any

def epoch_us(column: str) -> str:
    """A timestamp column as microseconds since the epoch (exact: extract gives a numeric):
    what the engine reads instead of timestamptz values (`postgresql.instant`)."""
    return f"(extract(epoch FROM {column}) * 1000000)::bigint"


# The query's words as the segments' search_vector holds them (its lexemes without the
# workspace prefix: migration 0003's connect_search_vector), each with its count of revisions.
WORDS_SQL = """
    SELECT q.word, (SELECT count(*) FROM (
        SELECT 1 FROM recordings_revisionword AS w WHERE w.workspace_id = %s AND w.word = q.word LIMIT %s
    ) AS c)
    FROM unnest(tsvector_to_array(to_tsvector('connect_search'::regconfig, %s))) AS q(word)
"""
def hit_joins(revision: str, sequences: str, gate: str = "true") -> str:
    """What a page needs of a matched revision (the column `revision`, its candidate sequences
    `sequences`, an integer[]): its candidate segments' texts and starts (`y`), and what a hit
    shows of the revision and its session (`x`: windows.HitTranscript, HitSession), selected
    by HIT_COLUMNS. Each read by key, per revision (OFFSET 0 keeps the transcript's and
    session's a lookup, not a hash join over every transcript and session of the database),
    and only where `gate` holds (a one-time filter per revision): NULLs elsewhere. The three
    aggregates read the same rows in the same order, so their arrays line up."""
    return f"""
    LEFT JOIN LATERAL (
        SELECT t.revision_kind, s.id, s.label, s.status, {epoch_us("s.started_at")} AS started,
               {epoch_us("s.ended_at")} AS ended, {epoch_us("s.created_at")} AS created
        FROM recordings_transcript AS t JOIN recordings_session AS s ON s.id = t.session_id
        WHERE {gate} AND t.id = {revision} OFFSET 0
    ) AS x ON true
    LEFT JOIN LATERAL (
        SELECT array_agg(seg.sequence) AS sequences, array_agg(seg.text) AS texts,
               array_agg(seg.timestamp_start) AS starts
        FROM recordings_segment AS seg
        WHERE {gate} AND seg.transcript_id = {revision} AND seg.sequence = ANY({sequences})
    ) AS y ON true"""


HIT_COLUMNS = "x.revision_kind, x.id, x.label, x.status, x.started, x.ended, x.created, y.sequences, y.texts, y.starts"

# The matched revisions' hit columns, for revisions whose words were not all intersected in
# their batch (`batch_sql` reads them itself otherwise): the ids, and each one's candidate
# sequences as an array literal, in two arrays.
TEXTS_SQL = f"""
    SELECT r.transcript_id, {HIT_COLUMNS}
    FROM unnest(%s::varchar[], %s::text[]) AS r(transcript_id, sequences)
    {hit_joins("r.transcript_id", "r.sequences::integer[]")}
"""
OTHER_WORD_SQL = (
    "SELECT transcript_id, sequences FROM recordings_revisionword WHERE transcript_id = ANY(%s::varchar[]) AND word = %s"
)


def newest_first(alias: str = "") -> str:
    """The walk order, newest revision first (`alias`: "d." for a subquery's columns)."""
    return f"ORDER BY {alias}created_at DESC, {alias}transcript_id DESC"


def driver_sql(workspace_id: Any, word: str, revision_kind: str | None, resume: Any, through: Any,
               down_to: Any, limit: int) -> tuple[str, list[Any]]:  # fmt: skip
    """The newest revisions containing `word` (older than `resume`, within `through` … `down_to`,
    each a (created_at, id) pair or None), with the word's sequences: one range of the index."""
    where, params = ["workspace_id = %s", "word = %s"], [workspace_id, word]
    if revision_kind:
        where.append("revision_kind = %s")
        params.append(revision_kind)
    for bound, op in ((resume, "<"), (through, "<="), (down_to, ">=")):
        if bound is not None:
            where.append(f"(created_at, transcript_id) {op} (%s, %s)")
            params += list(bound)
    sql = (
        "SELECT transcript_id, created_at, sequences FROM recordings_revisionword"
        f" WHERE {' AND '.join(where)} {newest_first()} LIMIT %s"
    )
    return sql, params + [limit]


SQL_WORDS = 8  # words a batch intersects in SQL (the rarest); the others, if any, are checked after
RANGE_ROWS = 4  # a word's range read beside the driver's holds at most this many rows per driver row


def ranged_source(workspace_id: Any, driver: str, driver_params: list[Any], words: list[str],
                  revision_kind: str | None, limit: int) -> tuple[str, list[Any], str, list[Any]]:  # fmt: skip
    """The batch's revisions (`driver`: the driver's range) with the sequences they share with
    `words`, each word's rows read as a range of the same index beside the driver's, instead of
    one lookup per revision: its rows between the driver's newest and oldest created_at, newest
    first, at most RANGE_ROWS × `limit` of them, joined to the driver's by transcript (hash
    joins over materialized CTEs). A revision older than what a range holds when it stopped
    at its bound reads its row of that word by primary key (a subquery in the CASE's other
    branch, run only for it): a word far more frequent than the driver costs at most its
    bounded range and the lookups, never the whole range between two driver rows.

    Returns the WITH clause and its parameters, then a FROM item `d` (transcript_id,
    created_at, sequences: those shared with every word, intersected in C, NULL or empty when
    none) and its parameters; `batch_sql` continues from `d` as from the driver."""
    cap = max(1, int(RANGE_ROWS * limit))  # read when called: tests lower it
    ctes, params = [f"d AS MATERIALIZED ({driver})"], list(driver_params)
    shared, source_params, joins = "d.sequences", [], []
    for n, word in enumerate(words, start=1):
        kind = " AND revision_kind = %s" if revision_kind else ""
        ctes.append(
            f"r{n} AS MATERIALIZED (SELECT transcript_id, created_at, sequences FROM recordings_revisionword"
            f" WHERE workspace_id = %s AND word = %s{kind}"
            " AND created_at <= (SELECT max(created_at) FROM d) AND created_at >= (SELECT min(created_at) FROM d)"
            f" {newest_first()} LIMIT %s)"
        )  # fmt: skip
        params += [workspace_id, word, *([revision_kind] if revision_kind else []), cap]
        joins.append(f" LEFT JOIN r{n} AS j{n} ON j{n}.transcript_id = d.transcript_id")
        # Covered: found in the range, or the range did not stop at its bound, or the revision
        # is not older than the range's oldest row.
        covered = (f"j{n}.transcript_id IS NOT NULL OR (SELECT count(*) FROM r{n}) < %s"
                   f" OR (d.created_at, d.transcript_id) >= (SELECT created_at, transcript_id FROM r{n}"
                   " ORDER BY created_at, transcript_id LIMIT 1)")  # fmt: skip
        lookup = (f"(SELECT o.sequences FROM recordings_revisionword AS o"
                  f" WHERE o.transcript_id = d.transcript_id AND o.word = %s)")  # fmt: skip
        shared = f"recordings_sequences_and({shared}, CASE WHEN {covered} THEN j{n}.sequences ELSE {lookup} END)"
        source_params += [cap, word]
    source = (f"(SELECT d.transcript_id, d.created_at, {shared} AS sequences FROM d{''.join(joins)} OFFSET 0) AS d")
    return "WITH " + ", ".join(ctes), params, source, source_params


def batch_sql(workspace_id: Any, words: list[str], revision_kind: str | None, resume: Any, through: Any,
              down_to: Any, limit: int, per_revision: int, texts_for: int = 0,
              ranged: int = 0) -> tuple[str, list[Any]]:  # fmt: skip
    """One batch: the `limit` newest revisions containing `words[0]` (as `driver_sql`), each
    with its created_at (`epoch_us`) and the sequences its rows for `words[:SQL_WORDS]` share
    (its segments that hold each of them), intersected in the database so that no long list
    leaves it: the first `per_revision` of them when that is every word, else all (the rest are
    checked after); an empty array or NULL when they share none.

    When that is every word, each row also has HIT_COLUMNS for the first `texts_for` matching
    revisions of the batch (those a window still takes; NULLs for the others): a window of
    such a query needs no other statement.

    The `ranged` words after the first are read as ranges beside the driver's
    (`ranged_source`): for words about as frequent as the driver, a range read in index order
    costs a fraction of a lookup per revision. Each further word is intersected one after the
    other in C (`recordings_sequences_and`, migration 0006), each in a subquery of its own that
    reads the word's row by primary key only while the intersection so far is not empty (a
    one-time filter: OFFSET 0 keeps the subquery from being merged into the join, where the
    test would come after the read)."""
    driver, params = driver_sql(workspace_id, words[0], revision_kind, resume, through, down_to, limit)
    sql_words = words[1:SQL_WORDS]  # read when called: tests lower it
    ranged_words, others = sql_words[:ranged], sql_words[ranged:]
    if ranged_words:
        with_sql, with_params, source, source_params = ranged_source(
            workspace_id, driver, params, ranged_words, revision_kind, limit)  # fmt: skip
    else:
        with_sql, with_params, source, source_params = "", [], f"({driver}) AS d", params
    cut = len(words) <= SQL_WORDS  # every word is in this batch's SQL
    shared, joins = "d.sequences", []
    for n in range(1, len(others) + 1):
        gate = f"cardinality({shared}) > 0 AND " if n > 1 or ranged_words else ""
        joins.append(f" LEFT JOIN LATERAL (SELECT recordings_sequences_and({shared}, o.sequences) AS s"
                     f" FROM recordings_revisionword AS o WHERE {gate}o.transcript_id = d.transcript_id"
                     f" AND o.word = %s OFFSET 0) AS a{n} ON true")  # fmt: skip
        shared = f"a{n}.s"
    if not cut:
        sql = (f"{with_sql} SELECT d.transcript_id, {epoch_us('d.created_at')}, {shared} FROM {source}{''.join(joins)}"
               f" {newest_first('d.')}")  # fmt: skip
        return sql, [*with_params, *source_params, *others]
    # Numbered in order: how many of the batch's revisions up to each one match (the window
    # reads the texts of the first `texts_for` of them).
    sql = f"""{with_sql}
        SELECT b.transcript_id, {epoch_us("b.created_at")}, b.shared, {HIT_COLUMNS}
        FROM (
            SELECT *, count(*) FILTER (WHERE cardinality(shared) > 0) OVER ({newest_first()}) AS matched
            FROM (SELECT d.transcript_id, d.created_at, {shared}[1:%s] AS shared
                  FROM {source}{''.join(joins)}) AS i
        ) AS b
        {hit_joins("b.transcript_id", "b.shared", "b.matched <= %s AND cardinality(b.shared) > 0")}
        {newest_first("b.")}
    """
    # Parameters in the order of their placeholders: the WITH clause's, the cut, the driver's
    # (or the ranged words'), the other words, the texts' bound (in both joins).
    return sql, [*with_params, per_revision, *source_params, *others, texts_for, texts_for]
