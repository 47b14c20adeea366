"""Each attempt stores its delivery's endpoint (issue 22: the health board reads an endpoint's
attempts through `attempt_endpoint_started` without joining the deliveries): written where a
drain records attempts, by every other way of creating them, and filled for older rows by
migration 0006's batched backfill."""

from __future__ import annotations

from importlib import import_module

from django.apps import apps as django_apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.webhooks import delivery as engine
from apps.webhooks.models import Delivery, DeliveryAttempt
from tests.webhooks.test_delivery import make_endpoint, new_delivery, queued  # noqa: F401 (a fixture)
from tests.webhooks.test_health_board import delivery as board_delivery
from tests.webhooks.test_health_board import make_endpoint as plain_endpoint

backfill = import_module("apps.webhooks.migrations.0006_attempt_endpoint").backfill


def test_a_drain_records_each_attempt_with_its_endpoint(webhook_settings, receiver, alice, queued):  # noqa: F811
    endpoint = make_endpoint(alice, receiver.url)
    d = new_delivery(endpoint, queued)
    assert engine.drain() == [(d.id, "succeeded")]
    assert list(DeliveryAttempt.objects.values_list("delivery_id", "endpoint_id")) == [(d.id, endpoint.id)]


def test_every_way_of_creating_attempts_stores_the_endpoint(alice, bob):
    hook, other = plain_endpoint(alice.workspace, alice, "hook"), plain_endpoint(bob.workspace, bob, "other")
    first, second = board_delivery(hook, "succeeded", timezone.now()), board_delivery(other, "succeeded", timezone.now())
    now = timezone.now()
    row = {"started_at": now, "completed_at": now, "duration_ms": 1}
    first.attempts.create(number=1, **row)  # through the related manager
    DeliveryAttempt.objects.create(delivery_id=second.id, number=1, **row)  # by id only
    with CaptureQueriesContext(connection) as loaded:
        DeliveryAttempt.objects.bulk_create([DeliveryAttempt(delivery=first, number=2, **row)])
    assert not any("webhooks_delivery\"" in q["sql"] and "SELECT" in q["sql"] for q in loaded.captured_queries)
    DeliveryAttempt.objects.bulk_create([DeliveryAttempt(delivery_id=first.id, number=3, **row),
                                         DeliveryAttempt(delivery_id=second.id, number=2, **row)])
    stored = set(DeliveryAttempt.objects.values_list("delivery_id", "number", "endpoint_id"))
    assert stored == {(first.id, 1, hook.id), (first.id, 2, hook.id), (first.id, 3, hook.id),
                      (second.id, 1, other.id), (second.id, 2, other.id)}


class _SchemaEditor:
    connection = connection


def test_the_backfill_fills_rows_without_an_endpoint_in_batches_and_only_those(alice, bob):
    hook, other = plain_endpoint(alice.workspace, alice, "hook"), plain_endpoint(bob.workspace, bob, "other")
    now = timezone.now()
    for i in range(3):
        board_delivery(hook, "succeeded", now, durations=[5, 6])
        board_delivery(other, "dead_letter", now, durations=[7], errors=["timeout"])
    expected = {a.id: Delivery.objects.get(id=a.delivery_id).endpoint_id for a in DeliveryAttempt.objects.all()}
    assert len(expected) == 9
    # As the previous release wrote them (no endpoint), all but one.
    keep = min(expected)
    DeliveryAttempt.objects.exclude(id=keep).update(endpoint=None)
    assert DeliveryAttempt.objects.filter(endpoint__isnull=True).count() == 8
    assert backfill(django_apps, _SchemaEditor(), batch=2) == 8
    assert dict(DeliveryAttempt.objects.values_list("id", "endpoint_id")) == expected
    assert backfill(django_apps, _SchemaEditor(), batch=2) == 0  # idempotent: nothing left
