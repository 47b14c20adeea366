from django.db import migrations, models


def drop_rows_without_holder(apps, schema_editor):
    """Rows written before slots had holders may repeat `(workspace, process, "")`. A stream
    whose row this drops is ended by its hub's next renewal, and its client resumes."""
    apps.get_model("events", "StreamSlot").objects.filter(holder="").delete()


class Migration(migrations.Migration):

    dependencies = [
        ('events', '0003_event_log'),
        ('tenancy', '0001_initial'),
    ]

    operations = [
        migrations.RunPython(drop_rows_without_holder, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='streamslot',
            constraint=models.UniqueConstraint(fields=('workspace', 'process', 'holder'), name='streamslot_unique_holder'),
        ),
    ]
