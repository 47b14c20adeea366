"""Schema changes a migration can run while the previous release still writes to the table.

`drop_indexes_online` drops indexes no read uses. On PostgreSQL each is dropped CONCURRENTLY
(writes go on meanwhile), so a migration using it sets `atomic = False`; `IF EXISTS` lets a
rerun after a failure finish the job, and the reverse creates them again the same way. On SQLite
only the indexes marked for it exist (PostgreSQL alone has Django's `varchar_pattern_ops`
copies and GIN). Migrations call this rather than AlterField, which copies a table on SQLite.

Migrations import it, so its behaviour is frozen: change it only in ways every caller's history
still means the same."""

from __future__ import annotations

from typing import NamedTuple

from django.db import migrations


class Index(NamedTuple):
    name: str  # Django's or a migration's name
    target: str  # what it indexes, as CREATE INDEX ... ON says it
    on_sqlite: bool  # whether SQLite has it too


def drop_indexes_online(indexes: list[Index]) -> migrations.RunPython:
    def present(schema_editor, index: Index) -> bool:
        return schema_editor.connection.vendor == "postgresql" or index.on_sqlite

    def online(schema_editor) -> str:
        return " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""

    def drop(apps, schema_editor):
        for index in indexes:
            if present(schema_editor, index):
                schema_editor.execute(f"DROP INDEX{online(schema_editor)} IF EXISTS "
                                      f"{schema_editor.quote_name(index.name)}")

    def create(apps, schema_editor):
        for index in indexes:
            if present(schema_editor, index):
                schema_editor.execute(f"CREATE INDEX{online(schema_editor)} IF NOT EXISTS "
                                      f"{schema_editor.quote_name(index.name)} ON {index.target}")

    return migrations.RunPython(drop, create, elidable=False)
