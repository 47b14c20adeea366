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
def revision_join(revision: str, gate: str = "true") -> str:
    """What a hit shows of a matched revision (the column `revision`) and its session (`x`:
    windows.HitTranscript, HitSession), selected by REVISION_COLUMNS: read by key, per revision
    (OFFSET 0 keeps the transcript's and session's a lookup, not a hash join over every
    transcript and session of the database), and only where `gate` holds (a one-time filter
    per revision): NULLs elsewhere."""
    return f"""
    LEFT JOIN LATERAL (
        SELECT t.revision_kind, s.id, s.label, s.status, {epoch_us("s.started_at")} AS started,
               {epoch_us("s.ended_at")} AS ended, {epoch_us("s.created_at")} AS created
        FROM recordings_transcript AS t JOIN recordings_session AS s ON s.id = t.session_id
        WHERE {gate} AND t.id = {revision} OFFSET 0
    ) AS x ON true"""


def texts_join(revision: str, sequences: str, gate: str = "true") -> str:
    """The texts and starts of a matched revision's candidate segments (`sequences`, an
    integer[]) (`y`), where `gate` holds, as `revision_join`. The three aggregates read the
    same rows in the same order, so their arrays line up."""
    return f"""
    LEFT JOIN LATERAL (
        SELECT array_agg(seg.sequence) AS sequences, array_agg(seg.text) AS texts,
               array_agg(seg.timestamp_start) AS starts
        FROM recordings_segment AS seg
        WHERE {gate} AND seg.transcript_id = {revision} AND seg.sequence = ANY({sequences})
    ) AS y ON true"""


def hit_joins(revision: str, sequences: str, gate: str = "true") -> str:
    """What a page needs of a matched revision: `revision_join` and `texts_join`, selected by
    HIT_COLUMNS."""
    return revision_join(revision, gate) + texts_join(revision, sequences, gate)


REVISION_COLUMNS = "x.revision_kind, x.id, x.label, x.status, x.started, x.ended, x.created"
HIT_COLUMNS = f"{REVISION_COLUMNS}, y.sequences, y.texts, y.starts"

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


def word_columns(weighted: bool) -> str:
    """A revision word's columns a batch reads: its weights too when it scores from them."""
    return "transcript_id, created_at, sequences" + (", weights" if weighted else "")


def driver_sql(workspace_id: Any, word: str, revision_kind: str | None, resume: Any, through: Any,
               down_to: Any, limit: int, weighted: bool = False) -> tuple[str, list[Any]]:  # fmt: skip
    """The newest revisions containing `word` (older than `resume`, within `through` … `down_to`,
    each a (created_at, id) pair or None), with the word's sequences (and, `weighted`, its
    weights and the session's created_at): one range of the index."""
    where, params = ["workspace_id = %s", "word = %s"], [workspace_id, word]
    if revision_kind:
        where.append("revision_kind = %s")
        params.append(revision_kind)
    for bound, op in ((resume, "<"), (through, "<="), (down_to, ">=")):
        if bound is not None:
            where.append(f"(created_at, transcript_id) {op} (%s, %s)")
            params += list(bound)
    ranked_by = ", session_created_at" if weighted else ""  # the ranking's tie-break, for weights
    sql = (
        f"SELECT {word_columns(weighted)}{ranked_by} FROM recordings_revisionword"
        f" WHERE {' AND '.join(where)} {newest_first()} LIMIT %s"
    )
    return sql, params + [limit]


SQL_WORDS = 8  # words a batch intersects in SQL (the rarest); the others, if any, are checked after
RANGE_ROWS = 4  # a word's range read beside the driver's holds at most this many rows per driver row


