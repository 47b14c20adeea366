"""Full-text index over segment text, kept in step by the database itself.

SQLite: a contentless FTS5 table `recordings_segment_fts` (the text lives in recordings_segment
only). Its rowid is `transcript key << 24 | segment sequence`, where the transcript key is the
INTEGER PRIMARY KEY of a small table `recordings_segment_search` (one row per transcript that
has segments: transcript id, workspace id). So:
- a match names its transcript without a lookup per matching segment, and search groups
  matches by an integer computed from the rowid (the cost that dominates at 1M segments);
- nothing is keyed by recordings_segment's implicit rowid, which is not stable (its primary
  key is a CharField; VACUUM may renumber it and a Django table remake does);
- keys are AUTOINCREMENT, never reused, so a stale entry can never name a new transcript.
Triggers on recordings_segment write both tables for every INSERT, UPDATE and DELETE, so
bulk_create, cascade deletes and `flush` (DELETE FROM, which fires row triggers) keep the index
exact. Sequences must lie in 0..2^24-1 (the triggers refuse others).

PostgreSQL: a generated, stored tsvector column with a GIN index. The column is unknown to
the model, so Django never writes it and flush (TRUNCATE) needs nothing special.

A later migration that makes Django remake recordings_segment on SQLite (AlterField and the
like copy the table into a new one and drop the old) drops these triggers with it: it must
run `install_sqlite_triggers` again after the remake (the index stays valid: it is keyed by
transcript id and sequence).
"""

from django.db import migrations

SEQUENCE_BITS = 24

SQLITE_INSTALL = [
    """
    CREATE TABLE recordings_segment_search (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        transcript_id varchar(40) NOT NULL UNIQUE,
        workspace_id varchar(40) NOT NULL
    )
    """,
    """
    CREATE VIRTUAL TABLE recordings_segment_fts USING fts5(
        text, content='', tokenize='unicode61 remove_diacritics 2'
    )
    """,
    """
    INSERT INTO recordings_segment_search (transcript_id, workspace_id)
    SELECT transcript_id, MIN(workspace_id) FROM recordings_segment GROUP BY transcript_id
    """,
    f"""
    INSERT INTO recordings_segment_fts (rowid, text)
    SELECT (k.id << {SEQUENCE_BITS}) | s.sequence, s.text
    FROM recordings_segment AS s JOIN recordings_segment_search AS k ON k.transcript_id = s.transcript_id
    """,
]

# Statement fragments the triggers share. A contentless FTS5 row is removed with the 'delete'
# command and exactly the text it was indexed with; OLD.text is that text because these
# triggers are its only writers.
_INDEX_NEW = f"""
        SELECT RAISE(ABORT, 'segment sequence outside the search index range')
        WHERE NEW.sequence NOT BETWEEN 0 AND {(1 << SEQUENCE_BITS) - 1};
        INSERT OR IGNORE INTO recordings_segment_search (transcript_id, workspace_id)
        VALUES (NEW.transcript_id, NEW.workspace_id);
        INSERT INTO recordings_segment_fts (rowid, text)
        SELECT (id << {SEQUENCE_BITS}) | NEW.sequence, NEW.text
        FROM recordings_segment_search WHERE transcript_id = NEW.transcript_id;
"""
_UNINDEX_OLD = f"""
        INSERT INTO recordings_segment_fts (recordings_segment_fts, rowid, text)
        SELECT 'delete', (id << {SEQUENCE_BITS}) | OLD.sequence, OLD.text
        FROM recordings_segment_search WHERE transcript_id = OLD.transcript_id;
"""
_FORGET_EMPTY_TRANSCRIPT = """
        DELETE FROM recordings_segment_search WHERE transcript_id = OLD.transcript_id
        AND NOT EXISTS (SELECT 1 FROM recordings_segment WHERE transcript_id = OLD.transcript_id);
"""

SQLITE_TRIGGERS = [
    f"CREATE TRIGGER recordings_segment_search_ai AFTER INSERT ON recordings_segment BEGIN {_INDEX_NEW} END",
    f"""
    CREATE TRIGGER recordings_segment_search_ad AFTER DELETE ON recordings_segment BEGIN
        {_UNINDEX_OLD} {_FORGET_EMPTY_TRANSCRIPT}
    END
    """,
    f"""
    CREATE TRIGGER recordings_segment_search_au
    AFTER UPDATE OF text, sequence, transcript_id, workspace_id ON recordings_segment BEGIN
        {_UNINDEX_OLD} {_INDEX_NEW} {_FORGET_EMPTY_TRANSCRIPT}
    END
    """,
]

SQLITE_UNINSTALL = [
    "DROP TRIGGER IF EXISTS recordings_segment_search_au",
    "DROP TRIGGER IF EXISTS recordings_segment_search_ad",
    "DROP TRIGGER IF EXISTS recordings_segment_search_ai",
    "DROP TABLE IF EXISTS recordings_segment_fts",
    "DROP TABLE IF EXISTS recordings_segment_search",
]

POSTGRESQL_INSTALL = [
    # `connect_search`: 'simple' (no stemming, no stop words, so every word a user types can
    # be found) behind `unaccent`, so "cafe" finds "café" as it does with FTS5's
    # remove_diacritics on SQLite. unaccent is a trusted extension: the database owner may
    # create it without superuser rights.
    "CREATE EXTENSION IF NOT EXISTS unaccent",
    "CREATE TEXT SEARCH CONFIGURATION connect_search (COPY = simple)",
    """
    ALTER TEXT SEARCH CONFIGURATION connect_search
    ALTER MAPPING FOR asciihword, asciiword, hword, hword_asciipart, hword_part, word WITH unaccent, simple
    """,
    """
    ALTER TABLE recordings_segment ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('connect_search'::regconfig, text)) STORED
    """,
    "CREATE INDEX recordings_segment_search_vector ON recordings_segment USING gin (search_vector)",
]

POSTGRESQL_UNINSTALL = [
    "DROP INDEX IF EXISTS recordings_segment_search_vector",
    "ALTER TABLE recordings_segment DROP COLUMN IF EXISTS search_vector",
    "DROP TEXT SEARCH CONFIGURATION IF EXISTS connect_search",
]


def _run(schema_editor, statements: list[str]) -> None:
    for statement in statements:
        schema_editor.execute(statement, params=None)


def install_sqlite_triggers(schema_editor) -> None:
    """(Re)create the triggers; safe to call after a table remake."""
    _run(schema_editor, ["DROP TRIGGER IF EXISTS recordings_segment_search_" + s for s in ("ai", "ad", "au")])
    _run(schema_editor, SQLITE_TRIGGERS)


def forwards(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        _run(schema_editor, SQLITE_INSTALL)
        install_sqlite_triggers(schema_editor)
    elif vendor == "postgresql":
        _run(schema_editor, POSTGRESQL_INSTALL)
    else:
        raise NotImplementedError(f"transcript search has no full-text index for {vendor}")


def backwards(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        _run(schema_editor, SQLITE_UNINSTALL)
    elif vendor == "postgresql":
        _run(schema_editor, POSTGRESQL_UNINSTALL)


class Migration(migrations.Migration):
    dependencies = [("recordings", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
