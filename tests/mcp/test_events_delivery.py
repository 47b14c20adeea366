"""What an Events extension subscription's deliveries carry, drained in this process (the test runs
each drain turn itself) against tests/webhooks/receiver.py's real receiver, which answers the
verification handshake and checks every `Svc-Signature`; the Standard Webhooks signature is
checked here with the `standardwebhooks` library and the secret the client chose.
`X-MCP-Subscription-Id` on every attempt of a subscription and never on a REST endpoint's; 410 and
413 final for that delivery, the subscription going on; the watermark `cursor`; a resuming
subscribe's replay."""

from __future__ import annotations

import base64
import os

import pytest
import standardwebhooks

from apps.access.credentials import authenticate_bearer
from apps.events import positions
from apps.events.models import Event
from apps.mcp import events_extension
from apps.mcp.events_extension import EventsError
from apps.webhooks import delivery as engine
from apps.webhooks import services
from apps.webhooks.models import Delivery, WebhookEndpoint
from tests import factories
from tests.webhooks.conftest import (  # noqa: F401
    fresh_process_caches,
    jwks_server,
    receiver,
    staff,
    wait_until,
    webhook_settings,
)
from tests.webhooks.receiver import Received

# Committed rows, as a server sees them: log positions are those of separate transactions.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def queued(monkeypatch):
    """Drains are run by the test itself: nothing goes on django-q2."""
    monkeypatch.setattr("apps.webhooks.drain_queue.async_task", lambda *args, **kwargs: None)


@pytest.fixture
def callback(receiver):
    receiver.verification = "echo"
    return receiver


@pytest.fixture
def principal(alice):
    return authenticate_bearer(f"Bearer {factories.api_key(alice, factories.ALL_SCOPES)}")


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def drain_all(turns: int = 40) -> None:
    """Drain turns (one claim and its batch each) until nothing is due."""
    for _ in range(turns):
        token, ids = engine.claim_batch()
        if not ids:
            return
        engine.attempt_batch(token, ids, deadline=engine.drain_deadline())
    raise AssertionError("deliveries still due")


def subscribe(principal, url: str, secret: str, **extra) -> dict:
    params = {"name": "session.created", "arguments": {},
              "delivery": {"mode": "webhook", "url": url, "secret": secret}, "cursor": None, **extra}
    return events_extension.answer("events/subscribe", params, principal)


def poll(principal, cursor: str) -> list[str]:
    """The event ids `events/poll` returns from `cursor` on (every page)."""
    found = []
    while True:
        page = events_extension.answer("events/poll", {"name": "session.created", "cursor": cursor}, principal)
        found += [e["eventId"] for e in page["events"]]
        if not page["hasMore"]:
            return found
        cursor = page["cursor"]


def event_of(session) -> Event:
    return Event.objects.get(session_id=session.id, type="session.created")


def verifies(secret: str, request: Received) -> bool:
    standardwebhooks.Webhook(secret).verify(request.body, request.headers)
    return True


def test_every_attempt_names_the_subscription_and_a_rest_endpoints_never_does(
        webhook_settings, callback, queued, alice, principal):
    secret = new_secret()
    subscription = subscribe(principal, callback.url, secret)
    rest = services.create_endpoint(principal=principal, name="rest", url=f"{callback.base}/rest",
                                    filters=[{"type": "session.created"}])
    # Both answer 500 to every attempt: seven attempts each, all of them headed alike.
    callback.behaviour = lambda n: 500
    factories.session(alice.workspace, label="Standup")
    drain_all()

    mine = callback.of_type(None)  # the subscription's occurrences (no handshake)
    theirs = [r for r in callback.requests if r.path == "/rest"]  # REST's bodies (`type` is the event's)
    assert {r.path for r in mine} == {"/hook"}
    assert len(mine) == len(theirs) == 7
    for request in mine:
        assert request.headers["X-MCP-Subscription-Id"] == subscription["id"]
        assert request.verified and verifies(secret, request)
        assert request.json["cursor"].startswith(positions.POSITION_PREFIX)
    for request in theirs:
        assert "X-MCP-Subscription-Id" not in request.headers and request.verified
        assert request.headers["Svc-Webhook-Id"] == rest.id
    # The handshake named it too.
    [handshake] = callback.of_type("verification")
    assert handshake.headers["X-MCP-Subscription-Id"] == subscription["id"]


