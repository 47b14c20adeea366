"""Search index keyed by workspace first, so a search reads only its own workspace's part.

SQLite: the contentless FTS5 table of 0002 is rebuilt with rowids that put the workspace first:

    rowid = revision key << 24 | segment sequence
    revision key = workspace key << 20 | (2^20 - the workspace's revision count when it was indexed)

so one workspace's segments are one contiguous rowid range, and inside it a revision's segments
are a contiguous sub-range, revisions in the reverse order they were first indexed (newest
lowest: FTS5 walks doclists forwards about 3x faster than backwards, measured at 1.5M rows).
FTS5 seeks rowid ranges in its doclists, so a search walks the workspace's range from the
bottom (newest revision first) and skips from revision to revision without reading other
workspaces' entries (apps/recordings/search/). Keys are never reused: workspace keys are
AUTOINCREMENT, revision numbers come from a per-workspace counter. Limits: 2^19 - 1 workspaces, 2^20 - 1
revisions per workspace, sequences 0 … 2^24 - 1 (the triggers refuse others).

`recordings_search_workspace` holds the workspace keys and counters; `recordings_segment_search`
one row per revision that has segments (its key, transcript id, workspace id, revision kind).
Triggers on recordings_segment keep all three in step for every INSERT, UPDATE and DELETE, as
in 0002 (bulk inserts, cascades and `flush` included).

PostgreSQL: the generated search_vector holds lexemes keyed by workspace ('<workspace id>:word',
see POSTGRESQL_FUNCTIONS), so each GIN posting list belongs to one workspace; queries are built
by connect_search_query() with the same parsing and folding. Same column and index names as 0002.
"""

from django.db import migrations

SEQUENCE_BITS = 24
REVISION_BITS = 20
WORKSPACE_KEY_LIMIT = 1 << 19

SQLITE_DROP_0002 = [
    "DROP TRIGGER IF EXISTS recordings_segment_search_au",
    "DROP TRIGGER IF EXISTS recordings_segment_search_ad",
    "DROP TRIGGER IF EXISTS recordings_segment_search_ai",
    "DROP TABLE IF EXISTS recordings_segment_fts",
    "DROP TABLE IF EXISTS recordings_segment_search",
]

SQLITE_INSTALL = [
    """
    CREATE TABLE recordings_search_workspace (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        workspace_id varchar(40) NOT NULL UNIQUE,
        revisions INTEGER NOT NULL DEFAULT 0
    )
    """,
    """
    CREATE TABLE recordings_segment_search (
        id INTEGER PRIMARY KEY,
        transcript_id varchar(40) NOT NULL UNIQUE,
        workspace_id varchar(40) NOT NULL,
        revision_kind varchar(10) NOT NULL
    )
    """,
    """
    CREATE VIRTUAL TABLE recordings_segment_fts USING fts5(
        text, content='', tokenize='unicode61 remove_diacritics 2'
    )
    """,
    # Existing data: revisions numbered per workspace in the order they were created.
    """
    INSERT INTO recordings_search_workspace (workspace_id, revisions)
    SELECT workspace_id, count(DISTINCT transcript_id) FROM recordings_segment GROUP BY workspace_id
    ORDER BY min(created_at), workspace_id
    """,
    f"""
    INSERT INTO recordings_segment_search (id, transcript_id, workspace_id, revision_kind)
    SELECT (w.id << {REVISION_BITS}) | ({1 << REVISION_BITS} - row_number() OVER (
               PARTITION BY t.workspace_id ORDER BY t.created_at, t.id)),
           t.id, t.workspace_id, t.revision_kind
    FROM recordings_transcript AS t JOIN recordings_search_workspace AS w ON w.workspace_id = t.workspace_id
    WHERE EXISTS (SELECT 1 FROM recordings_segment AS s WHERE s.transcript_id = t.id)
    """,
    f"""
    INSERT INTO recordings_segment_fts (rowid, text)
    SELECT (k.id << {SEQUENCE_BITS}) | s.sequence, s.text
    FROM recordings_segment AS s JOIN recordings_segment_search AS k ON k.transcript_id = s.transcript_id
    """,
]

