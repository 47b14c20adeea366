"""Fair delivery (issue 20, point 2): claims rotate across endpoints with due work, least worker
time first, and one endpoint holds at most CONNECT_WEBHOOK_ENDPOINT_CONCURRENCY attempt batches
in flight. In-process claims on the test database (SQLite, or PostgreSQL with DATABASE_URL),
then a live `serve` with a slow receiver beside a fast one."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.webhooks import delivery as engine
from apps.webhooks.models import Delivery, WebhookEndpoint
from tests import factories
from tests.webhooks.conftest import wait_until
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_delivery import _in_threads, make_endpoint, new_delivery, queued  # noqa: F401

CREATED = [{"type": "session.created"}]
CHANGED = [{"type": "session.status_changed"}]
BACKLOG = 100


def _deliveries(endpoint, count: int, event_type: str, queued, age_seconds: float = 0) -> list[str]:
    ids = [new_delivery(endpoint, queued, event_type=event_type).id for _ in range(count)]
    if age_seconds:
        for n, delivery_id in enumerate(ids):  # oldest first, in creation order
            Delivery.objects.filter(id=delivery_id).update(
                next_attempt_at=timezone.now() - timedelta(seconds=age_seconds - n))
    return ids


def test_an_endpoint_at_its_concurrency_cap_is_skipped_until_its_batch_ends(webhook_settings, alice, queued):
    busy = make_endpoint(alice, "http://127.0.0.1:9/busy", filters=CREATED)
    other = make_endpoint(alice, "http://127.0.0.1:9/other", filters=CHANGED)
    mine = _deliveries(busy, 3, "session.created", queued, age_seconds=60)
    theirs = _deliveries(other, 1, "session.status_changed", queued)

    token, first = engine.claim_batch(limit=2)
    assert first == mine[:2]  # a tie on the clock: the endpoint whose delivery waited longest
    assert engine.claim_batch(limit=2)[1] == theirs  # `busy` is at its cap (1) though older work is due
    assert engine.claim_batch(limit=2) == ("", [])
    assert engine.any_due()  # due, and left for the batch in flight to come back for

    webhook_settings.CONNECT_WEBHOOK_ENDPOINT_CONCURRENCY = 2
    assert engine.claim_batch(limit=2)[1] == mine[2:]
    webhook_settings.CONNECT_WEBHOOK_ENDPOINT_CONCURRENCY = 1

    # The first batch ends (its unattempted deliveries released): `busy` is below its cap again
    # once the second one ends too.
    Delivery.objects.filter(lease_token=token).update(lease_token="", lease_until=None)
    assert engine.claim_batch(limit=2) == ("", [])
    Delivery.objects.filter(id=mine[2]).update(lease_token="", lease_until=None)
    assert engine.claim_batch(limit=5)[1] == mine


def test_a_batch_whose_worker_died_stops_counting_when_its_lease_expires(webhook_settings, alice, queued):
    endpoint = make_endpoint(alice, "http://127.0.0.1:9/hook")
    ids = _deliveries(endpoint, 3, "session.created", queued, age_seconds=10)
    _, held = engine.claim_batch(limit=1)
    assert held == ids[:1] and engine.claim_batch() == ("", [])
    Delivery.objects.filter(id__in=held).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert engine.claim_batch()[1] == ids  # the dead worker's delivery is due again, first


def test_claims_rotate_to_the_endpoint_that_used_the_least_worker_time(
    webhook_settings, receiver, jwks_server, alice, queued, monkeypatch
):
    """A slow receiver's batch ends after the attempt that used up the batch's slice, and the
    endpoint then waits behind one that used less worker time, though its own deliveries are
    older: before, a drain served the globally oldest delivery's endpoint to the end."""
    webhook_settings.CONNECT_WEBHOOK_LEASE_SECONDS = 30  # room for every batch
    monkeypatch.setattr(engine, "BATCH_SLICE_SECONDS", 0.1)
    receiver.behaviour = lambda n: threading.Event().wait(0.3) or 204  # longer than the slice
    fast = Receiver(jwks_server.url)
    try:
        slow_endpoint = make_endpoint(alice, receiver.url, filters=CREATED)
        fast_endpoint = make_endpoint(alice, fast.url, filters=CHANGED)
        slow = _deliveries(slow_endpoint, 3, "session.created", queued, age_seconds=60)
        quick = _deliveries(fast_endpoint, 2, "session.status_changed", queued)
        done = engine.drain()
        assert [i for i, _ in done] == [slow[0], *quick, slow[1], slow[2]]
        assert {status for _, status in done} == {"succeeded"}
        assert len({r.peer_port for r in fast.wait_for(2)}) == 1  # the quick pair went as one batch
        clocks = dict(WebhookEndpoint.objects.values_list("id", "fair_clock"))
        assert clocks[slow_endpoint.id] >= 0.9 > clocks[fast_endpoint.id]  # three attempts of 0.3 s
    finally:
        fast.close()


