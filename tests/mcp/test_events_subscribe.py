"""The Events extension's webhook delivery, end to end: `events/subscribe` on a live `serve`
(daphne + the django-q2 cluster that drains webhook deliveries) to a real receiver in this
process, which answers the verification handshake and checks every request's Standard Webhooks
signature with the unmodified `standardwebhooks` library from PyPI. Events are recorded the way
the service records them (apps/recordings/services), in this process, and delivered by the
server's workers. Tenancy, scopes, refusals (SSRF, https, the secret), TTL expiry and refresh."""

from __future__ import annotations

import base64
import dataclasses
import os
import time
from datetime import datetime, timedelta, timezone

import httpx
import pytest
import standardwebhooks
from standardwebhooks.webhooks import WebhookVerificationError

from apps.mcp import events_webhooks
from apps.recordings import services
from apps.webhooks.models import Delivery, WebhookEndpoint
from tests import factories
from tests.webhooks.conftest import fresh_process_caches, webhook_settings, wait_until  # noqa: F401
from tests.webhooks.receiver import Received, Receiver

# Live servers, a task cluster and real deliveries: generous on a busy machine, never timed.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

MODERN, LEGACY = "2026-07-28", "2025-11-25"
HOUR_MS = 3_600_000


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def callback_receiver(server, verification: str = "echo") -> Receiver:
    """tests/webhooks/receiver.py's receiver, answering the handshake; it checks each delivery's
    `Svc-Signature` against the live server's key set as it does for REST's endpoints."""
    return Receiver(f"{server.url}/.well-known/webhook-signing-keys.json", verification=verification,
                    path="/hooks/")


@pytest.fixture
def callback(webhook_server):
    receiver = callback_receiver(webhook_server)
    yield receiver
    receiver.close()


def verifies(secret: str, request: Received) -> bool:
    try:
        standardwebhooks.Webhook(secret).verify(request.body, request.headers)
        return True
    except WebhookVerificationError:
        return False


def rpc(base: str, key: str, method: str, params: dict, version: str = MODERN) -> dict:
    headers = {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": version, "Accept": "application/json"}
    params = dict(params)
    if version == MODERN:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientCapabilities": {}}
        headers["Mcp-Method"] = method
    response = httpx.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                          headers=headers, timeout=30)
    return response.json()


def subscribe_params(url: str, secret: str, name: str = "session.created", arguments: dict | None = None,
                     **extra) -> dict:
    return {"name": name, "arguments": arguments or {}, "delivery": {"mode": "webhook", "url": url, "secret": secret},
            "cursor": None, **extra}


def poll_until(base: str, key: str, cursor: str, event_id: str, version: str) -> dict:
    """Follow `events/poll` from `cursor` as a client does (the log hands out an event once it is
    settled, which on PostgreSQL may be a moment after its commit) until `event_id` comes."""
    found: list[dict] = []

    def step():
        nonlocal cursor
        page = rpc(base, key, "events/poll", {"name": "session.created", "cursor": cursor}, version)["result"]
        cursor = page["cursor"]
        found.extend(e for e in page["events"] if e["eventId"] == event_id)
        return found

    return wait_until(step, interval=0.25)[0]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.parametrize("version", [MODERN, LEGACY])