# A contentless FTS5 row is removed with the 'delete' command and exactly the text it was
# indexed with; OLD.text is that text because these triggers are its only writers. Workspace
# keys are inserted only when missing: INSERT OR IGNORE would spend an AUTOINCREMENT value on
# every segment (measured: 585,311 keys spent on 1.9M segments), and keys are limited to 2^19.
_INDEX_NEW = f"""
        SELECT RAISE(ABORT, 'segment sequence outside the search index range')
        WHERE NEW.sequence NOT BETWEEN 0 AND {(1 << SEQUENCE_BITS) - 1};
        INSERT INTO recordings_search_workspace (workspace_id) SELECT NEW.workspace_id
        WHERE NOT EXISTS (SELECT 1 FROM recordings_search_workspace WHERE workspace_id = NEW.workspace_id);
        UPDATE recordings_search_workspace SET revisions = revisions + 1
        WHERE workspace_id = NEW.workspace_id
        AND NOT EXISTS (SELECT 1 FROM recordings_segment_search WHERE transcript_id = NEW.transcript_id);
        SELECT RAISE(ABORT, 'search index: too many workspaces or revisions in one workspace')
        FROM recordings_search_workspace WHERE workspace_id = NEW.workspace_id
        AND (id >= {WORKSPACE_KEY_LIMIT} OR revisions >= {1 << REVISION_BITS});
        INSERT OR IGNORE INTO recordings_segment_search (id, transcript_id, workspace_id, revision_kind)
        SELECT (w.id << {REVISION_BITS}) | ({1 << REVISION_BITS} - w.revisions), NEW.transcript_id, NEW.workspace_id,
               (SELECT revision_kind FROM recordings_transcript WHERE id = NEW.transcript_id)
        FROM recordings_search_workspace AS w WHERE w.workspace_id = NEW.workspace_id;
        INSERT INTO recordings_segment_fts (rowid, text)
        SELECT (id << {SEQUENCE_BITS}) | NEW.sequence, NEW.text
        FROM recordings_segment_search WHERE transcript_id = NEW.transcript_id;
"""
_UNINDEX_OLD = f"""
        INSERT INTO recordings_segment_fts (recordings_segment_fts, rowid, text)
        SELECT 'delete', (id << {SEQUENCE_BITS}) | OLD.sequence, OLD.text
        FROM recordings_segment_search WHERE transcript_id = OLD.transcript_id;
"""
_FORGET_EMPTY_REVISION = """
        DELETE FROM recordings_segment_search WHERE transcript_id = OLD.transcript_id
        AND NOT EXISTS (SELECT 1 FROM recordings_segment WHERE transcript_id = OLD.transcript_id);
"""

SQLITE_TRIGGERS = [
    f"CREATE TRIGGER recordings_segment_search_ai AFTER INSERT ON recordings_segment BEGIN {_INDEX_NEW} END",
    f"""
    CREATE TRIGGER recordings_segment_search_ad AFTER DELETE ON recordings_segment BEGIN
        {_UNINDEX_OLD} {_FORGET_EMPTY_REVISION}
    END
    """,
    f"""
    CREATE TRIGGER recordings_segment_search_au
    AFTER UPDATE OF text, sequence, transcript_id, workspace_id ON recordings_segment BEGIN
        {_UNINDEX_OLD} {_FORGET_EMPTY_REVISION} {_INDEX_NEW}
    END
    """,
]

SQLITE_UNINSTALL = [
    "DROP TRIGGER IF EXISTS recordings_segment_search_au",
    "DROP TRIGGER IF EXISTS recordings_segment_search_ad",
    "DROP TRIGGER IF EXISTS recordings_segment_search_ai",
    "DROP TABLE IF EXISTS recordings_segment_fts",
    "DROP TABLE IF EXISTS recordings_segment_search",
    "DROP TABLE IF EXISTS recordings_search_workspace",
]

