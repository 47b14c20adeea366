"""The workspace foreign key's indexes on idempotency keys, dropped: a key is found by
(credential, key), the unique constraint, and purged by age (`idempotency_created`); nothing
selects keys by workspace, and a workspace is suspended, never deleted (apps/tenancy/admin.py).
Every keyed request wrote an entry in each (two: PostgreSQL's `varchar_pattern_ops` copy too),
and again when its answer was stored, unless that update stayed on the row's page.

Safe while the previous release is still running: it writes the same rows and reads through
the indexes that stay. On PostgreSQL each index is dropped CONCURRENTLY (keys keep being
written meanwhile), so this migration is not atomic; `IF EXISTS` makes a rerun finish the job.
"""

import django.db.models.deletion
from django.db import migrations, models

# (Django's name, what it indexes, whether SQLite has it too)
INDEXES = [
    ("ingest_idempotencykey_workspace_id_d8e0bf23", "ingest_idempotencykey (workspace_id)", True),
    ("ingest_idempotencykey_workspace_id_d8e0bf23_like",
     "ingest_idempotencykey (workspace_id varchar_pattern_ops)", False),
]


def _online(schema_editor) -> str:
    return " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""


def _here(schema_editor, on_sqlite: bool) -> bool:
    return schema_editor.connection.vendor == "postgresql" or on_sqlite


def drop_indexes(apps, schema_editor):
    for name, _, on_sqlite in INDEXES:
        if _here(schema_editor, on_sqlite):
            schema_editor.execute(f"DROP INDEX{_online(schema_editor)} IF EXISTS {schema_editor.quote_name(name)}")


def create_indexes(apps, schema_editor):
    for name, target, on_sqlite in INDEXES:
        if _here(schema_editor, on_sqlite):
            schema_editor.execute(
                f"CREATE INDEX{_online(schema_editor)} IF NOT EXISTS {schema_editor.quote_name(name)} ON {target}"
            )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("ingest", "0001_initial"),
        ("tenancy", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="idempotencykey",
                    name="workspace",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="tenancy.workspace",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(drop_indexes, create_indexes, elidable=False)],
        ),
    ]
