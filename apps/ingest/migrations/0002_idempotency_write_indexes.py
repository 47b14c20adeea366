"""The workspace foreign key's indexes on idempotency keys, dropped: a key is found by
(credential, key), the unique constraint, and purged by age (`idempotency_created`); nothing
selects keys by workspace, and a workspace is suspended, never deleted (apps/tenancy/admin.py).
Every keyed request wrote an entry in each (two: PostgreSQL's `varchar_pattern_ops` copy too),
and again when its answer was stored, unless that update stayed on the row's page.

Safe while the previous release is still running: it writes the same rows and reads through the
indexes that stay. The indexes are dropped online (keys keep being written meanwhile:
apps/core/schema_changes.py).
"""

import django.db.models.deletion
from django.db import migrations, models

from apps.core.schema_changes import Index, drop_indexes_online

INDEXES = [
    Index("ingest_idempotencykey_workspace_id_d8e0bf23", "ingest_idempotencykey (workspace_id)", True),
    Index("ingest_idempotencykey_workspace_id_d8e0bf23_like",
     "ingest_idempotencykey (workspace_id varchar_pattern_ops)", False),
]


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
            database_operations=[drop_indexes_online(INDEXES)],
        ),
    ]