# Lexemes keyed by workspace: '<workspace id>:word' instead of 'word'. A word's GIN posting list
# then holds one workspace's segments only, so a search never reads (or intersects with) other
# tenants' entries. Measured before choosing it: a two-column GIN (workspace_id, search_vector)
# with btree_gin intersects the word's postings with the workspace's, which for a workspace of
# 1.5M segments cost 80-280 ms per query even for a word in 1,000 segments (0.3 ms without the
# workspace column). Positions are dropped: ranking is computed from the text (apps/recordings/search/scoring.py).
POSTGRESQL_FUNCTIONS = [
    """
    CREATE FUNCTION connect_search_vector(workspace_id text, body text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN array_to_tsvector(ARRAY(
        SELECT workspace_id || ':' || lexeme FROM unnest(to_tsvector('connect_search'::regconfig, body))
    ))
    """,
    # Every word of `words` (parsed and folded exactly as the text was), keyed by the workspace,
    # all required. Each lexeme is quoted with backslash escapes, so nothing in it is syntax.
    r"""
    CREATE FUNCTION connect_search_query(workspace_id text, words text) RETURNS tsquery
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (
        SELECT coalesce(string_agg(
            '''' || replace(replace(workspace_id || ':' || lexeme, '\', '\\'), '''', '\''') || '''', ' & '
        ), '')::tsquery
        FROM unnest(to_tsvector('connect_search'::regconfig, words))
    )
    """,
]

POSTGRESQL_INSTALL = [
    *POSTGRESQL_FUNCTIONS,
    "DROP INDEX IF EXISTS recordings_segment_search_vector",
    "ALTER TABLE recordings_segment DROP COLUMN search_vector",
    """
    ALTER TABLE recordings_segment ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (connect_search_vector(workspace_id, text)) STORED
    """,
    "CREATE INDEX recordings_segment_search_vector ON recordings_segment USING gin (search_vector)",
    # The walk over a workspace's revisions, newest first (apps/recordings/search/postgresql.py, common words).
    """
    CREATE INDEX recordings_transcript_ws_newest
    ON recordings_transcript (workspace_id, created_at DESC, id DESC)
    """,
]

POSTGRESQL_UNINSTALL = [
    "DROP INDEX IF EXISTS recordings_transcript_ws_newest",
    "DROP INDEX IF EXISTS recordings_segment_search_vector",
    "ALTER TABLE recordings_segment DROP COLUMN search_vector",
    """
    ALTER TABLE recordings_segment ADD COLUMN search_vector tsvector
    GENERATED ALWAYS AS (to_tsvector('connect_search'::regconfig, text)) STORED
    """,
    "CREATE INDEX recordings_segment_search_vector ON recordings_segment USING gin (search_vector)",
    "DROP FUNCTION IF EXISTS connect_search_query(text, text)",
    "DROP FUNCTION IF EXISTS connect_search_vector(text, text)",
]


def _run(schema_editor, statements: list[str]) -> None:
    for statement in statements:
        schema_editor.execute(statement, params=None)


def install_sqlite_triggers(schema_editor) -> None:
    """(Re)create the triggers; safe to call after a table remake (see 0002's note)."""
    _run(schema_editor, ["DROP TRIGGER IF EXISTS recordings_segment_search_" + s for s in ("ai", "ad", "au")])
    _run(schema_editor, SQLITE_TRIGGERS)


def forwards(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        _run(schema_editor, SQLITE_DROP_0002 + SQLITE_INSTALL)
        install_sqlite_triggers(schema_editor)
    elif vendor == "postgresql":
        _run(schema_editor, POSTGRESQL_INSTALL)
    else:
        raise NotImplementedError(f"transcript search has no full-text index for {vendor}")


def backwards(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        from importlib import import_module

        previous = import_module("apps.recordings.migrations.0002_segment_search")
        _run(schema_editor, SQLITE_UNINSTALL + previous.SQLITE_INSTALL)
        previous.install_sqlite_triggers(schema_editor)
    elif vendor == "postgresql":
        _run(schema_editor, POSTGRESQL_UNINSTALL)


class Migration(migrations.Migration):
    dependencies = [("recordings", "0002_segment_search")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
