"""Deliveries are claimed by drain tasks instead of one task each: the flag that says a drain is
queued (with its one row), and the index a drain's per-endpoint claim reads."""

from django.db import migrations, models


def create_flag(apps, schema_editor):
    apps.get_model("webhooks", "QueuedDrain").objects.using(schema_editor.connection.alias).get_or_create(id=1)


class Migration(migrations.Migration):
    dependencies = [("webhooks", "0002_dead_letter_first")]

    operations = [
        migrations.CreateModel(
            name="QueuedDrain",
            fields=[
                ("id", models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                ("until", models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.RunPython(create_flag, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="delivery",
            index=models.Index(
                condition=models.Q(("status__in", ("pending", "retrying"))),
                fields=["endpoint", "next_attempt_at"],
                name="delivery_endpoint_due",
            ),
        ),
    ]
