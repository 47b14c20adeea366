"""The catch-up that closes the subscribe/record race of the Events extension's webhook delivery
(apps/mcp/events_delivery.py): an event recorded by a transaction still open while a
subscription commits ran its matcher before the subscription was visible, so nothing queued it;
it lies after the subscription's starting cursor and must still arrive, once.

The interleaving is forced with real transactions on two connections: a holder process records
the event and keeps its transaction open while `events/subscribe` goes over HTTP to a live
`serve` (daphne + the django-q2 cluster and sweeper that drain deliveries), whose deliveries reach
tests/webhooks/receiver.py's receiver, each Standard Webhooks signature checked here with the
client's secret. PostgreSQL: the subscription commits first, and the catch-up must deliver the
event. SQLite: one writer at a time, so the subscribe waits for the holder's commit and the event
lies before the subscription's cursor: nothing is owed, and nothing is sent."""

from __future__ import annotations

import base64
import os
import threading
from collections import Counter

import httpx
import pytest
import standardwebhooks
from django.db import connection

from apps.events import positions
from apps.events.models import Event
from apps.mcp import events_delivery, events_extension
from apps.access.credentials import authenticate_bearer
from apps.webhooks import delivery as engine
from apps.webhooks import watermark
from apps.webhooks.models import ACTIVE_STATUSES, Delivery, WebhookEndpoint
from tests import factories
from tests.holders import MANY, Holder, end_holders  # noqa: F401
from tests.servers import server_env
from tests.webhooks.conftest import (  # noqa: F401
    LIVE_ENV,
    fresh_process_caches,
    jwks_server,
    receiver,
    wait_until,
    webhook_settings,
)
from tests.webhooks.receiver import Receiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

MODERN = "2026-07-28"


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def rpc(base: str, key: str, method: str, params: dict) -> dict:
    headers = {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": MODERN, "Accept": "application/json",
               "Mcp-Method": method}
    params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                  "io.modelcontextprotocol/clientCapabilities": {}}}
    return httpx.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                      headers=headers, timeout=60).json()


def subscribe_params(url: str, secret: str) -> dict:
    return {"name": "session.created", "arguments": {}, "delivery": {"mode": "webhook", "url": url, "secret": secret},
            "cursor": None, "ttlMs": 3_600_000}


def after_cursor(cursor: str, event_id: str) -> bool:
    event = Event.objects.get(pk=event_id)
    return positions.decode_position(cursor).key() < (event.position, event.id)


@pytest.fixture
def callback(webhook_server):
    r = Receiver(f"{webhook_server.url}/.well-known/webhook-signing-keys.json", verification="echo", path="/hooks/")
    yield r
    r.close()


def settled(endpoint_id: str) -> bool:
    """The catch-up is done and nothing of the subscription is waiting to be sent."""
    endpoint = WebhookEndpoint.objects.get(pk=endpoint_id)
    return not endpoint.catch_up_after and not Delivery.objects.filter(
        endpoint_id=endpoint_id, status__in=ACTIVE_STATUSES).exists()


def test_an_event_recorded_while_the_subscription_commits_arrives_once(
        webhook_server, webhook_settings, callback, alice, bob):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    secret = new_secret()
    postgresql = connection.vendor == "postgresql"
    # E: recorded, its matcher run (no subscription yet), its transaction left open.
    held = Holder(alice.workspace.id, "held", env=server_env(**LIVE_ENV))
    # G (PostgreSQL): a transaction that has written before the subscription commits (so its
    # rows fall in the catch-up's range) and records alice's event after it (its matcher sees
    # the subscription): the normal path queues it, and the catch-up must not queue it again.
    both = (Holder(bob.workspace.id, "elsewhere", alice.workspace.id, "both", env=server_env(**LIVE_ENV))
            if postgresql else None)

    answered: dict = {}
    subscribing = threading.Thread(target=lambda: answered.update(
        rpc(webhook_server.url, key, "events/subscribe", subscribe_params(callback.url, secret))))
    subscribing.start()
    if postgresql:
        subscribing.join()  # the subscription has committed while E's transaction is still open
        both.go()
        both.commit()
    held.commit()  # SQLite: the subscribe's transaction was waiting for this one
    subscribing.join()
    result = answered["result"]
    [event] = held.event_ids

    later = factories.session(alice.workspace, label="Later")
    later_id = Event.objects.get(session_id=later.id, type="session.created").id
    callback.wait_for_events(1)
    wait_until(lambda: later_id in [r.json["eventId"] for r in callback.of_type(None)])
    wait_until(lambda: settled(result["id"]))

    owed = [later_id]
    if postgresql:
        # The forced interleaving: E lies after the subscription's cursor, so it is owed.
        assert after_cursor(result["cursor"], event)
        owed += [event, both.event_ids[1]]
        wait_until(lambda: {event, both.event_ids[1]} <= {r.json["eventId"] for r in callback.of_type(None)})
        wait_until(lambda: settled(result["id"]))
    else:
        # One writer: the subscription began after E's commit, so E lies before its cursor.
        assert not after_cursor(result["cursor"], event)
    delivered = callback.of_type(None)
    assert Counter(r.json["eventId"] for r in delivered) == Counter(owed)  # each once, nothing else
    assert Counter(d.event_id for d in Delivery.objects.filter(endpoint_id=result["id"])) == Counter(owed)
    for request in delivered:
        standardwebhooks.Webhook(secret).verify(request.body, request.headers)
        assert request.headers["X-MCP-Subscription-Id"] == result["id"]
        assert request.headers["webhook-id"] == request.json["eventId"]


