"""Indexes no read of the event log uses, dropped: every recorded event wrote an entry in each.

- the workspace foreign key's own index: `event_ws_position` (workspace, position, id) starts
  with the same column and serves everything it could (the log's pages, the admin's workspace
  filter, the cascade of a workspace's deletion);
- PostgreSQL's `varchar_pattern_ops` copies Django adds beside a varchar primary key and foreign
  key, which only serve `LIKE 'prefix%'`: nothing matches event ids or workspace ids by prefix
  (the admin's id search is `=id`, an exact match).

Safe while the previous release is still running: it writes the same rows and its reads use the
indexes that stay. The indexes are dropped online (events keep being written meanwhile:
apps/core/schema_changes.py). Only the indexes change: AlterField would copy the table on
SQLite.
"""

import django.db.models.deletion
from django.db import migrations, models

from apps.core.schema_changes import Index, drop_indexes_online

INDEXES = [
    Index("events_event_workspace_id_6d694154", "events_event (workspace_id)", True),
    Index("events_event_workspace_id_6d694154_like", "events_event (workspace_id varchar_pattern_ops)", False),
    Index("events_event_id_75d2cab3_like", "events_event (id varchar_pattern_ops)", False),
]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("events", "0004_streamslot_unique_holder"),
        ("tenancy", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="event",
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
