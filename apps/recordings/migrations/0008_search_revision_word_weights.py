"""PostgreSQL: each revision word's segments carry what scoring reads of them, and each row its
session's created_at (issue 24 point 5).

A search ranks a window's candidate segments by `scoring.segment_score`, which reads two things
of a segment: how many words it has and how often each query word occurs among them, both as
`terms.folded_words` splits it. Until now every candidate's text was read and split for that:
400 texts per window, most of a window's cost. Here `recordings_revisionword` gains `weights`,
parallel to `sequences`: for the segment `sequences[i]`, `weights[i]` is its word count times
1024 plus the occurrences of the row's word among them, or -1 when they are not known here (a
text that is not ASCII, a word count of 2**21 or more, 1024 occurrences or more). The engine
scores from them and reads the texts of the page's hits only, and a revision with an unknown
weight is scored from its texts as before (apps/recordings/search/postgresql.py).

`recordings_search_words(text)` splits a text as `folded_words` does, for ASCII text only: its
words are the runs of ASCII letters and digits, lowercased (tests/recordings/
test_search_weights.py compares the two on random text); NULL for any other text. Beyond
ASCII, casefolding and accents make the two differ too easily to keep in step in SQL.

`session_created_at` is the revision's session's created_at, the ranking's tie-break, copied
like `created_at` (the transcript's): so a window is ranked from the index by revision alone,
and only its page's hits read their transcripts and sessions. Both timestamps are set once,
when the row they come from is created.

The triggers of migration 0005 are replaced by ones that keep both arrays, and every row is
rebuilt from the segments (as 0005 built them), so no row lacks its weights.

SQLite: nothing (its engine reads the texts of its FTS5 candidates).
"""

import django.contrib.postgres.fields
from django.db import migrations, models

TABLE = "recordings_revisionword"
LENGTH_SHIFT = 1024  # weight = words * LENGTH_SHIFT + occurrences (occurrences < LENGTH_SHIFT)
MAX_WORDS = 2**21  # words * LENGTH_SHIFT stays an integer

SEARCH_WORDS = """
    CREATE FUNCTION recordings_search_words(body text) RETURNS text[]
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT CASE WHEN octet_length(body) = char_length(body)
        THEN array_remove(regexp_split_to_array(lower(body COLLATE "C"), '[^a-z0-9]+'), '') END $$
"""

# The weighted words of a set of segment rows `rows`: (transcript_id, sequence, workspace_id,
# word, weight) per lexeme of each row's search_vector, prefix stripped. Each text is split
# once (MATERIALIZED) and its words counted by one grouping, joined to its lexemes by hash.
_WEIGHTED = f"""
    WITH seg AS MATERIALIZED (
        SELECT r.transcript_id, r.sequence, r.workspace_id, r.search_vector, recordings_search_words(r.text) AS words
        FROM {{rows}} AS r
    ), counted AS (
        SELECT seg.transcript_id, seg.sequence, x.word, count(*) AS n
        FROM seg CROSS JOIN LATERAL unnest(seg.words) AS x(word) GROUP BY 1, 2, 3
    ), lexemes AS (
        SELECT seg.transcript_id, seg.sequence, seg.workspace_id, cardinality(seg.words) AS length,
               substr(l.lexeme, length(seg.workspace_id) + 2) AS word
        FROM seg CROSS JOIN LATERAL unnest(tsvector_to_array(seg.search_vector)) AS l(lexeme)
    ), weighted AS (
        SELECT lx.transcript_id, lx.sequence, lx.workspace_id, lx.word,
               CASE WHEN lx.length IS NULL OR lx.length >= {MAX_WORDS} OR coalesce(c.n, 0) >= {LENGTH_SHIFT} THEN -1
                    ELSE lx.length * {LENGTH_SHIFT} + coalesce(c.n, 0)::integer END AS weight
        FROM lexemes AS lx
        LEFT JOIN counted AS c ON c.transcript_id = lx.transcript_id AND c.sequence = lx.sequence AND c.word = lx.word
    )
"""
# Their rows of the index: one per (revision, word), sequences sorted, weights beside them.
_ROWS = """
    SELECT x.transcript_id, x.word, x.workspace_id, t.created_at, t.revision_kind, s.created_at,
           array_agg(x.sequence ORDER BY x.sequence), array_agg(x.weight ORDER BY x.sequence)
    FROM weighted AS x JOIN recordings_transcript AS t ON t.id = x.transcript_id
    JOIN recordings_session AS s ON s.id = t.session_id
    GROUP BY x.transcript_id, x.word, x.workspace_id, t.created_at, t.revision_kind, s.created_at
"""
_COLUMNS = "(transcript_id, word, workspace_id, created_at, revision_kind, session_created_at, sequences, weights)"
# A row's sequences and weights merged with new ones (EXCLUDED), one row per sequence (a sequence
# in both keeps the new weight), for ARRAY(SELECT m.s | m.wt FROM … ORDER BY m.s).
_MERGED = """
    (SELECT DISTINCT ON (u.s) u.s, u.wt FROM (
        SELECT o.s, o.wt, 0 AS newer FROM unnest(w.sequences, w.weights) AS o(s, wt)
        UNION ALL SELECT e.s, e.wt, 1 FROM unnest(EXCLUDED.sequences, EXCLUDED.weights) AS e(s, wt)
     ) AS u ORDER BY u.s, u.newer DESC) AS m
"""
_MERGED_SEQUENCES = f"ARRAY(SELECT m.s FROM {_MERGED} ORDER BY m.s)"
_MERGED_WEIGHTS = f"ARRAY(SELECT m.wt FROM {_MERGED} ORDER BY m.s)"
# Appends come after the revision's last segment: their concatenation stays sorted.
_SORTED = "w.sequences[cardinality(w.sequences)] < EXCLUDED.sequences[1]"
# The removed rows' sequences (transition table `removed`): rows left with none are deleted,
# the others keep the rest, with their weights. Two statements: one cannot update and delete
# one row.
_GONE = """
    (SELECT r.transcript_id, substr(l.lexeme, length(r.workspace_id) + 2) AS word, array_agg(r.sequence) AS sequences
     FROM removed AS r CROSS JOIN LATERAL unnest(tsvector_to_array(r.search_vector)) AS l(lexeme)
     GROUP BY 1, 2) AS gone
"""
_REMOVE = f"""
        DELETE FROM {TABLE} AS w USING {_GONE}
        WHERE w.transcript_id = gone.transcript_id AND w.word = gone.word AND w.sequences <@ gone.sequences;
        UPDATE {TABLE} AS w
        SET (sequences, weights) = (SELECT array_agg(k.s ORDER BY k.s), array_agg(k.wt ORDER BY k.s)
                                    FROM unnest(w.sequences, w.weights) AS k(s, wt) WHERE k.s <> ALL (gone.sequences))
        FROM {_GONE} WHERE w.transcript_id = gone.transcript_id AND w.word = gone.word;
"""

