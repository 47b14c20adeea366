# An owner's catch-up still owed (the log range whose matchers may not have seen the endpoint)
# and a suspension after sustained failure: the columns the MCP events extension's subscriptions
# need. Nullable columns and a CharField with a database default: no row is rewritten on
# PostgreSQL 11+, and the previous release's processes, which name none of them, still insert.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('webhooks', '0009_endpoint_owner_and_expiry'),
    ]

    operations = [
        migrations.AddField(
            model_name='webhookendpoint',
            name='catch_up_after',
            field=models.CharField(blank=True, default='', db_default='', max_length=120),
        ),
        migrations.AddField(
            model_name='webhookendpoint',
            name='catch_up_until',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='webhookendpoint',
            name='catch_up_snapshot',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='webhookendpoint',
            name='suspended_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='webhookendpoint',
            name='resumed_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