def test_subscribe_verifies_delivers_signed_occurrences_and_a_refresh_rotates_the_secret(
        webhook_server, webhook_settings, callback, alice, bob, version):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    secret = new_secret()
    start = rpc(webhook_server.url, key, "events/poll", {"name": "session.created", "cursor": None},
                version)["result"]["cursor"]
    asked = datetime.now(timezone.utc)
    result = rpc(webhook_server.url, key, "events/subscribe",
                 subscribe_params(callback.url, secret, ttlMs=HOUR_MS), version)["result"]
    assert result["id"].startswith("wh_mcp") and result["truncated"] is False
    assert result["cursor"].startswith("pos_")  # the watermark: nothing delivered yet, so "now"
    assert asked < at(result["refreshBefore"]) <= datetime.now(timezone.utc) + timedelta(hours=1)
    # Stored in columns: an endpoint the MCP door owns, its grant, its own filter.
    row = WebhookEndpoint.objects.get(pk=result["id"])
    assert (row.owner, row.filters) == ("mcp", [{"type": "session.created"}])
    assert row.expires_at == at(result["refreshBefore"])
    # REST's webhooks API does not show it (its owner's wire does): not listed, 404 to read.
    rest = {"Authorization": f"Bearer {key}"}
    listed = httpx.get(f"{webhook_server.url}/api/v1/webhooks", headers=rest, timeout=30).json()["items"]
    assert result["id"] not in [e["id"] for e in listed]
    assert httpx.get(f"{webhook_server.url}/api/v1/webhooks/{result['id']}", headers=rest,
                     timeout=30).status_code == 404

    # The handshake came first, signed with the client's secret and naming the subscription.
    [handshake] = callback.of_type("verification")
    assert handshake.headers["X-MCP-Subscription-Id"] == result["id"]
    assert handshake.headers["webhook-id"].startswith("msg_verification_") and verifies(secret, handshake)

    # Tenancy: bob's workspace records a session too; only alice's reaches alice's subscription.
    factories.session(bob.workspace, label="Not yours")
    session = factories.session(alice.workspace, label="Standup")
    [delivered] = callback.wait_for_events(1)
    body = delivered.json
    assert set(body) == {"eventId", "name", "timestamp", "data", "cursor"}
    assert body["name"] == "session.created" and body["data"]["sessionId"] == session.id
    assert delivered.headers["webhook-id"] == body["eventId"] and body["eventId"].startswith("evt_")
    assert delivered.headers["X-MCP-Subscription-Id"] == delivered.headers["Svc-Webhook-Id"] == result["id"]
    assert verifies(secret, delivered) and delivered.verified  # both signatures, the contract's too
    # Its cursor is the subscription's watermark: at most just past this event (the receiver holds
    # it once it answers), short of it while an older transaction was still open; never further.
    resumed = rpc(webhook_server.url, key, "events/poll", {"name": "session.created", "cursor": body["cursor"]},
                  version)["result"]["events"]
    assert [e["eventId"] for e in resumed] in ([], [body["eventId"]])
    tampered = dataclasses.replace(delivered, body=delivered.body.replace(b"Standup", b"Standby"))
    assert not verifies(secret, tampered)
    # The occurrence is the one events/poll reads from the log: same id, time and data.
    polled = poll_until(webhook_server.url, key, start, body["eventId"], version)
    assert {k: body[k] for k in ("eventId", "name", "timestamp", "data")} == polled

    # Refresh: same key, a new secret. Same id, a fresh grant, no second handshake; the old
    # secret signs beside the new one for the rotation's grace.
    rotated = new_secret()
    again = rpc(webhook_server.url, key, "events/subscribe",
                subscribe_params(callback.url, rotated, ttlMs=HOUR_MS), version)["result"]
    assert again["id"] == result["id"] and at(again["refreshBefore"]) >= at(result["refreshBefore"])
    assert len(callback.of_type("verification")) == 1
    retro = factories.session(alice.workspace, label="Retro")
    second = callback.wait_for_events(2)[1]
    assert second.json["data"]["sessionId"] == retro.id
    assert verifies(rotated, second) and verifies(secret, second)
    assert len(second.headers["webhook-signature"].split(" ")) == 2
    assert len(callback.of_type(None)) == 2  # nothing of bob's

    # Unsubscribe stops deliveries at once; a second one finds nothing.
    ended = rpc(webhook_server.url, key, "events/unsubscribe", {
        "name": "session.created", "arguments": {}, "delivery": {"url": callback.url}}, version)
    assert "error" not in ended and "result" in ended
    before = Delivery.objects.filter(endpoint_id=result["id"]).count()
    factories.session(alice.workspace, label="After")
    assert Delivery.objects.filter(endpoint_id=result["id"]).count() == before
    gone = rpc(webhook_server.url, key, "events/unsubscribe", {
        "name": "session.created", "arguments": {}, "delivery": {"url": callback.url}}, version)["error"]
    assert gone["code"] == -32011 and gone["data"] == {"kind": "subscription"}