POSTGRESQL_INSTALL = [
    SEARCH_WORDS,
    f"ALTER TABLE {TABLE} ADD COLUMN weights integer[] NOT NULL DEFAULT '{{}}'",
    f"ALTER TABLE {TABLE} ALTER COLUMN weights DROP DEFAULT",
    f"ALTER TABLE {TABLE} ADD COLUMN session_created_at timestamp with time zone NOT NULL DEFAULT 'epoch'",
    f"ALTER TABLE {TABLE} ALTER COLUMN session_created_at DROP DEFAULT",
    f"""
    CREATE OR REPLACE FUNCTION recordings_revisionword_add() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        {_WEIGHTED.format(rows="added")}
        INSERT INTO {TABLE} AS w {_COLUMNS} {_ROWS}
        ON CONFLICT (transcript_id, word) DO UPDATE SET
            sequences = CASE WHEN {_SORTED} THEN w.sequences || EXCLUDED.sequences ELSE {_MERGED_SEQUENCES} END,
            weights = CASE WHEN {_SORTED} THEN w.weights || EXCLUDED.weights ELSE {_MERGED_WEIGHTS} END;
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE OR REPLACE FUNCTION recordings_revisionword_remove() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        {_REMOVE}
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE OR REPLACE FUNCTION recordings_revisionword_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        -- Only the row's search entries matter: the removed ones first, then the added ones.
        {_REMOVE}
        {_WEIGHTED.format(rows="added")}
        INSERT INTO {TABLE} AS w {_COLUMNS} {_ROWS}
        ON CONFLICT (transcript_id, word) DO UPDATE SET sequences = {_MERGED_SEQUENCES}, weights = {_MERGED_WEIGHTS};
        RETURN NULL;
    END $$
    """,
    # Every row again, weighted (as migration 0005 built them), the index by word built after
    # them, as dense as 0005 built it (rows inserted in their primary key's order would split it).
    "DROP INDEX revision_word_newest",
    f"TRUNCATE {TABLE}",
    f"{_WEIGHTED.format(rows='recordings_segment')} INSERT INTO {TABLE} {_COLUMNS} {_ROWS}",
    f"CREATE INDEX revision_word_newest ON {TABLE} (workspace_id, word, created_at DESC, transcript_id DESC)",
]


# The weight of a revision word's segment `$3`: `$2` (weights) at the place of `$3` in `$1`
# (sequences), found by intarray's idx (migration 0006); NULL when it is not there.
WEIGHT_AT = """
    CREATE FUNCTION recordings_weight_at(integer[], integer[], integer) RETURNS integer
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS 'SELECT $2[{schema}.idx($1, $3)]'
"""


def forwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as db:
        db.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'intarray'")
        (schema,) = db.fetchone()
    for statement in [*POSTGRESQL_INSTALL, WEIGHT_AT.format(schema=schema)]:
        schema_editor.execute(statement, params=None)


def backwards(apps, schema_editor) -> None:
    """Migration 0005's triggers again, and no weights."""
    if schema_editor.connection.vendor != "postgresql":
        return
    from importlib import import_module

    before = import_module("apps.recordings.migrations.0005_search_revision_words")
    for statement in before.POSTGRESQL_INSTALL:
        if "CREATE FUNCTION" in statement:
            schema_editor.execute(statement.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION"), params=None)
    schema_editor.execute(f"ALTER TABLE {TABLE} DROP COLUMN IF EXISTS weights, DROP COLUMN IF EXISTS session_created_at",
                          params=None)  # fmt: skip
    schema_editor.execute("DROP FUNCTION IF EXISTS recordings_search_words(text)", params=None)
    schema_editor.execute("DROP FUNCTION IF EXISTS recordings_weight_at(integer[], integer[], integer)", params=None)


class Migration(migrations.Migration):
    dependencies = [("recordings", "0007_segment_commit_order")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="revisionword",
                    name="session_created_at",
                    field=models.DateTimeField(default=None),
                    preserve_default=False,
                ),
                migrations.AddField(
                    model_name="revisionword",
                    name="weights",
                    field=django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(), default=list,
                                                                    size=None),  # fmt: skip
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
        ),
    ]