@pytest.fixture
def queued(monkeypatch):
    """Drains are run by the test itself: nothing goes on django-q2."""
    monkeypatch.setattr("apps.webhooks.drain_queue.async_task", lambda *args, **kwargs: None)


def drain_all(turns: int = 40) -> None:
    for _ in range(turns):
        token, ids = engine.claim_batch()
        if not ids:
            return
        engine.attempt_batch(token, ids, deadline=engine.drain_deadline())
    raise AssertionError("deliveries still due")


def test_a_catch_up_it_cannot_serve_says_gap_and_the_watermark_moves_past(webhook_settings, receiver, queued, alice):
    if connection.vendor != "postgresql":
        pytest.skip("nothing is ever owed with one writer at a time (SQLite): the race needs two")
    receiver.verification = "echo"
    principal = authenticate_bearer(f"Bearer {factories.api_key(alice, factories.ALL_SCOPES)}")
    secret = new_secret()
    # More events than a catch-up queues, all in one transaction open while the subscription
    # commits. (Whoever runs the catch-up, this process or a live server's sweeper, skips them.)
    held = Holder(alice.workspace.id, events_delivery.CATCH_UP_MAX + 1, script=MANY, env=server_env(**LIVE_ENV))
    result = events_extension.answer("events/subscribe", subscribe_params(receiver.url, secret), principal)
    assert events_delivery.catch_up(result["id"]) == "waiting"  # their transaction is still open
    held.commit()
    [event] = held.event_ids  # the first of them
    assert after_cursor(result["cursor"], event)

    def caught_up() -> bool:
        events_delivery.catch_up_owed()  # the sweep's part (a live server's sweeper may do it first)
        return not WebhookEndpoint.objects.get(pk=result["id"]).catch_up_after

    wait_until(caught_up)
    drain_all()
    wait_until(lambda: receiver.of_type("gap"))
    [gap] = receiver.of_type("gap")
    standardwebhooks.Webhook(secret).verify(gap.body, gap.headers)
    assert set(gap.json) == {"type", "cursor"}
    assert gap.headers["webhook-id"].startswith("msg_gap_")
    assert gap.headers["X-MCP-Subscription-Id"] == result["id"]
    # The fresh cursor is past the skipped event, which is not sent; the watermark moves on too.
    assert not after_cursor(gap.json["cursor"], event)
    assert not receiver.of_type(None)
    wait_until(lambda: not after_cursor(events_delivery.cursor_of(result["id"]), event))


def test_the_watermark_holds_at_an_owed_catch_up(alice):
    """While a catch-up is owed, no cursor passes its start, however far the log has settled."""
    session = factories.session(alice.workspace, label="Settled")
    event = Event.objects.get(session_id=session.id, type="session.created")
    start = positions.Position(1, "", 0)
    endpoint = WebhookEndpoint(id="wh_mcp_held", catch_up_after=positions.encode_position(start))
    # (PostgreSQL: the log settles past the event once no older transaction runs on the server.)
    wait_until(lambda: watermark.current(WebhookEndpoint(id="wh_mcp_free")).key() >= (event.position, event.id))
    assert watermark.current(endpoint) == start
