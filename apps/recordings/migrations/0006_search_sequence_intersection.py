"""PostgreSQL: intersecting a revision's sequence lists in C (issue 24 point 5).

A search intersects, for each revision it reads, the sorted sequence lists of the query's words
(`recordings_revisionword`, migration 0005). In SQL that was an INTERSECT of unnested arrays
per revision, a hash set built and read for every row: most of the time of a query of common
words. contrib's `intarray` intersects two integer arrays in C (`&`, sort-merge).

Installed into a schema of its own (`connect_intarray`) unless the database has it already, so
that its operators do not replace the built-in ones on integer[] (`&&`, `@>`, `<@`) for anything
else: the search calls `recordings_sequences_and(a, b)`, an SQL function the planner inlines,
which names the operator by its schema. intarray is part of contrib and trusted (PostgreSQL
13+): a database owner may create it, and managed services offer it.

SQLite: nothing.
"""

from django.db import migrations

SCHEMA = "connect_intarray"


def forwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as db:
        db.execute("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'intarray'")
        row = db.fetchone()
        if row is None:
            db.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            db.execute(f"CREATE EXTENSION intarray WITH SCHEMA {SCHEMA}")
            schema = SCHEMA
        else:
            schema = row[0]
        # The intersection of two sorted sequence lists, sorted; '{}' when they share none.
        db.execute(f"""
            CREATE FUNCTION recordings_sequences_and(integer[], integer[]) RETURNS integer[]
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            AS 'SELECT $1 OPERATOR({schema}.&) $2'
        """)  # fmt: skip


def backwards(apps, schema_editor) -> None:
    """The function, and intarray with its schema when this migration installed them there."""
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as db:
        db.execute("DROP FUNCTION IF EXISTS recordings_sequences_and(integer[], integer[])")
        db.execute("SELECT 1 FROM pg_extension AS e JOIN pg_namespace AS n ON n.oid = e.extnamespace"
                   " WHERE e.extname = 'intarray' AND n.nspname = %s", [SCHEMA])  # fmt: skip
        if db.fetchone() is not None:
            db.execute("DROP EXTENSION intarray")
            db.execute(f"DROP SCHEMA IF EXISTS {SCHEMA}")


class Migration(migrations.Migration):
    dependencies = [("recordings", "0005_search_revision_words")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