def test_arguments_narrow_to_one_session_and_the_key_separates_subscriptions(
        webhook_server, webhook_settings, callback, alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    watched = factories.session(alice.workspace, label="Watched")
    other = factories.session(alice.workspace, label="Other")
    secret = new_secret()
    one = rpc(webhook_server.url, key, "events/subscribe", subscribe_params(
        callback.url, secret, name="session.status_changed", arguments={"sessionId": watched.id}))["result"]
    every = rpc(webhook_server.url, key, "events/subscribe", subscribe_params(
        callback.url, secret, name="session.status_changed"))["result"]
    assert one["id"] != every["id"]
    assert WebhookEndpoint.objects.get(pk=one["id"]).filters == [{"type": "session.status_changed",
                                                                  "sessionId": watched.id}]
    assert WebhookEndpoint.objects.get(pk=every["id"]).filters == [{"type": "session.status_changed"}]
    assert len(callback.of_type("verification")) == 1  # one handshake per (principal, url)

    services.change_session_status(session=other, status="completed")
    services.change_session_status(session=watched, status="completed")
    delivered = callback.wait_for_events(3)
    time.sleep(1)
    by_subscription = {}
    for request in callback.of_type(None):
        assert verifies(secret, request)
        by_subscription.setdefault(request.headers["X-MCP-Subscription-Id"], []).append(
            request.json["data"]["sessionId"])
    assert by_subscription[one["id"]] == [watched.id]
    assert sorted(by_subscription[every["id"]]) == sorted([other.id, watched.id])
    assert len(delivered) == 3

    # Another key of the same member is another principal: its own subscription, its own
    # handshake. No expiry (`ttlMs: null`) and a month are both granted a finite day.
    second_key = factories.api_key(alice, factories.ALL_SCOPES)
    for ttl in (None, 30 * 24 * HOUR_MS):
        granted = rpc(webhook_server.url, second_key, "events/subscribe", subscribe_params(
            callback.url, secret, name="session.status_changed", ttlMs=ttl))["result"]
        assert granted["id"] not in (one["id"], every["id"])
        assert granted["refreshBefore"] is not None
        assert at(granted["refreshBefore"]) <= datetime.now(timezone.utc) + events_webhooks.MAX_TTL
    assert len(callback.of_type("verification")) == 2


def test_an_expired_subscription_stops_and_a_subscribe_revives_it(webhook_server, webhook_settings, callback, alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    secret = new_secret()
    asked = datetime.now(timezone.utc)
    # Too short a suggestion is clamped up to the floor, not refused.
    granted = rpc(webhook_server.url, key, "events/subscribe",
                  subscribe_params(callback.url, secret, ttlMs=1))["result"]
    until = at(granted["refreshBefore"])
    assert asked + events_webhooks.MIN_TTL <= until <= datetime.now(timezone.utc) + events_webhooks.MIN_TTL
    wait_until(lambda: datetime.now(timezone.utc) > until + timedelta(milliseconds=50), timeout=60)

    # Past its grant: an event queues nothing for it, even before the periodic task runs.
    factories.session(alice.workspace, label="Too late")
    assert not Delivery.objects.filter(endpoint_id=granted["id"]).exists()
    assert events_webhooks.expire_subscriptions() == 1  # the every-minute task's body
    assert WebhookEndpoint.objects.get(pk=granted["id"]).deleted_at is not None
    gone = rpc(webhook_server.url, key, "events/unsubscribe", {
        "name": "session.created", "arguments": {}, "delivery": {"url": callback.url}})["error"]
    assert gone["code"] == -32011

    # Subscribing again revives it under the same id, after a new handshake.
    revived = rpc(webhook_server.url, key, "events/subscribe",
                  subscribe_params(callback.url, secret, ttlMs=HOUR_MS))["result"]
    assert revived["id"] == granted["id"] and len(callback.of_type("verification")) == 2
    factories.session(alice.workspace, label="Back")
    [delivered] = callback.wait_for_events(1)
    assert verifies(secret, delivered) and delivered.json["name"] == "session.created"


@pytest.mark.parametrize(("mode", "reason"), [("ignore", "challenge_failed"), ("fail", "http_5xx")])
def test_a_callback_that_does_not_confirm_is_refused_with_the_category(webhook_server, webhook_settings, alice,
                                                                        mode, reason):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    receiver = callback_receiver(webhook_server, mode)
    try:
        error = rpc(webhook_server.url, key, "events/subscribe", subscribe_params(receiver.url, new_secret()))["error"]
    finally:
        receiver.close()
    assert error["code"] == -32015 and error["data"] == {"reason": reason}
    assert not WebhookEndpoint.objects.filter(id__startswith="wh_mcp").exists()


def test_an_unreachable_callback_is_refused(webhook_server, webhook_settings, alice):
    receiver = callback_receiver(webhook_server)
    url = receiver.url
    receiver.close()  # nothing listens there any more
    key = factories.api_key(alice, factories.ALL_SCOPES)
    error = rpc(webhook_server.url, key, "events/subscribe", subscribe_params(url, new_secret()))["error"]
    assert error["code"] == -32015 and error["data"] == {"reason": "connection_refused"}


@pytest.fixture
def plain(live_server_daphne, transactional_db, alice):
    """A server with the SSRF rules as in production (no private receivers)."""
    return {"url": live_server_daphne.url, "key": factories.api_key(alice, factories.ALL_SCOPES), "alice": alice}


@pytest.mark.parametrize("url", [
    "https://127.0.0.1/hook", "https://10.1.2.3/hook", "https://169.254.169.254/latest", "https://[::1]/hook",
    "https://[::ffff:192.168.0.1]/hook", "https://localhost/hook", "https://2130706433/hook",
])
def test_a_private_callback_is_refused_before_anything_is_sent(plain, url):
    error = rpc(plain["url"], plain["key"], "events/subscribe", subscribe_params(url, new_secret()))["error"]
    assert error["code"] == -32602 and error["message"].startswith("params.delivery.url")
    assert not WebhookEndpoint.objects.filter(id__startswith="wh_mcp").exists()


@pytest.mark.parametrize(("change", "code", "words"), [
    ({"delivery": {"mode": "webhook", "url": "http://example.com/hook", "secret": None}}, -32602, "https"),
    ({"delivery": {"mode": "webhook", "url": "https://example.com/hook"}}, -32602, "secret"),
    ({"delivery": {"mode": "webhook", "url": "https://example.com/hook", "secret": "not-a-secret"}}, -32602, "secret"),
    ({"delivery": {"mode": "webhook", "url": "https://example.com/hook",
                   "secret": "whsec_" + base64.b64encode(b"x" * 8).decode()}}, -32602, "24 to 64"),
    ({"arguments": {"unknown": 1}}, -32602, "params.arguments"),
    ({"ttlMs": "an hour"}, -32602, "ttlMs"),
    ({"name": "transcript.segment.created", "arguments": {"sessionId": "x"}}, -32014, "poll delivery only"),
    ({"name": "meeting.exploded"}, -32011, "Unknown event type"),
])
def test_malformed_subscriptions_are_refused(plain, change, code, words):
    params = subscribe_params("https://example.com/hook", new_secret())
    params.update(change)
    if params["delivery"].get("secret", "") is None:
        params["delivery"]["secret"] = new_secret()
    error = rpc(plain["url"], plain["key"], "events/subscribe", params)["error"]
    assert error["code"] == code and words in error["message"], error


def test_scopes_as_on_the_stream(plain):
    transcripts_only = factories.api_key(plain["alice"], ["svc:transcripts:read"])
    error = rpc(plain["url"], transcripts_only, "events/subscribe",
                subscribe_params("https://example.com/hook", new_secret()))["error"]
    assert error["code"] == -32012 and error["data"]["scope"] == "svc:sessions:read"