def test_an_endpoint_back_from_idle_starts_at_the_rotations_current_time(webhook_settings, alice, queued):
    """Idle time is not saved up: an endpoint that had nothing due while another was busy starts
    where the rotation is (the highest start of any claim), not at its old clock, so it gets one
    batch ahead of the busy one and then takes turns."""
    busy = make_endpoint(alice, "http://127.0.0.1:9/busy", filters=CREATED)
    idle = make_endpoint(alice, "http://127.0.0.1:9/idle", filters=CHANGED)
    WebhookEndpoint.objects.filter(id=busy.id).update(fair_start=500.0, fair_clock=509.0)  # one 9 s batch
    older = _deliveries(busy, 2, "session.created", queued, age_seconds=60)
    back = _deliveries(idle, 2, "session.status_changed", queued)
    token, ids = engine.claim_batch(limit=1)
    assert ids == back[:1]
    assert WebhookEndpoint.objects.values_list("fair_clock", "fair_start").get(id=idle.id) == (500.0, 500.0)
    engine._charge(idle.id, 9.0)  # its batch took 9 s too
    Delivery.objects.filter(lease_token=token).update(lease_token="", lease_until=None)
    assert engine.claim_batch(limit=1)[1] == older[:1]  # level at 509: the longer-waiting goes first
    assert engine.claim_batch(limit=1)[1] == back[:1]


def test_a_newly_busy_endpoint_does_not_go_ahead_of_a_quick_one_with_due_work(webhook_settings, alice, queued):
    """An endpoint with no finished batch is expected to cost a batch slice: several slow
    receivers that become busy at once do not each take a worker ahead of a quick endpoint
    whose last batch cost milliseconds (the bench's fairness phase: four at once put the quick
    one's deliveries behind two rounds of 9 s attempts)."""
    quick = make_endpoint(alice, "http://127.0.0.1:9/quick", filters=CHANGED)
    new = make_endpoint(alice, "http://127.0.0.1:9/new", filters=CREATED)
    WebhookEndpoint.objects.filter(id=quick.id).update(fair_start=100.0, fair_clock=100.002)
    backlog = _deliveries(new, 2, "session.created", queued, age_seconds=60)  # older than the quick one's
    mine = _deliveries(quick, 1, "session.status_changed", queued)
    token, ids = engine.claim_batch(limit=1)
    assert ids == mine
    engine._charge(quick.id, 5.0)  # the quick endpoint used more than a slice since
    Delivery.objects.filter(lease_token=token).update(lease_token="", lease_until=None)
    _deliveries(quick, 1, "session.status_changed", queued)
    assert engine.claim_batch(limit=1)[1] == backlog[:1]


@pytest.mark.django_db(transaction=True)
def test_racing_claims_hold_one_batch_per_endpoint_at_the_default_cap(webhook_settings, alice, queued):
    """Four workers claiming at once (PostgreSQL: SKIP LOCKED on the endpoint row, then a fresh
    count of its batches in flight; SQLite: IMMEDIATE transactions) never exceed the cap."""
    kinds = ["session.created", "session.status_changed"]
    endpoints = [make_endpoint(alice, f"http://127.0.0.1:9/hook{i}", filters=[{"type": kind}])
                 for i, kind in enumerate(kinds)]
    for endpoint, kind in zip(endpoints, kinds):
        _deliveries(endpoint, 10, kind, queued)
    claims = _in_threads(4, lambda: [engine.claim_batch(limit=3) for _ in range(4)])
    batches = [ids for claim in claims for _, ids in claim if ids]
    by_id = dict(Delivery.objects.values_list("id", "endpoint_id"))
    assert sorted(by_id[batch[0]] for batch in batches) == sorted(e.id for e in endpoints)
    assert all(len(batch) == 3 and len({by_id[i] for i in batch}) == 1 for batch in batches)


@pytest.mark.django_db(transaction=True)
def test_a_slow_receiver_does_not_hold_back_a_fast_one(webhook_server, webhook_settings, alice, bob):
    """Live: `serve` with two workers. One endpoint's receiver takes 3 s per request (inside the
    4 s timeout) with a backlog of 100; another endpoint's deliveries, recorded after that
    backlog, all arrive while the slow one still has most of it. Before, every claim took the
    globally oldest due deliveries: the fast endpoint was served only once all of the slow one's
    due deliveries were leased, two batches of 20, so never with more than 40 of them left."""
    from tests.webhooks.test_live import subscribe

    jwks = f"{webhook_server.url}/.well-known/webhook-signing-keys.json"
    gate = threading.Event()
    slow = Receiver(jwks, behaviour=lambda n: gate.wait(3) and 204 or 204)
    fast = Receiver(jwks)
    try:
        slow_id = subscribe(webhook_server, alice, slow.url)
        fast_id = subscribe(webhook_server, bob, fast.url)
        for _ in range(BACKLOG):
            factories.session(alice.workspace)
        slow.wait_for(1, timeout=90)  # the backlog is being worked on
        sessions = [factories.session(bob.workspace).id for _ in range(5)]
        received = fast.wait_for(5, timeout=120)
        backlog = Delivery.objects.filter(endpoint_id=slow_id, status__in=["pending", "retrying"]).count()
        assert sorted(r.event["data"]["sessionId"] for r in received) == sorted(sessions)
        assert all(r.verified for r in received)
        assert backlog > BACKLOG // 2, f"the fast endpoint waited until the slow one had {backlog} left"
        gate.set()
        wait_until(lambda: not Delivery.objects.filter(
            endpoint_id__in=[slow_id, fast_id], status__in=["pending", "retrying"]).exists(), timeout=180)
        assert Delivery.objects.filter(endpoint_id=slow_id, status="succeeded").count() == BACKLOG
        by_event = [r.headers["Svc-Event-Id"] for r in slow.requests]
        assert len(set(by_event)) == BACKLOG
    finally:
        gate.set()
        slow.close()
        fast.close()
