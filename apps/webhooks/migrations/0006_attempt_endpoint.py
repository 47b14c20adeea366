"""The endpoint stored on each attempt (issue 22): the health board reads an endpoint's attempts
of the last 24 hours from (endpoint, started_at, duration_ms, error) instead of joining every
delivery (bench/README.md, "Delivery health board at 1,000,000 deliveries").

Safe while the previous release is still running (docs/decisions/webhooks.md, "The attempt's endpoint"):
- the column is nullable with no database default and no constraint, so adding it is a change
  of the catalogue only, and the previous release's inserts (which do not name it) still work;
- existing rows are filled in batches of `BATCH` ids, one short transaction each, so no
  statement holds a lock on many rows for long; rows the previous release writes meanwhile are
  filled by running `backfill` again (it only touches rows still without an endpoint);
- on PostgreSQL the index is built and the old one dropped CONCURRENTLY (attempts keep being
  written meanwhile), so this migration is not atomic.
"""

from django.db import migrations, models, transaction
from django.db.models import OuterRef, Subquery

BATCH = 10_000


def backfill(apps, schema_editor, batch: int = BATCH) -> int:
    """Copy each attempt's delivery's endpoint onto it, `batch` ids at a time; returns the rows
    filled. Idempotent."""
    Attempt = apps.get_model("webhooks", "DeliveryAttempt")
    Delivery = apps.get_model("webhooks", "Delivery")
    db = schema_editor.connection.alias
    missing = Attempt.objects.using(db).filter(endpoint__isnull=True)
    bounds = missing.aggregate(lo=models.Min("id"), hi=models.Max("id"))
    if bounds["lo"] is None:
        return 0
    endpoint = Subquery(Delivery.objects.using(db).filter(id=OuterRef("delivery_id")).values("endpoint_id")[:1])
    filled = 0
    for start in range(bounds["lo"], bounds["hi"] + 1, batch):
        with transaction.atomic(using=db):
            filled += missing.filter(id__gte=start, id__lt=start + batch).update(endpoint_id=endpoint)
    return filled


def forwards(apps, schema_editor):
    backfill(apps, schema_editor)


class OnlineIndex:
    """CREATE/DROP INDEX CONCURRENTLY on PostgreSQL, the plain statement elsewhere."""

    @staticmethod
    def concurrently(schema_editor) -> dict:
        return {"concurrently": True} if schema_editor.connection.vendor == "postgresql" else {}


class AddIndexOnline(migrations.AddIndex):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor.add_index(model, self.index, **OnlineIndex.concurrently(schema_editor))

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            schema_editor.remove_index(model, self.index, **OnlineIndex.concurrently(schema_editor))


class RemoveIndexOnline(migrations.RemoveIndex):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            index = from_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
            schema_editor.remove_index(model, index, **OnlineIndex.concurrently(schema_editor))

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            index = to_state.models[app_label, self.model_name_lower].get_index_by_name(self.name)
            schema_editor.add_index(model, index, **OnlineIndex.concurrently(schema_editor))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('webhooks', '0005_health_board'),
    ]

    operations = [
        migrations.AddField(
            model_name='deliveryattempt',
            name='endpoint',
            field=models.ForeignKey(blank=True, db_constraint=False, db_index=False, editable=False, null=True,
                                    on_delete=models.deletion.CASCADE, related_name='+', to='webhooks.webhookendpoint'),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False),
        AddIndexOnline(
            model_name='deliveryattempt',
            index=models.Index(fields=['endpoint', 'started_at', 'duration_ms', 'error'],
                               name='attempt_endpoint_started'),
        ),
        RemoveIndexOnline(model_name='deliveryattempt', name='attempt_started'),
    ]
