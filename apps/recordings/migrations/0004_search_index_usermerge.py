"""SQLite: let FTS5's 'merge' command join any two b-trees of one level (`usermerge` 2; the
default, 4, leaves up to three per level unmerged). `services.compact_search_index` runs the
command; FTS5 keeps the setting in the index's own config table. PostgreSQL: nothing to do."""

from django.db import migrations


def forwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(
            "INSERT INTO recordings_segment_fts(recordings_segment_fts, rank) VALUES ('usermerge', 2)", params=None
        )


def backwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(
            "INSERT INTO recordings_segment_fts(recordings_segment_fts, rank) VALUES ('usermerge', 4)", params=None
        )


class Migration(migrations.Migration):
    dependencies = [("recordings", "0003_search_keyed_by_workspace")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
