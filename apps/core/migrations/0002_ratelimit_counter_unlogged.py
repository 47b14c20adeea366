"""PostgreSQL: the rate-limit counter table is UNLOGGED. Its rows live one or two minutes and
are worth nothing after a crash, and a transaction that writes only unlogged tables does not
wait for a WAL flush at commit: one check costs a round trip instead of an fsync."""

from django.db import migrations


def set_unlogged(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE core_ratelimitcounter SET UNLOGGED")


def set_logged(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE core_ratelimitcounter SET LOGGED")


class Migration(migrations.Migration):
    dependencies = [("core", "0001_ratelimit_counter")]

    operations = [migrations.RunPython(set_unlogged, set_logged, elidable=False)]
