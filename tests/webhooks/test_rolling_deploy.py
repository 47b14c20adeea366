"""During a rolling deploy the previous release's processes run on the migrated schema: every
column a migration adds must take a row that does not name it (nullable, or with a database
default), or creating an endpoint fails there until the last old process is gone."""

from __future__ import annotations

from django.db import connection

from apps.webhooks.models import WebhookEndpoint
from tests.webhooks.test_health_board import make_endpoint

# What migration 0010 added; the previous release's INSERT names none of them.
ADDED_BY_0010 = {"catch_up_after", "catch_up_until", "catch_up_snapshot", "suspended_at", "resumed_at"}


def test_an_endpoint_row_written_by_the_previous_release_is_accepted(alice):
    model = make_endpoint(alice.workspace, alice, "model")
    fields = [f for f in WebhookEndpoint._meta.concrete_fields if f.name not in ADDED_BY_0010]
    assert len(fields) == len(WebhookEndpoint._meta.concrete_fields) - len(ADDED_BY_0010)
    values = [f.get_db_prep_save(getattr(model, f.attname), connection) for f in fields]
    values[[f.name for f in fields].index("id")] = "wh_previous_release"
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    table = connection.ops.quote_name(WebhookEndpoint._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})", values)
    old = WebhookEndpoint.objects.get(pk="wh_previous_release")
    assert (old.catch_up_after, old.catch_up_until, old.suspended_at) == ("", None, None)