def test_410_and_413_end_that_delivery_at_once_and_the_subscription_goes_on(
        webhook_settings, callback, queued, alice, principal, staff):
    secret = new_secret()
    subscription = subscribe(principal, callback.url, secret)
    rest = services.create_endpoint(principal=principal, name="rest", url=f"{callback.base}/rest",
                                    filters=[{"type": "session.created"}])
    answers = {b'"Gone"': 410, b'"Big"': 413, b'"Flaky"': 500}

    def answer(number: int) -> int:
        request = callback.requests[number - 1]
        return next((status for label, status in answers.items() if label in request.body), 204)

    callback.behaviour = answer
    sessions = {label: factories.session(alice.workspace, label=label) for label in ("Gone", "Big", "Flaky", "Fine")}
    drain_all()

    def outcome(label: str, endpoint_id: str) -> tuple:
        d = Delivery.objects.get(endpoint_id=endpoint_id, event_id=event_of(sessions[label]).id)
        return d.status, d.stop_reason, d.attempt_count, d.last_http_status

    assert outcome("Gone", subscription["id"]) == ("dead_letter", "receiver_gone", 1, 410)
    assert outcome("Big", subscription["id"]) == ("dead_letter", "payload_too_large", 1, 413)
    assert outcome("Flaky", subscription["id"]) == ("dead_letter", "max_attempts", 7, 500)
    assert outcome("Fine", subscription["id"]) == ("succeeded", "", 1, 204)
    # A REST endpoint follows the contract: a 410 or 413 is retried like any non-2xx.
    assert outcome("Gone", rest.id) == ("dead_letter", "max_attempts", 7, 410)
    assert outcome("Big", rest.id) == ("dead_letter", "max_attempts", 7, 413)

    # The subscription itself is unchanged, and delivers the next event.
    endpoint = WebhookEndpoint.objects.get(pk=subscription["id"])
    assert endpoint.active and endpoint.deleted_at is None
    later = factories.session(alice.workspace, label="Later")
    drain_all()
    assert Delivery.objects.get(endpoint_id=subscription["id"], event_id=event_of(later).id).status == "succeeded"

    # The back office says why the delivery stopped.
    gone = Delivery.objects.get(endpoint_id=subscription["id"], event_id=event_of(sessions["Gone"]).id)
    page = staff.get(f"/admin/webhooks/delivery/{gone.id}/change/").content.decode()
    assert "receiver_gone: the receiver answered 410 Gone" in page


def test_a_delivery_carries_a_watermark_that_never_passes_an_unacknowledged_event(
        webhook_settings, callback, queued, alice, principal):
    secret = new_secret()
    subscription = subscribe(principal, callback.url, secret)
    start = subscription["cursor"]
    assert poll(principal, start) == []  # the answer's cursor is "now"
    callback.behaviour = lambda n: 500 if b'"Held"' in callback.requests[n - 1].body else 204
    held = factories.session(alice.workspace, label="Held")
    after = factories.session(alice.workspace, label="After")

    # A drain turn attempts Held (refused: to be retried) and After (taken). On a loaded machine
    # the turn may reach its deadline after Held; the next one takes After, Held refused again
    # (three attempts of its seven at most: still owed).
    for _ in range(3):
        token, ids = engine.claim_batch()
        engine.attempt_batch(token, ids, deadline=engine.drain_deadline())
        if any(b'"After"' in r.body for r in callback.of_type(None)):
            break
    [taken] = [r for r in callback.of_type(None) if b'"After"' in r.body]
    assert taken.json["eventId"] == event_of(after).id and verifies(secret, taken)
    # Its cursor stops short of Held, which the receiver has not taken: resuming from it, a
    # client reads Held (and After again, which it deduplicates by id).
    mark = positions.decode_position(taken.json["cursor"])
    assert mark.key() < (event_of(held).position, event_of(held).id)
    both = [event_of(held).id, event_of(after).id]
    # (events/poll hands out an event once the log has settled past it: on PostgreSQL a moment
    # after its commit while any other transaction on the server is open.)
    wait_until(lambda: poll(principal, taken.json["cursor"]) == both, timeout=30)
    # A refresh answers the same watermark: still short of Held.
    wait_until(lambda: poll(principal, subscribe(principal, callback.url, secret)["cursor"]) == both, timeout=30)

    # Held runs out of attempts: abandoned, the watermark passes it. (It never passes the log's
    # settled end, which a transaction open elsewhere on the server may hold back for a moment:
    # so "eventually".)
    drain_all()
    assert Delivery.objects.get(endpoint_id=subscription["id"], event_id=event_of(held).id).status == "dead_letter"
    last = factories.session(alice.workspace, label="Last")
    drain_all()
    [delivered] = [r for r in callback.of_type(None) if b'"Last"' in r.body]
    assert delivered.json["eventId"] == event_of(last).id
    assert positions.decode_position(delivered.json["cursor"]).key() <= (event_of(last).position, event_of(last).id)
    refreshed = wait_until(lambda: (lambda r: poll(principal, r["cursor"]) == [] and r)(
        subscribe(principal, callback.url, secret)), timeout=30)
    assert refreshed["truncated"] is False


def test_a_subscribe_that_starts_from_a_cursor_replays_what_followed_it(
        webhook_settings, callback, queued, alice, principal):
    secret = new_secret()
    start = events_extension.answer("events/poll", {"name": "session.created", "cursor": None}, principal)["cursor"]
    missed = factories.session(alice.workspace, label="Missed")
    first = subscribe(principal, callback.url, secret, cursor=start)
    assert first["truncated"] is False
    drain_all()
    [replayed] = callback.of_type(None)
    assert replayed.json["eventId"] == event_of(missed).id and verifies(secret, replayed)
    assert replayed.headers["X-MCP-Subscription-Id"] == first["id"]

    # A live subscription is at or past its client's cursor: a refresh with it replays nothing.
    subscribe(principal, callback.url, secret, cursor=start)
    assert Delivery.objects.filter(endpoint_id=first["id"]).count() == 1

    # Lapsed (unsubscribed), then resumed with `maxAgeMs` under the events' age: skipped, said.
    events_extension.answer("events/unsubscribe", {"name": "session.created", "arguments": {},
                                                   "delivery": {"url": callback.url}}, principal)
    factories.session(alice.workspace, label="While away")
    again = subscribe(principal, callback.url, secret, cursor=start, maxAgeMs=0)
    assert again["truncated"] is True
    assert Delivery.objects.filter(endpoint_id=first["id"]).count() == 1

    with pytest.raises(EventsError) as refused:
        subscribe(principal, callback.url, secret, cursor="evt_not-a-cursor")
    assert refused.value.code == -32602 and "params.cursor" in refused.value.message
