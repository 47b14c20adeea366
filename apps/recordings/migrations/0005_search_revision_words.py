"""PostgreSQL: the search index by revision, `recordings_revisionword` (issue 24 point 5).

GIN answers "which segments contain these words" by decoding and intersecting whole posting
lists, so the newest matching revisions of a pair of common words cost every match of both.
This table answers "the newest revisions containing this word" as one btree range, newest first:
one row per (revision, word) with the sequences of the revision's segments that contain the
word, sorted. A search reads its rarest word's range in order and checks each revision's other
words by primary key, so it stops after the window's revisions instead of reading whole lists
(apps/recordings/search/postgresql.py).

Statement-level triggers on recordings_segment keep it, from the segments' own search_vector
(the lexemes keyed by workspace, migration 0003, prefix stripped): inserts (bulk_create, the
numbered appends, COPY) add their sequences, aggregated per statement; deletes remove them and
drop rows left empty; updates do both. The final transcript's rewrite is a delete and inserts,
so it needs nothing else. Existing segments are indexed here, once.

SQLite: nothing (FTS5's rowids already group a revision's entries); the model exists only in
the migration state there, and `flush` skips tables that do not exist.
"""

import django.contrib.postgres.fields
from django.db import migrations, models

TABLE = "recordings_revisionword"

# The workspace's lexemes of a set of segment rows `rows`, prefix stripped: (row columns, word).
_WORDS = """
    FROM {rows} AS r CROSS JOIN LATERAL unnest(tsvector_to_array(r.search_vector)) AS l(lexeme)
"""
_WORD = "substr(l.lexeme, length(r.workspace_id) + 2)"
# The removed rows' sequences (transition table `removed`): rows left with none are deleted,
# the others keep the rest. Two statements: one statement cannot update and delete one row.
_GONE = f"""
    (SELECT r.transcript_id, {_WORD} AS word, array_agg(r.sequence) AS sequences
     {_WORDS.format(rows="removed")} GROUP BY r.transcript_id, {_WORD}) AS gone
"""
_REMOVE = f"""
        DELETE FROM {TABLE} AS w USING {_GONE}
        WHERE w.transcript_id = gone.transcript_id AND w.word = gone.word AND w.sequences <@ gone.sequences;
        UPDATE {TABLE} AS w
        SET sequences = ARRAY(SELECT s FROM unnest(w.sequences) AS s WHERE s <> ALL (gone.sequences) ORDER BY s)
        FROM {_GONE} WHERE w.transcript_id = gone.transcript_id AND w.word = gone.word;
"""

