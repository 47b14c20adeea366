"""What the Events extension tells a webhook subscriber about its deliveries, end to end on a live
`serve` (daphne + the django-q2 cluster and sweeper that drain deliveries) and
tests/webhooks/receiver.py's receiver, every Standard Webhooks signature checked here with the
client's secret: `deliveryStatus` in a refresh, suspension after sustained failure (lifted by the
next refresh, which resumes the held deliveries), and the signed `terminated` envelope when the
credential that subscribed is revoked (the subscription then no longer exists)."""

from __future__ import annotations

import base64
import os
from datetime import datetime

import httpx
import pytest
import standardwebhooks

from apps.access.credentials import authenticate_bearer
from apps.events.models import Event
from apps.mcp import events_delivery
from apps.tenancy import services as tenancy
from apps.tenancy.models import ApiKey
from apps.webhooks import services
from apps.webhooks.models import Delivery, WebhookEndpoint
from tests import factories
from tests.webhooks.conftest import fresh_process_caches, wait_until, webhook_settings  # noqa: F401
from tests.webhooks.receiver import Receiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

MODERN = "2026-07-28"


def new_secret() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


def rpc(base: str, key: str, method: str, params: dict) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": MODERN, "Accept": "application/json",
               "Mcp-Method": method}
    params = {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                  "io.modelcontextprotocol/clientCapabilities": {}}}
    return httpx.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                      headers=headers, timeout=60)


def subscribe(base: str, key: str, url: str, secret: str) -> dict:
    params = {"name": "session.created", "arguments": {},
              "delivery": {"mode": "webhook", "url": url, "secret": secret}, "ttlMs": 3_600_000}
    return rpc(base, key, "events/subscribe", params).json()["result"]


def status_when(base: str, key: str, url: str, secret: str, wanted) -> dict | None:
    """A refresh's `deliveryStatus` if `wanted(status)`, else None (to poll with wait_until)."""
    status = subscribe(base, key, url, secret)["deliveryStatus"]
    return status if wanted(status) else None


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.fixture
def callback(webhook_server):
    r = Receiver(f"{webhook_server.url}/.well-known/webhook-signing-keys.json", verification="echo", path="/hooks/")
    yield r
    r.close()


def event_of(session) -> str:
    return Event.objects.get(session_id=session.id, type="session.created").id


def test_a_refresh_reports_delivery_and_lifts_a_suspension_after_sustained_failure(
        webhook_server, webhook_settings, callback, alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    secret = new_secret()
    base = webhook_server.url
    first = subscribe(base, key, callback.url, secret)
    assert "deliveryStatus" not in first  # a new subscription: nothing to report yet
    assert subscribe(base, key, callback.url, secret)["deliveryStatus"] == {
        "active": True, "lastDeliveryAt": None, "lastError": None}

    fine = factories.session(alice.workspace, label="Fine")
    [delivered] = callback.wait_for_events(1)
    assert delivered.json["eventId"] == event_of(fine)
    # (The attempt is written once the receiver has answered: a refresh may come a moment before.)
    healthy = wait_until(lambda: status_when(base, key, callback.url, secret, lambda s: s["lastDeliveryAt"]))
    assert healthy["active"] is True and healthy["lastError"] is None and "failedSince" not in healthy
    last_delivery = at(healthy["lastDeliveryAt"])

    # Every attempt fails from now on: past the rule (at least 100 attempts in the hour, more
    # than 95 % of them failed) delivery is suspended.
    callback.behaviour = lambda n: 503
    rule = events_delivery.SUSPEND
    for i in range(rule.min_attempts // 7 + 1):  # seven attempts each with the test's schedule
        factories.session(alice.workspace, label=f"Failing {i}")
    wait_until(lambda: WebhookEndpoint.objects.get(pk=first["id"]).suspended_at is not None, timeout=180)

    # Held: a later event is queued but not attempted, while the drains go on for others (a REST
    # endpoint of the same receiver gets it).
    principal = authenticate_bearer(f"Bearer {key}")
    services.create_endpoint(principal=principal, name="rest", url=f"{callback.base}/rest",
                             filters=[{"type": "session.created"}])
    callback.by_path["/rest"] = 204
    held = factories.session(alice.workspace, label="Held")
    wait_until(lambda: any(r.path == "/rest" and event_of(held).encode() in r.body for r in callback.requests))
    mine = Delivery.objects.get(endpoint_id=first["id"], event_id=event_of(held))
    assert (mine.status, mine.attempt_count) == ("pending", 0)

    # The refresh says so, with the category only, and lifts it: the held deliveries resume.
    callback.behaviour = lambda n: 204
    status = subscribe(base, key, callback.url, secret)["deliveryStatus"]
    assert status["active"] is False and status["lastError"] == "http_5xx"
    assert at(status["lastDeliveryAt"]) == last_delivery <= at(status["failedSince"])
    assert set(status) == {"active", "lastDeliveryAt", "lastError", "failedSince"}
    wait_until(lambda: any(r.json.get("eventId") == event_of(held) for r in callback.of_type(None)))
    [resumed] = [r for r in callback.of_type(None) if r.json["eventId"] == event_of(held)]
    standardwebhooks.Webhook(secret).verify(resumed.body, resumed.headers)
    endpoint = WebhookEndpoint.objects.get(pk=first["id"])
    assert endpoint.suspended_at is None and endpoint.resumed_at is not None
    again = wait_until(lambda: status_when(base, key, callback.url, secret, lambda s: s["lastError"] is None))
    assert again["active"] is True and at(again["lastDeliveryAt"]) > last_delivery


def test_a_revoked_credential_ends_the_subscription_with_a_signed_terminated_envelope(
        webhook_server, webhook_settings, callback, alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    secret = new_secret()
    result = subscribe(webhook_server.url, key, callback.url, secret)
    api_key = ApiKey.objects.get(pk=authenticate_bearer(f"Bearer {key}").credential_id)
    tenancy.revoke_api_key(api_key=api_key)

    [terminated] = wait_until(lambda: callback.of_type("terminated"))
    standardwebhooks.Webhook(secret).verify(terminated.body, terminated.headers)
    assert terminated.headers["X-MCP-Subscription-Id"] == result["id"]
    assert terminated.headers["webhook-id"].startswith("msg_terminated_")
    error = terminated.json["error"]
    assert set(terminated.json) == {"type", "error"}
    assert error["code"] == -32012 and error["message"] == "Forbidden" and error["data"]["reason"]
    # It no longer exists server-side: nothing is queued for it, and the revoked key is refused.
    wait_until(lambda: WebhookEndpoint.objects.get(pk=result["id"]).deleted_at is not None)
    factories.session(alice.workspace, label="After")
    assert not Delivery.objects.filter(endpoint_id=result["id"], status="pending").exists()
    assert rpc(webhook_server.url, key, "events/subscribe", {}).status_code == 401
