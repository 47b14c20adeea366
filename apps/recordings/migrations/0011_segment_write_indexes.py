"""Indexes on recordings_segment that no read uses, dropped: every appended segment wrote an
entry in each.

- the search vector's GIN index (migration 0003): PostgreSQL's search reads the index by
  revision, `recordings_revisionword` (migration 0005), and nothing else matches
  `search_vector`. GIN inserts go to a pending list that the inserting statement itself moves
  into the index once it is full (`gin_pending_list_limit`), so one append in many paid for
  thousands of others. The column stays: the triggers of migration 0008 read it.
- the workspace foreign key's own index: no read selects segments by workspace alone (they are
  read by revision, through the indexes that start with `transcript_id`, or by id), and a
  workspace is suspended, never deleted (apps/tenancy/admin.py).
- PostgreSQL's `varchar_pattern_ops` copies Django adds beside a varchar primary key and
  foreign key, which only serve `LIKE 'prefix%'`: nothing matches segment or workspace ids by
  prefix.

Safe while the previous release is still running: it writes the same rows and its reads use the
indexes that stay; only its hourly `compact_search_index` named the GIN index (a run of that job
on an old process fails, and the next, on the new release, has nothing to do). The indexes are
dropped online (segments keep being appended meanwhile: apps/core/schema_changes.py). Only the
indexes change: AlterField would copy the table on SQLite and drop its search triggers with it.
"""

import django.db.models.deletion
from django.db import migrations, models

from apps.core.schema_changes import Index, drop_indexes_online

INDEXES = [
    Index("recordings_segment_search_vector", "recordings_segment USING gin (search_vector)", False),
    Index("recordings_segment_workspace_id_94889c92", "recordings_segment (workspace_id)", True),
    Index("recordings_segment_workspace_id_94889c92_like", "recordings_segment (workspace_id varchar_pattern_ops)",
          False),
    Index("recordings_segment_id_7ad25fd5_like", "recordings_segment (id varchar_pattern_ops)", False),
]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("recordings", "0010_segment_embedding"),
        ("tenancy", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="segment",
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