POSTGRESQL_INSTALL = [
    f"""
    CREATE TABLE {TABLE} (
        transcript_id varchar(40) NOT NULL,
        word text NOT NULL,
        workspace_id varchar(40) NOT NULL,
        created_at timestamp with time zone NOT NULL,
        revision_kind varchar(10) NOT NULL,
        sequences integer[] NOT NULL,
        PRIMARY KEY (transcript_id, word)
    )
    """,
    f"""
    CREATE FUNCTION recordings_revisionword_add() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO {TABLE} AS w (transcript_id, word, workspace_id, created_at, revision_kind, sequences)
        SELECT r.transcript_id, {_WORD}, r.workspace_id, t.created_at, t.revision_kind,
               array_agg(DISTINCT r.sequence ORDER BY r.sequence)
        {_WORDS.format(rows="added")}
        JOIN recordings_transcript AS t ON t.id = r.transcript_id
        GROUP BY r.transcript_id, {_WORD}, r.workspace_id, t.created_at, t.revision_kind
        ON CONFLICT (transcript_id, word) DO UPDATE SET sequences = CASE
            -- appends come after the revision's last segment: a concatenation stays sorted
            WHEN w.sequences[cardinality(w.sequences)] < EXCLUDED.sequences[1] THEN w.sequences || EXCLUDED.sequences
            ELSE ARRAY(SELECT DISTINCT s FROM unnest(w.sequences || EXCLUDED.sequences) AS s ORDER BY s)
        END;
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE FUNCTION recordings_revisionword_remove() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        {_REMOVE}
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE FUNCTION recordings_revisionword_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        -- Only the row's search entries matter: the removed ones first, then the added ones.
        {_REMOVE}
        INSERT INTO {TABLE} AS w (transcript_id, word, workspace_id, created_at, revision_kind, sequences)
        SELECT r.transcript_id, {_WORD}, r.workspace_id, t.created_at, t.revision_kind,
               array_agg(DISTINCT r.sequence ORDER BY r.sequence)
        {_WORDS.format(rows="added")}
        JOIN recordings_transcript AS t ON t.id = r.transcript_id
        GROUP BY r.transcript_id, {_WORD}, r.workspace_id, t.created_at, t.revision_kind
        ON CONFLICT (transcript_id, word) DO UPDATE
        SET sequences = ARRAY(SELECT DISTINCT s FROM unnest(w.sequences || EXCLUDED.sequences) AS s ORDER BY s);
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE TRIGGER recordings_revisionword_ai AFTER INSERT ON recordings_segment
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION recordings_revisionword_add()
    """,
    f"""
    CREATE TRIGGER recordings_revisionword_ad AFTER DELETE ON recordings_segment
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION recordings_revisionword_remove()
    """,
    f"""
    CREATE TRIGGER recordings_revisionword_au AFTER UPDATE ON recordings_segment
    REFERENCING OLD TABLE AS removed NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION recordings_revisionword_change()
    """,
    # The segments there are, indexed once (the same aggregation as the insert trigger's).
    f"""
    INSERT INTO {TABLE} (transcript_id, word, workspace_id, created_at, revision_kind, sequences)
    SELECT r.transcript_id, {_WORD}, r.workspace_id, t.created_at, t.revision_kind,
           array_agg(r.sequence ORDER BY r.sequence)
    {_WORDS.format(rows="recordings_segment")}
    JOIN recordings_transcript AS t ON t.id = r.transcript_id
    GROUP BY r.transcript_id, {_WORD}, r.workspace_id, t.created_at, t.revision_kind
    """,
    f"CREATE INDEX revision_word_newest ON {TABLE} (workspace_id, word, created_at DESC, transcript_id DESC)",
]

POSTGRESQL_UNINSTALL = [
    "DROP TRIGGER IF EXISTS recordings_revisionword_au ON recordings_segment",
    "DROP TRIGGER IF EXISTS recordings_revisionword_ad ON recordings_segment",
    "DROP TRIGGER IF EXISTS recordings_revisionword_ai ON recordings_segment",
    "DROP FUNCTION IF EXISTS recordings_revisionword_change()",
    "DROP FUNCTION IF EXISTS recordings_revisionword_remove()",
    "DROP FUNCTION IF EXISTS recordings_revisionword_add()",
    f"DROP TABLE IF EXISTS {TABLE}",
]


def forwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in POSTGRESQL_INSTALL:
            schema_editor.execute(statement, params=None)


def backwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in POSTGRESQL_UNINSTALL:
            schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("recordings", "0004_search_index_usermerge")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="RevisionWord",
                    fields=[
                        ("pk", models.CompositePrimaryKey("transcript_id", "word", blank=True, editable=False,
                                                          primary_key=True, serialize=False)),  # fmt: skip
                        ("transcript_id", models.CharField(max_length=40)),
                        ("word", models.TextField()),
                        ("workspace_id", models.CharField(max_length=40)),
                        ("created_at", models.DateTimeField()),
                        ("revision_kind", models.CharField(choices=[("committed", "Committed"), ("final", "Final")],
                                                           max_length=10)),  # fmt: skip
                        ("sequences", django.contrib.postgres.fields.ArrayField(base_field=models.IntegerField(),
                                                                                size=None)),  # fmt: skip
                    ],
                    options={
                        "managed": True,
                        "indexes": [models.Index(fields=["workspace_id", "word", "-created_at", "-transcript_id"],
                                                 name="revision_word_newest")],  # fmt: skip
                    },
                ),
            ],
            database_operations=[migrations.RunPython(forwards, backwards, elidable=False)],
        ),
    ]