def ranged_source(workspace_id: Any, driver: str, driver_params: list[Any], words: list[str],
                  revision_kind: str | None, limit: int,
                  weighted: bool = False) -> tuple[str, list[Any], str, list[Any]]:  # fmt: skip
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
    none; with `weighted`, also the driver's session_created_at and each word's own sequences
    and weights, `s0`, `w0` for the driver's, `s1`, `w1` for `words[0]`, …) and its
    parameters; `batch_sql` continues from `d` as from the driver."""
    cap = max(1, int(RANGE_ROWS * limit))  # read when called: tests lower it
    ctes, params = [f"d AS MATERIALIZED ({driver})"], list(driver_params)
    columns = ["d.sequences AS s0"] + (["d.weights AS w0", "d.session_created_at"] if weighted else [])
    source_params, joins = [], []
    for n, word in enumerate(words, start=1):
        kind = " AND revision_kind = %s" if revision_kind else ""
        ctes.append(
            f"r{n} AS MATERIALIZED (SELECT {word_columns(weighted)} FROM recordings_revisionword"
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
        for array, prefix in [("sequences", "s"), ("weights", "w")][: 2 if weighted else 1]:
            lookup = (f"(SELECT o.{array} FROM recordings_revisionword AS o"
                      f" WHERE o.transcript_id = d.transcript_id AND o.word = %s)")  # fmt: skip
            columns.append(f"CASE WHEN {covered} THEN j{n}.{array} ELSE {lookup} END AS {prefix}{n}")
            source_params += [cap, word]
    shared = "e.s0"
    for n in range(1, len(words) + 1):
        shared = f"recordings_sequences_and({shared}, e.s{n})"
    kept = ("".join(f", e.s{n}, e.w{n}" for n in range(len(words) + 1)) + ", e.session_created_at") if weighted else ""
    source = (f"(SELECT e.transcript_id, e.created_at, {shared} AS sequences{kept} FROM"
              f" (SELECT d.transcript_id, d.created_at, {', '.join(columns)} FROM d{''.join(joins)} OFFSET 0) AS e"
              " OFFSET 0) AS d")  # fmt: skip
    return "WITH " + ", ".join(ctes), params, source, source_params


def batch_sql(workspace_id: Any, words: list[str], revision_kind: str | None, resume: Any, through: Any,
              down_to: Any, limit: int, per_revision: int, texts_for: int = 0,
              ranged: int = 0, weighted: bool = False) -> tuple[str, list[Any]]:  # fmt: skip
    """One batch: the `limit` newest revisions containing `words[0]` (as `driver_sql`), each
    with its created_at (`epoch_us`) and the sequences its rows for `words[:SQL_WORDS]` share
    (its segments that hold each of them), intersected in the database so that no long list
    leaves it: the first `per_revision` of them when that is every word, else all (the rest are
    checked after); an empty array or NULL when they share none.

    When that is every word, each row also has HIT_COLUMNS for the first `texts_for` matching
    revisions of the batch (those a window still takes; NULLs for the others): a window of
    such a query needs no other statement. With `weighted`, the session's created_at
    (`epoch_us`) instead, then the weights (migration 0008) of those first `per_revision` shared
    sequences: for each of them in turn, each word's, in the order of `words` (NULL past the
    shared ones), then how many revisions the batch read: the window is ranked from them alone,
    and only its page's hits read their texts, transcripts and sessions (`PAGE_SQL`). Such a
    batch returns its matching revisions and its last one only (where the next batch starts).

    The `ranged` words after the first are read as ranges beside the driver's
    (`ranged_source`): for words about as frequent as the driver, a range read in index order
    costs a fraction of a lookup per revision. Each further word is intersected one after the
    other in C (`recordings_sequences_and`, migration 0006), each in a subquery of its own that
    reads the word's row by primary key only while the intersection so far is not empty (a
    one-time filter: OFFSET 0 keeps the subquery from being merged into the join, where the
    test would come after the read)."""
    cut = len(words) <= SQL_WORDS  # every word is in this batch's SQL
    weighted = weighted and cut
    driver, params = driver_sql(workspace_id, words[0], revision_kind, resume, through, down_to, limit, weighted)
    sql_words = words[1:SQL_WORDS]  # read when called: tests lower it
    ranged_words, others = sql_words[:ranged], sql_words[ranged:]
    if ranged_words:
        with_sql, with_params, source, source_params = ranged_source(
            workspace_id, driver, params, ranged_words, revision_kind, limit, weighted)  # fmt: skip
        arrays = [(f"d.s{n}", f"d.w{n}") for n in range(len(ranged_words) + 1)]
    else:
        with_sql, with_params, source, source_params = "", [], f"({driver}) AS d", params
        arrays = [("d.sequences", "d.weights")]
    shared, joins = "d.sequences", []
    for n in range(1, len(others) + 1):
        gate = f"cardinality({shared}) > 0 AND " if n > 1 or ranged_words else ""
        kept = ", o.sequences AS q, o.weights AS v" if weighted else ""
        joins.append(f" LEFT JOIN LATERAL (SELECT recordings_sequences_and({shared}, o.sequences) AS s{kept}"
                     f" FROM recordings_revisionword AS o WHERE {gate}o.transcript_id = d.transcript_id"
                     f" AND o.word = %s OFFSET 0) AS a{n} ON true")  # fmt: skip
        shared = f"a{n}.s"
        arrays.append((f"a{n}.q", f"a{n}.v"))
    if not cut:
        sql = (f"{with_sql} SELECT d.transcript_id, {epoch_us('d.created_at')}, {shared} FROM {source}{''.join(joins)}"
               f" {newest_first('d.')}")  # fmt: skip
        return sql, [*with_params, *source_params, *others]
    taken = "b.matched <= %s AND cardinality(b.shared) > 0"  # the revisions the window still takes
    # Numbered in order: how many of the batch's revisions up to each one match (the window
    # reads the texts, or the weights, of the first `texts_for` of them).
    if not weighted:
        sql = f"""{with_sql}
            SELECT b.transcript_id, {epoch_us("b.created_at")}, b.shared, {HIT_COLUMNS}
            FROM (
                SELECT *, count(*) FILTER (WHERE cardinality(shared) > 0) OVER ({newest_first()}) AS matched
                FROM (SELECT d.transcript_id, d.created_at, {shared}[1:%s] AS shared
                      FROM {source}{''.join(joins)}) AS i
            ) AS b
            {hit_joins("b.transcript_id", "b.shared", taken)}
            {newest_first("b.")}
        """
        # Parameters in the order of their placeholders: the WITH clause's, the cut, the driver's
        # (or the ranged words'), the other words, the texts' bound (in both joins).
        return sql, [*with_params, per_revision, *source_params, *others, texts_for, texts_for]
    # Each word's weights at the shared sequences, taken from its arrays before the rows are
    # numbered (which may sort them), so that only the weights are carried further (OFFSET 0
    # keeps `c` from being merged into the numbering); OFFSET 0 keeps `i` a subquery of its
    # own, so `shared` is intersected once, not once per use. A long array is stored
    # compressed, and every function that reads it decompresses it again: each array a
    # matched revision's weights are read from is decompressed once (`|| '{}'`, in `x`, which
    # runs only for a revision that matched: a one-time filter).
    kept = "".join(f", {sequences} AS s{k}, {weights} AS w{k}" for k, (sequences, weights) in enumerate(arrays))
    kept += ", d.session_created_at"
    unpacked = ", ".join(f"i.s{k} || '{{}}'::integer[] AS s{k}, i.w{k} || '{{}}'::integer[] AS w{k}"
                         for k in range(len(arrays)))  # fmt: skip
    at = ", ".join(f"recordings_weight_at(x.s{k}, x.w{k}, i.shared[{n}])"
                   for n in range(1, per_revision + 1) for k in range(len(arrays)))  # fmt: skip
    sql = f"""{with_sql}
        SELECT b.transcript_id, {epoch_us("b.created_at")}, b.shared, {epoch_us("b.session_created_at")},
               CASE WHEN {taken} THEN b.weights END, b.read
        FROM (
            SELECT *, count(*) FILTER (WHERE cardinality(shared) > 0) OVER ({newest_first()}) AS matched,
                   row_number() OVER ({newest_first()}) AS nth, count(*) OVER () AS read
            FROM (
                SELECT i.transcript_id, i.created_at, i.shared, i.session_created_at, wt.weights
                FROM (SELECT d.transcript_id, d.created_at, {shared}[1:%s] AS shared{kept}
                      FROM {source}{''.join(joins)} OFFSET 0) AS i
                LEFT JOIN LATERAL (
                    SELECT ARRAY[{at}] AS weights
                    FROM (SELECT {unpacked} WHERE cardinality(i.shared) > 0 OFFSET 0) AS x
                ) AS wt ON true
                OFFSET 0
            ) AS c
        ) AS b
        WHERE cardinality(b.shared) > 0 OR b.nth = b.read
        {newest_first("b.")}
    """
    # The WITH clause's parameters, the taken revisions' bound, the cut, the driver's (or the
    # ranged words'), the other words.
    return sql, [*with_params, texts_for, per_revision, *source_params, *others]


# What a page of hits ranked from weights shows: its segments' texts and starts, and their
# revisions and sessions (REVISION_COLUMNS), for (transcript id, sequence) pairs as two arrays.
PAGE_SQL = f"""
    SELECT seg.transcript_id, seg.sequence, seg.text, seg.timestamp_start, {REVISION_COLUMNS}
    FROM unnest(%s::varchar[], %s::integer[]) AS p(transcript_id, sequence)
    JOIN recordings_segment AS seg ON seg.transcript_id = p.transcript_id AND seg.sequence = p.sequence
    {revision_join("p.transcript_id")}
"""
