"""Endpoints and deliveries API (docs/api/webhooks.md): records, status codes,
validation, scopes, and another workspace's rows answering 404 to every operation."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.webhooks import services
from apps.webhooks.models import Delivery, DeliveryStatus
from tests import factories

URL = "https://hooks.example.com/connect"
# What a refusal the development flag would lift says to set (issue 23: not a bare 400).
HINT = ("; a receiver on this machine or a private network needs the server started with "
        "CONNECT_WEBHOOKS_ALLOW_PRIVATE=1 (development only; `make run` sets it)")
FILTERS = [{"type": "session.status_changed", "status": ["completed"]}]


@pytest.fixture(autouse=True)
def public_dns(monkeypatch):
    """hooks.example.com resolves to a public address; evil.example.com to a private one."""
    answers = {"hooks.example.com": ["93.184.216.34"], "evil.example.com": ["93.184.216.34", "10.0.0.5"]}

    def resolve(host, port):
        if host not in answers:
            raise OSError("no such host")
        return answers[host]

    monkeypatch.setattr("apps.webhooks.outbound.resolve", resolve)


class Http:
    def __init__(self, key: str):
        self.client, self.key = Client(), key

    def call(self, method: str, path: str, body=None, content_type="application/json", raw=None):
        data = raw if raw is not None else (json.dumps(body) if body is not None else "")
        return getattr(self.client, method)(
            path, data, content_type=content_type, headers={"Authorization": f"Bearer {self.key}"}
        ) if method != "get" else self.client.get(path, body or {}, headers={"Authorization": f"Bearer {self.key}"})


@pytest.fixture
def alice_http(alice):
    return Http(factories.api_key(alice, factories.ALL_SCOPES))


@pytest.fixture
def bob_http(bob):
    return Http(factories.api_key(bob, factories.ALL_SCOPES))


def create(http: Http, **overrides):
    body = {"name": "ready", "url": URL, "filters": FILTERS, **overrides}
    return http.call("post", "/api/v1/webhooks", body)


def test_create_returns_201_with_the_record(alice_http):
    response = create(alice_http)
    assert response.status_code == 201
    record = response.json()
    assert record["id"].startswith("wh_")
    assert set(record) == {"id", "name", "url", "filters", "active", "disabledReason", "signing", "signingSecret",
                           "previousSecretExpiresAt", "createdAt", "updatedAt"}
    assert (record["disabledReason"], record["signing"], record["signingSecret"]) == (None, "svc", None)
    assert record["active"] is True and record["filters"] == FILTERS


def test_list_read_patch_delete(alice_http):
    ids = [create(alice_http, name=f"n{i}").json()["id"] for i in range(3)]
    page = alice_http.call("get", "/api/v1/webhooks", {"limit": "2"}).json()
    assert [e["id"] for e in page["items"]] == ids[::-1][:2]
    rest = alice_http.call("get", "/api/v1/webhooks", {"cursor": page["nextCursor"]}).json()
    assert [e["id"] for e in rest["items"]] == [ids[0]] and rest["nextCursor"] is None
    assert alice_http.call("get", f"/api/v1/webhooks/{ids[0]}").json()["name"] == "n0"
    patched = alice_http.call("patch", f"/api/v1/webhooks/{ids[0]}", {"name": "renamed", "active": False})
    assert patched.status_code == 200 and patched.json()["name"] == "renamed" and patched.json()["active"] is False
    assert alice_http.call("delete", f"/api/v1/webhooks/{ids[0]}").status_code == 204
    assert alice_http.call("get", f"/api/v1/webhooks/{ids[0]}").status_code == 404


NOT_TEXT = "body: must be JSON text (UTF-8, no U+0000, no lone surrogate)"
FILTER_TYPES = "must be one of session.created, session.status_changed"


@pytest.mark.parametrize(
    "raw,content_type,detail",
    [
        ("{not json", "application/json", NOT_TEXT),
        ("[]", "application/json", "body: must be a JSON object"),
        (json.dumps({"name": "x", "url": URL, "filters": FILTERS}), "text/plain",
         "Content-Type: must be application/json"),
        (json.dumps({"name": "x", "url": URL, "filters": FILTERS}), "application/x-www-form-urlencoded",
         "Content-Type: must be application/json"),
        (json.dumps({"name": "x", "url": URL, "filters": FILTERS, "secret": "s"}), "application/json",
         "body: unknown field; the fields are filters, name, signing, url"),
        (json.dumps({"name": "x", "url": URL}), "application/json", "filters: required"),
        (json.dumps({"name": "", "url": URL, "filters": FILTERS}), "application/json",
         "name: must be a non-blank string of at most 200 characters"),
        (json.dumps({"name": "x", "url": URL, "filters": [{"type": "transcript.segment.created", "sessionId": "s"}]}),
         "application/json", f"filters[0].type: {FILTER_TYPES}"),
        (json.dumps({"name": "x", "url": URL, "filters": [{"type": "board.updated"}]}), "application/json",
         f"filters[0].type: {FILTER_TYPES}"),
        (json.dumps({"name": "x", "url": "http://hooks.example.com/", "filters": FILTERS}), "application/json",
         "url: must be https" + HINT),
        (json.dumps({"name": "x", "url": "https://127.0.0.1/", "filters": FILTERS}), "application/json",
         "url: is an address that is loopback" + HINT),
        (json.dumps({"name": "x", "url": "https://evil.example.com/", "filters": FILTERS}), "application/json",
         "url: resolves to an address that is private" + HINT),
        (json.dumps({"name": "x", "url": "https://nowhere.example.com/", "filters": FILTERS}), "application/json",
         "url: its host does not resolve"),
        # Lone surrogates: valid JSON escapes, not text (PostgreSQL answered 500 to these).
        (json.dumps({"name": "x", "url": URL, "filters": [{"type": "session.created", "sessionId": "\ud800"}]}),
         "application/json", NOT_TEXT),
        (json.dumps({"name": "\udfff", "url": URL, "filters": FILTERS}), "application/json", NOT_TEXT),
        # U+0000: text, but no PostgreSQL column or jsonb value holds it (it answered 500).
        (json.dumps({"name": "x", "url": URL, "filters": [{"type": "session.created", "sessionId": "a\u0000"}]}),
         "application/json", NOT_TEXT),
        (json.dumps({"name": "x\u0000", "url": URL, "filters": FILTERS}), "application/json", NOT_TEXT),
        ('{"name": "x", "url": "' + URL + '", "filters": ' + "[" * 100_000 + "]" * 100_000 + "}", "application/json",
         NOT_TEXT),
    ],
)
def test_bad_requests_are_invalid_request(alice_http, raw, content_type, detail):
    response = alice_http.call("post", "/api/v1/webhooks", raw=raw, content_type=content_type)
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_request", "detail": detail}


def test_patch_validates_like_create(alice_http):
    wid = create(alice_http).json()["id"]
    for body in ({"url": "https://10.0.0.1/"}, {"active": "no"}, {"filters": []}, {"id": "wh_x"}):
        assert alice_http.call("patch", f"/api/v1/webhooks/{wid}", body).status_code == 400


def test_scopes(alice):
    read_only = Http(factories.api_key(alice, ["svc:webhooks:read", "svc:sessions:read"]))
    no_sessions = Http(factories.api_key(alice, ["svc:webhooks:read", "svc:webhooks:write"]))
    none = Http(factories.api_key(alice, ["svc:sessions:read"]))
    assert create(read_only).json()["error"] == "insufficient_scope"
    assert create(no_sessions).status_code == 403
    assert none.call("get", "/api/v1/webhooks").status_code == 403
    assert none.call("get", "/api/v1/webhook-deliveries").status_code == 403
    assert read_only.call("get", "/api/v1/webhooks").status_code == 200
    assert Client().get("/api/v1/webhooks").status_code == 401


def make_delivery(endpoint, status=DeliveryStatus.SUCCEEDED, kind="event", terminal_days_ago=0) -> Delivery:
    now = timezone.now()
    terminal = status in (DeliveryStatus.SUCCEEDED, DeliveryStatus.DEAD_LETTER, DeliveryStatus.CANCELLED)
    return Delivery.objects.create(
        workspace_id=endpoint.workspace_id, endpoint=endpoint, event_id="evt_test", event_type="session.created",
        kind=kind, body='{"id":"evt_test"}', status=status, attempt_count=1 if terminal else 0,
        terminal_at=now - timedelta(days=terminal_days_ago) if terminal else None,
        next_attempt_at=None if terminal else now + timedelta(hours=1), created_at=now, updated_at=now,
    )


@pytest.fixture
def endpoint(alice_http):
    from apps.webhooks.models import WebhookEndpoint

    return WebhookEndpoint.objects.get(id=create(alice_http).json()["id"])


def test_another_workspaces_endpoint_and_delivery_are_404_for_every_operation(bob_http, endpoint, monkeypatch):
    monkeypatch.setattr("apps.webhooks.drain_queue.request_drain", lambda: None)
    delivery = make_delivery(endpoint)
    for method, path, body in [
        ("get", f"/api/v1/webhooks/{endpoint.id}", None),
        ("patch", f"/api/v1/webhooks/{endpoint.id}", {"name": "mine"}),
        ("delete", f"/api/v1/webhooks/{endpoint.id}", None),
        ("post", f"/api/v1/webhooks/{endpoint.id}/test", None),
        ("get", f"/api/v1/webhook-deliveries/{delivery.id}", None),
        ("post", f"/api/v1/webhook-deliveries/{delivery.id}/replay", None),
    ]:
        response = bob_http.call(method, path, body)
        assert (response.status_code, response.json()) == (404, {"error": "not_found"}), (method, path)
    assert bob_http.call("get", "/api/v1/webhooks").json()["items"] == []
    assert bob_http.call("get", "/api/v1/webhook-deliveries").json()["items"] == []
    assert bob_http.call("get", "/api/v1/webhook-deliveries", {"endpointId": endpoint.id}).json()["items"] == []


def test_test_delivery_is_202_with_a_test_delivery(alice_http, endpoint, monkeypatch):
    monkeypatch.setattr("apps.webhooks.drain_queue.request_drain", lambda: None)
    response = alice_http.call("post", f"/api/v1/webhooks/{endpoint.id}/test")
    assert response.status_code == 202
    body = response.json()
    assert body["kind"] == "test" and body["status"] == "pending" and body["eventType"] == "webhook.test"
    assert body["id"].startswith("dlv_") and body["eventId"].startswith("evt_")
    assert body["endpointName"] == "ready" and body["endpointUrl"] == URL


def test_replay_rules(alice_http, endpoint, monkeypatch):
    monkeypatch.setattr("apps.webhooks.drain_queue.request_drain", lambda: None)
    dead = make_delivery(endpoint, DeliveryStatus.DEAD_LETTER)
    response = alice_http.call("post", f"/api/v1/webhook-deliveries/{dead.id}/replay")
    assert response.status_code == 202
    replay = response.json()
    assert replay["id"] != dead.id and replay["eventId"] == dead.event_id and replay["status"] == "pending"
    pending = make_delivery(endpoint, DeliveryStatus.PENDING)
    test = make_delivery(endpoint, DeliveryStatus.SUCCEEDED, kind="test")
    for refused in (pending, test):
        response = alice_http.call("post", f"/api/v1/webhook-deliveries/{refused.id}/replay")
        assert (response.status_code, response.json()) == (409, {"error": "not_allowed"})
    alice_http.call("patch", f"/api/v1/webhooks/{endpoint.id}", {"active": False})
    assert alice_http.call("post", f"/api/v1/webhook-deliveries/{dead.id}/replay").status_code == 409


def test_delivery_list_filters_and_read_with_attempts(alice_http, endpoint, monkeypatch):
    monkeypatch.setattr("apps.webhooks.drain_queue.request_drain", lambda: None)
    ok = make_delivery(endpoint, DeliveryStatus.SUCCEEDED)
    dead = make_delivery(endpoint, DeliveryStatus.DEAD_LETTER)
    ok.attempts.create(number=1, started_at=ok.created_at, completed_at=ok.created_at, http_status=204, duration_ms=3)
    listed = alice_http.call("get", "/api/v1/webhook-deliveries").json()["items"]
    assert [d["id"] for d in listed] == [dead.id, ok.id]  # newest first
    assert set(listed[0]) == {
        "id", "eventId", "eventType", "endpointId", "endpointName", "endpointUrl", "kind", "status", "attemptCount",
        "lastHttpStatus", "nextAttemptAt", "terminalAt", "stopReason", "createdAt", "updatedAt",
    }
    by_status = alice_http.call("get", "/api/v1/webhook-deliveries", {"status": "dead_letter"}).json()["items"]
    assert [d["id"] for d in by_status] == [dead.id]
    for query in ({"status": "lost"}, {"kind": "other"}, {"limit": "0"}, {"cursor": "forged"}, {"eventId": ""}):
        assert alice_http.call("get", "/api/v1/webhook-deliveries", query).status_code == 400
    assert alice_http.call("get", "/api/v1/webhook-deliveries", {"eventType": "session.created", "kind": "event",
                                                                  "eventId": "evt_test", "endpointId": endpoint.id}
                           ).json()["items"][0]["id"] == dead.id
    read = alice_http.call("get", f"/api/v1/webhook-deliveries/{ok.id}").json()
    assert read["attempts"] == [{"attemptNumber": 1, "startedAt": read["createdAt"], "completedAt": read["createdAt"],
                                 "httpStatus": 204, "durationMs": 3, "error": None,
                                 "errorDetail": None}]


def test_terminal_deliveries_past_retention_are_404_and_purged_but_active_ones_never(alice_http, endpoint):
    old = make_delivery(endpoint, DeliveryStatus.SUCCEEDED, terminal_days_ago=31)
    recent = make_delivery(endpoint, DeliveryStatus.DEAD_LETTER, terminal_days_ago=29)
    retrying = make_delivery(endpoint, DeliveryStatus.RETRYING)
    Delivery.objects.filter(pk=retrying.pk).update(created_at=timezone.now() - timedelta(days=60))
    assert alice_http.call("get", f"/api/v1/webhook-deliveries/{old.id}").status_code == 404
    assert alice_http.call("post", f"/api/v1/webhook-deliveries/{old.id}/replay").status_code == 404
    assert services.purge_terminal_deliveries() == 1
    assert set(Delivery.objects.values_list("id", flat=True)) == {recent.id, retrying.id}


def test_deleting_or_disabling_an_endpoint_cancels_its_active_deliveries(alice_http, endpoint):
    pending = make_delivery(endpoint, DeliveryStatus.PENDING)
    alice_http.call("patch", f"/api/v1/webhooks/{endpoint.id}", {"active": False})
    pending.refresh_from_db()
    assert (pending.status, pending.stop_reason) == ("cancelled", "endpoint_disabled")
    alice_http.call("patch", f"/api/v1/webhooks/{endpoint.id}", {"active": True})
    retrying = make_delivery(endpoint, DeliveryStatus.RETRYING)
    alice_http.call("delete", f"/api/v1/webhooks/{endpoint.id}")
    retrying.refresh_from_db()
    assert (retrying.status, retrying.stop_reason) == ("cancelled", "endpoint_deleted")


def test_jwks_is_public_cacheable_and_creates_the_first_key(db):
    response = Client().get("/.well-known/webhook-signing-keys.json")
    assert response.status_code == 200
    assert "max-age" in response["Cache-Control"]
    [key] = response.json()["keys"]
    assert {key["kty"], key["crv"], key["use"], key["alg"]} == {"OKP", "Ed25519", "sig", "EdDSA"}
    assert set(key) == {"kty", "crv", "kid", "x", "use", "alg"}


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data", "http://[::ffff:169.254.169.254]/", "http://2852039166/",
    "http://metadata.google.internal/", "http://meta.example.com/", "http://mixed.example.com/",
])
def test_the_development_flag_never_lets_an_endpoint_reach_the_deny_list(alice_http, settings, monkeypatch, url):
    """CONNECT_WEBHOOKS_ALLOW_PRIVATE lifts https-only and the private ranges at create and update
    time, not the deny list: literal addresses in any spelling, denied names, and names that
    resolve to a denied address (the lookup happens with the flag too)."""
    settings.CONNECT_WEBHOOKS_ALLOW_PRIVATE = True
    answers = {"meta.example.com": ["169.254.169.254"], "mixed.example.com": ["10.0.0.5", "fd00:ec2::254"],
               "dev.example.com": ["127.0.0.1"]}
    monkeypatch.setattr("apps.webhooks.outbound.resolve", lambda host, port: answers[host])
    refused = create(alice_http, url=url).json()
    assert refused["error"] == "invalid_request" and refused["detail"].startswith("url: ")
    assert "CONNECT_WEBHOOKS_ALLOW_PRIVATE" not in refused["detail"]
    created = create(alice_http, url="http://dev.example.com:8000/hook")
    assert created.status_code == 201, created.content
    patched = alice_http.call("patch", f"/api/v1/webhooks/{created.json()['id']}", {"url": url})
    assert (patched.status_code, patched.json()["error"]) == (400, "invalid_request")
    assert patched.json()["detail"].startswith("url: ")


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data", "https://169.254.169.254/",
                                 "https://metadata.google.internal/", "https://[fe80::1]/"])
def test_the_development_hint_is_never_given_for_what_the_flag_does_not_lift(alice_http, url):
    """Flag off: the deny list and link-local are refused without pointing at the flag, which
    would not help."""
    refused = create(alice_http, url=url)
    assert refused.status_code == 400
    assert "CONNECT_WEBHOOKS_ALLOW_PRIVATE" not in refused.json()["detail"]


def test_the_hinted_setting_is_what_lets_a_loopback_receiver_in(alice_http, settings):
    """The refusal's advice, followed, works: the same request with the flag on is 201."""
    refused = create(alice_http, url="http://127.0.0.1:9000/hook")
    assert refused.json() == {"error": "invalid_request", "detail": "url: must be https" + HINT}
    settings.CONNECT_WEBHOOKS_ALLOW_PRIVATE = True
    assert create(alice_http, url="http://127.0.0.1:9000/hook").status_code == 201
