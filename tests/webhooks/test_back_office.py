"""Admin, commands and OpenAPI for webhooks."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.webhooks import keys
from apps.webhooks.models import Delivery, SigningKey, WebhookEndpoint
from tests import factories
from tests.test_openapi import strict


@pytest.fixture
def endpoint(alice):
    now = timezone.now()
    return WebhookEndpoint.objects.create(
        workspace=alice.workspace, name="hook", url="https://hooks.example.com/", filters=[{"type": "session.created"}],
        created_at=now, updated_at=now, created_by=alice, credential_kind="api_key", credential_id="x",
    )


def deliveries(endpoint, count: int, status: str) -> list[Delivery]:
    now = timezone.now()
    rows = [
        Delivery(workspace_id=endpoint.workspace_id, endpoint=endpoint, event_id=f"evt_{status}{i}",
                 event_type="session.created", body="{}", status=status, attempt_count=7,
                 is_dead_letter=status == "dead_letter",
                 terminal_at=now, created_at=now - timedelta(seconds=i), updated_at=now)
        for i in range(count)
    ]
    return Delivery.objects.bulk_create(rows)


def test_admin_lists_dead_letters_first_without_per_row_queries(staff, endpoint):
    deliveries(endpoint, 150, "succeeded")
    dead = deliveries(endpoint, 3, "dead_letter")
    with CaptureQueriesContext(connection) as queries:
        response = staff.get("/admin/webhooks/delivery/")
    assert response.status_code == 200
    page = response.content.decode()
    assert page.index(dead[0].id) < page.index("evt_succeeded0") if "evt_succeeded0" in page else True
    first_row = page.index("<tbody>")
    assert page.index(dead[0].id, first_row) < page.index("succeeded", first_row)
    assert len(queries) < 15  # independent of the 100 rows shown
    assert not any("COUNT(*)" in q["sql"] and "LIMIT" not in q["sql"] for q in queries.captured_queries
                   if "webhooks_delivery" in q["sql"])
    for query in ("?status__exact=dead_letter", "?event_type=session.created", f"?endpoint__id__exact={endpoint.id}",
                  f"?workspace__id__exact={endpoint.workspace_id}", "?created_at__gte=2020-01-01+00:00:00%2B00:00"):
        assert staff.get("/admin/webhooks/delivery/" + query).status_code == 200
    assert staff.get(f"/admin/webhooks/delivery/{dead[0].id}/change/").status_code == 200


def test_admin_replay_action_goes_through_the_service(staff, endpoint, monkeypatch):
    monkeypatch.setattr("apps.webhooks.drain_queue.request_drain", lambda: None)
    dead = deliveries(endpoint, 2, "dead_letter")
    pending = Delivery.objects.create(workspace_id=endpoint.workspace_id, endpoint=endpoint, event_id="evt_p",
                                      event_type="session.created", body="{}", created_at=timezone.now(),
                                      updated_at=timezone.now())
    response = staff.post("/admin/webhooks/delivery/", {
        "action": "replay", "_selected_action": [d.id for d in dead] + [pending.id]}, follow=True)
    assert response.status_code == 200
    assert Delivery.objects.filter(replay_of__in=dead).count() == 2
    assert not Delivery.objects.filter(replay_of=pending).exists()
    assert "1 not replayed" in response.content.decode()


def test_private_halves_are_never_shown(staff, db):
    key = keys.active_key()
    seed = keys.unseal(key.sealed_private_key)
    page = staff.get(f"/admin/webhooks/signingkey/{key.kid}/change/").content
    listing = staff.get("/admin/webhooks/signingkey/").content
    jwks = Client().get("/.well-known/webhook-signing-keys.json").content
    out = StringIO()
    call_command("list_signing_keys", stdout=out)
    import base64

    shown = (page, listing, jwks, out.getvalue().encode(), repr(key).encode(), repr(keys.signing_material()).encode())
    for text in shown:
        for form in (seed, base64.urlsafe_b64encode(seed).rstrip(b"="), base64.b64encode(seed), seed.hex().encode(),
                     bytes(key.sealed_private_key).hex().encode()):
            assert form not in text
    assert bytes(key.sealed_private_key) != seed  # sealed at rest


def test_key_commands(db):
    out = StringIO()
    call_command("rotate_signing_key", stdout=out)
    first = out.getvalue().strip().splitlines()[-1]
    call_command("rotate_signing_key", stdout=out)
    second = out.getvalue().strip().splitlines()[-1]
    assert SigningKey.objects.get(kid=first).status == "retiring"
    assert SigningKey.objects.get(kid=second).status == "active"
    kids = [k["kid"] for k in Client().get("/.well-known/webhook-signing-keys.json").json()["keys"]]
    assert kids == [second, first]
    out = StringIO()
    call_command("retire_signing_keys", stdout=out)
    assert out.getvalue().strip().endswith("0 key(s) retired")  # not yet 30 days
    SigningKey.objects.filter(kid=first).update(retiring_at=timezone.now() - timedelta(days=31))
    call_command("retire_signing_keys", stdout=out)
    retired = SigningKey.objects.get(kid=first)
    assert retired.status == "retired" and bytes(retired.sealed_private_key) == b""
    assert [k["kid"] for k in Client().get("/.well-known/webhook-signing-keys.json").json()["keys"]] == [second]
    with pytest.raises(CommandError):
        call_command("retire_signing_keys", "--older-than-days", "5")
    out = StringIO()
    call_command("list_signing_keys", stdout=out)
    assert out.getvalue().strip().endswith("2 key(s)")


WEBHOOK_PATHS = {
    "/api/v1/webhooks": {"get", "post"},
    "/api/v1/webhooks/{id}": {"get", "patch", "delete"},
    "/api/v1/webhooks/{id}/test": {"post"},
    "/api/v1/webhook-deliveries": {"get"},
    "/api/v1/webhook-deliveries/{id}": {"get"},
    "/api/v1/webhook-deliveries/{id}/replay": {"post"},
    "/.well-known/webhook-signing-keys.json": {"get"},
}


def validator_for(doc, path: str):
    """tests/test_openapi.py's strict validator (every property required, nothing else), except
    that a filter entry keeps its genuinely optional `sessionId` and `status`."""
    import copy

    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    strict_doc = strict(copy.deepcopy(doc))
    entry = strict_doc["components"]["schemas"]["FilterEntry"]
    entry["required"] = ["type"]
    whole = json.loads(json.dumps(strict_doc).replace('"#/components/', '"urn:openapi#/components/'))
    registry = Registry().with_resource("urn:openapi", Resource.from_contents(whole, default_specification=DRAFT202012))
    schema = whole["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    return Draft202012Validator(schema, registry=registry)


@pytest.fixture(scope="module")
def doc(django_db_blocker):
    with django_db_blocker.unblock():
        return Client().get("/openapi.json").json()


def test_openapi_documents_webhook_paths_jwks_and_the_receiver_request(doc):
    for path, methods in WEBHOOK_PATHS.items():
        assert methods <= set(doc["paths"][path]), path
    assert doc["paths"]["/.well-known/webhook-signing-keys.json"]["get"]["security"] == []
    for event_type in ("session.created", "session.status_changed"):
        operation = doc["webhooks"][event_type]["post"]
        headers = {p["name"]: p["required"] for p in operation["parameters"] if p["in"] == "header"}
        assert headers == {"Svc-Webhook-Id": True, "Svc-Event-Id": True, "Svc-Delivery-Id": True,
                           "Svc-Signature": True, "webhook-id": False, "webhook-timestamp": False,
                           "webhook-signature": False}  # the last three: Standard Webhooks, on opt-in
        assert "application/json" in operation["requestBody"]["content"]
    listing = {p["name"] for p in doc["paths"]["/api/v1/webhook-deliveries"]["get"]["parameters"]}
    assert {"endpointId", "status", "eventType", "eventId", "kind", "cursor", "limit"} <= listing


def test_live_responses_match_the_documented_schemas(doc, alice, monkeypatch):
    monkeypatch.setattr("apps.webhooks.drain_queue.request_drain", lambda: None)
    monkeypatch.setattr("apps.webhooks.outbound.resolve", lambda host, port: ["93.184.216.34"])
    client = Client(headers={"Authorization": f"Bearer {factories.api_key(alice, factories.ALL_SCOPES)}"})
    created = client.post("/api/v1/webhooks", json.dumps({"name": "n", "url": "https://hooks.example.com/",
                          "filters": [{"type": "session.created"}]}), content_type="application/json").json()
    test = client.post(f"/api/v1/webhooks/{created['id']}/test").json()
    Delivery.objects.filter(id=test["id"]).update(status="dead_letter", terminal_at=timezone.now(), attempt_count=1)
    Delivery.objects.get(id=test["id"]).attempts.create(number=1, started_at=timezone.now(),
                                                         completed_at=timezone.now(), duration_ms=5, error="timeout")
    for path, url in [
        ("/api/v1/webhooks", "/api/v1/webhooks"),
        ("/api/v1/webhooks/{id}", f"/api/v1/webhooks/{created['id']}"),
        ("/api/v1/webhook-deliveries", "/api/v1/webhook-deliveries"),
        ("/api/v1/webhook-deliveries/{id}", f"/api/v1/webhook-deliveries/{test['id']}"),
        ("/.well-known/webhook-signing-keys.json", "/.well-known/webhook-signing-keys.json"),
    ]:
        validator_for(doc, path).validate(client.get(url).json())
