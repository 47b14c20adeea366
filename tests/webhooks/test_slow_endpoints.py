"""Slow endpoints leave a worker for the quick ones: an endpoint whose last batch had an attempt
of SLOW_ATTEMPT_SECONDS or more (or a timeout) is slow, and slow endpoints hold at most
CONNECT_WEBHOOK_SLOW_BATCHES batches in flight between them. In-process claims on the test
database (SQLite, or PostgreSQL with DATABASE_URL); nothing here depends on timing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.webhooks import delivery as engine
from apps.webhooks import outbound, services
from apps.webhooks.models import Delivery, WebhookEndpoint
from tests.webhooks.test_delivery import _in_threads, attempt_due, make_endpoint, new_delivery, queued  # noqa: F401


def _endpoint(alice, name: str, *, slow: bool, clock: float, cost: float = 9.0):
    """An endpoint whose last batch cost `cost` seconds of worker time, ending at `clock`."""
    endpoint = make_endpoint(alice, f"http://127.0.0.1:9/{name}")
    WebhookEndpoint.objects.filter(id=endpoint.id).update(slow=slow, fair_start=clock - cost, fair_clock=clock)
    return endpoint


def _deliveries(endpoint, count: int, *, age_seconds: float = 0) -> list[str]:
    """`count` deliveries due for `endpoint` alone, oldest first, the first `age_seconds` old."""
    ids = []
    for n in range(count):
        made = services.create_event_deliveries(
            workspace_id=endpoint.workspace_id, event_id=f"evt_{endpoint.id}_{n}", event_type="session.created",
            session_id="s1", occurred_at=timezone.now(),
            data={"sessionId": "s1", "occurredAt": "x", "session": {"id": "s1"}})
        ids += [d.id for d in made if d.endpoint_id == endpoint.id]
        Delivery.objects.filter(id__in=[d.id for d in made if d.endpoint_id != endpoint.id]).delete()
    for n, delivery_id in enumerate(ids):
        Delivery.objects.filter(id=delivery_id).update(
            next_attempt_at=timezone.now() - timedelta(seconds=age_seconds - n))
    return ids


def _release(token: str) -> None:
    Delivery.objects.filter(lease_token=token).update(lease_token="", lease_until=None)


def test_slow_endpoints_in_flight_up_to_their_share_leave_the_next_claim_to_a_quick_one(
    webhook_settings, alice, queued
):
    """Both slow endpoints come first in the rotation (they used less worker time than the
    quick one); with one slow batch in flight, the next claim passes the other slow one by for
    the quick one, and then claims nothing at all though slow work is due."""
    webhook_settings.CONNECT_WEBHOOK_SLOW_BATCHES = 1
    slow_a = _endpoint(alice, "slow-a", slow=True, clock=105.0)
    slow_b = _endpoint(alice, "slow-b", slow=True, clock=109.0)
    quick = _endpoint(alice, "quick", slow=False, clock=200.0, cost=100.0)
    a = _deliveries(slow_a, 2, age_seconds=60)
    b = _deliveries(slow_b, 2, age_seconds=120)
    q = _deliveries(quick, 2)

    first, ids = engine.claim_batch(limit=1)
    assert ids == a[:1]
    second, ids = engine.claim_batch(limit=1)
    assert ids == q[:1]  # slow_b is ahead of it in the rotation, but the slow share is taken
    assert engine.claim_batch(limit=1) == ("", [])
    assert engine.any_due()

    _release(first)  # slow_a's batch ends after 9 s: the slow share is free again
    engine._charge(slow_a.id, 9.0, slow=True)
    assert engine.claim_batch(limit=1)[1] == b[:1]
    _release(second)
    assert engine.claim_batch(limit=1)[1] == q[:1]  # quick endpoints are never held back

    webhook_settings.CONNECT_WEBHOOK_SLOW_BATCHES = 2
    assert engine.claim_batch(limit=1)[1] == a[:1]


class _Sender:
    def __init__(self, outcome: outbound.Outcome) -> None:
        self.outcome = outcome

    def post(self, url, headers, body) -> outbound.Outcome:
        return self.outcome


@pytest.mark.parametrize("outcome, slow", [
    (outbound.Outcome(204, "", int(engine.SLOW_ATTEMPT_SECONDS * 1000)), True),
    (outbound.Outcome(None, "timeout", 10), True),
    (outbound.Outcome(204, "", 5), False),
    (outbound.Outcome(500, "http_error", 5), False),
])
def test_an_endpoint_is_slow_or_quick_by_its_last_batch(webhook_settings, alice, queued, monkeypatch, outcome, slow):
    endpoint = make_endpoint(alice, "http://127.0.0.1:9/hook")
    WebhookEndpoint.objects.filter(id=endpoint.id).update(slow=not slow)
    new_delivery(endpoint, queued)
    monkeypatch.setattr(engine, "sender", lambda: _Sender(outcome))
    assert len(attempt_due()) == 1
    assert WebhookEndpoint.objects.get(id=endpoint.id).slow is slow


@pytest.mark.django_db(transaction=True)
def test_racing_claims_hold_at_most_the_slow_share(webhook_settings, alice, queued):
    """Four workers claiming at once among four slow endpoints (PostgreSQL: an advisory lock,
    then a fresh count; SQLite: IMMEDIATE transactions) start exactly one slow batch."""
    webhook_settings.CONNECT_WEBHOOK_SLOW_BATCHES = 1
    for i in range(4):
        _deliveries(_endpoint(alice, f"slow{i}", slow=True, clock=109.0), 3)
    claims = _in_threads(4, lambda: [engine.claim_batch(limit=3) for _ in range(2)])
    assert len([ids for claim in claims for _, ids in claim if ids]) == 1
