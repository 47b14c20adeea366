"""Full-text index over segment text, kept in step by the database itself.

SQLite: an FTS5 table `recordings_segment_fts` (contentless: the text lives in
recordings_segment only) whose rowid is the INTEGER PRIMARY KEY of a small key table
`recordings_segment_search` (segment id → transcript, workspace). The key table exists because
recordings_segment has a CharField primary key: its implicit rowid is not guaranteed stable
(VACUUM may renumber it, a Django table remake does), so nothing may be keyed by it. Triggers
on recordings_segment write both tables for every INSERT, UPDATE and DELETE, so bulk_create,
cascade deletes and `flush` (DELETE FROM, which fires row triggers) keep the index exact.

PostgreSQL: a generated, stored tsvector column with a GIN index. The column is unknown to
the model, so Django never writes it and flush (TRUNCATE) needs nothing special.

A later migration that makes Django remake recordings_segment on SQLite (AlterField and the
like copy the table into a new one and drop the old) drops these triggers with it: it must
run `install_sqlite` again after the remake (the key table stays valid: it is keyed by
segment id).
"""

from django.db import migrations

SQLITE_INSTALL = [
    """
    CREATE TABLE recordings_segment_search (
        id INTEGER PRIMARY KEY,
        segment_id varchar(40) NOT NULL UNIQUE,
        transcript_id varchar(40) NOT NULL,
        workspace_id varchar(40) NOT NULL
    )
    """,
    # Contentless: the index stores no copy of the text; snippets read recordings_segment.
    """
    CREATE VIRTUAL TABLE recordings_segment_fts USING fts5(
        text, content='', tokenize='unicode61 remove_diacritics 2'
    )
    """,
    """
    INSERT INTO recordings_segment_search (segment_id, transcript_id, workspace_id)
    SELECT id, transcript_id, workspace_id FROM recordings_segment ORDER BY transcript_id, sequence
    """,
    """
    INSERT INTO recordings_segment_fts (rowid, text)
    SELECT k.id, s.text FROM recordings_segment_search AS k JOIN recordings_segment AS s ON s.id = k.segment_id
    """,
]

# A contentless FTS5 row is removed with the 'delete' command and exactly the text it was
# indexed with; OLD.text is that text because these triggers are its only writers.
SQLITE_TRIGGERS = [
    """
    CREATE TRIGGER recordings_segment_search_ai AFTER INSERT ON recordings_segment BEGIN
        INSERT INTO recordings_segment_search (segment_id, transcript_id, workspace_id)
        VALUES (NEW.id, NEW.transcript_id, NEW.workspace_id);
        INSERT INTO recordings_segment_fts (rowid, text) VALUES (last_insert_rowid(), NEW.text);
    END
    """,
    """
    CREATE TRIGGER recordings_segment_search_ad AFTER DELETE ON recordings_segment BEGIN
        INSERT INTO recordings_segment_fts (recordings_segment_fts, rowid, text)
        SELECT 'delete', id, OLD.text FROM recordings_segment_search WHERE segment_id = OLD.id;
        DELETE FROM recordings_segment_search WHERE segment_id = OLD.id;
    END
    """,
    """
    CREATE TRIGGER recordings_segment_search_au
    AFTER UPDATE OF id, text, transcript_id, workspace_id ON recordings_segment BEGIN
        INSERT INTO recordings_segment_fts (recordings_segment_fts, rowid, text)
        SELECT 'delete', id, OLD.text FROM recordings_segment_search WHERE segment_id = OLD.id;
        UPDATE recordings_segment_search
        SET segment_id = NEW.id, transcript_id = NEW.transcript_id, workspace_id = NEW.workspace_id
        WHERE segment_id = OLD.id;
        INSERT INTO recordings_segment_fts (rowid, text)
        SELECT id, NEW.text FROM recordings_segment_search WHERE segment_id = NEW.id;
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
    # 'simple': no stemming and no stop words, so every word a user types can be found.
    """
    ALTER TABLE recordings_segment ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, text)) STORED
    """,
    "CREATE INDEX recordings_segment_search_vector ON recordings_segment USING gin (search_vector)",
]

POSTGRESQL_UNINSTALL = [
    "DROP INDEX IF EXISTS recordings_segment_search_vector",
    "ALTER TABLE recordings_segment DROP COLUMN IF EXISTS search_vector",
]


def _run(schema_editor, statements: list[str]) -> None:
    for statement in statements:
        schema_editor.execute(statement, params=None)


def install_sqlite(schema_editor) -> None:
    """(Re)create the triggers; safe to call after a table remake."""
    _run(schema_editor, ["DROP TRIGGER IF EXISTS recordings_segment_search_" + s for s in ("ai", "ad", "au")])
    _run(schema_editor, SQLITE_TRIGGERS)


def forwards(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        _run(schema_editor, SQLITE_INSTALL)
        install_sqlite(schema_editor)
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
