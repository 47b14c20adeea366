"""`POST /api/v1/webhooks/{id}/recover {since, until?}`: for one endpoint, a new delivery of every
event in the window that matched its filters and did not reach it (dead letter, cancelled, or
no delivery because the endpoint was inactive then); idempotent; capped per call; 409 for an
inactive endpoint; scopes and tenancy; and, live, a receiver that was failing gets its events."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.events.models import Event
from apps.events.representations import event_envelope
from apps.tenancy.services import issue_api_key
from apps.webhooks import services
from apps.webhooks.models import Delivery, WebhookEndpoint
from tests import factories
from tests.factories import aged_event
from tests.webhooks.conftest import wait_until
from tests.webhooks.test_live import live_receiver, settled, subscribe  # noqa: F401

CREATED = "session.created"


def endpoint_for(membership, *, age=timedelta(days=1), filters=None) -> WebhookEndpoint:
    """An endpoint made `age` ago, installed with a live key of `membership` (one with a made-up
    credential reads inactive, `installation_unauthorized`, once shown)."""
    now = timezone.now()
    key = issue_api_key(membership=membership, scopes=["svc:sessions:read"], name="recover").api_key
    return WebhookEndpoint.objects.create(
        workspace=membership.workspace, name="recover", url="https://hooks.example.com/in",
        filters=filters or [{"type": CREATED}], active=True, created_at=now - age, updated_at=now,
        created_by=membership, credential_kind="api_key", credential_id=str(key.pk),
    )


def recover(key: str, endpoint_id: str, **body):
    return Client().post(f"/api/v1/webhooks/{endpoint_id}/recover", json.dumps(body), content_type="application/json",
                         headers={"Authorization": f"Bearer {key}"})


def since(days: float) -> str:
    return (timezone.now() - timedelta(days=days)).isoformat()


def delivery_of(endpoint, session) -> Delivery:
    return Delivery.objects.get(endpoint=endpoint, event_id=Event.objects.get(session_id=session.id, type=CREATED).id)


def test_recover_queues_what_did_not_reach_the_endpoint_once(alice, alice_key, bob):
    endpoint = endpoint_for(alice)
    dead, cancelled, succeeded, pending = (factories.session(alice.workspace) for _ in range(4))
    Delivery.objects.filter(pk=delivery_of(endpoint, dead).pk).update(status="dead_letter", terminal_at=timezone.now())
    Delivery.objects.filter(pk=delivery_of(endpoint, cancelled).pk).update(status="cancelled", terminal_at=timezone.now())
    Delivery.objects.filter(pk=delivery_of(endpoint, succeeded).pk).update(status="succeeded", terminal_at=timezone.now())
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(active=False)
    while_inactive = factories.session(alice.workspace)
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(active=True)
    before_it_existed = aged_event(alice.workspace, CREATED, timedelta(days=2))
    Delivery.objects.filter(event_id=before_it_existed.id).delete()
    factories.session(alice.workspace, completed=True)  # its status change: not in the filters
    factories.session(bob.workspace)  # another workspace

    existing = set(Delivery.objects.values_list("pk", flat=True))
    response = recover(alice_key, endpoint.id, since=since(3))
    assert response.status_code == 202 and response.json() == {"queued": 3, "more": False}
    new = Delivery.objects.filter(endpoint=endpoint).exclude(pk__in=existing)
    assert set(new.values_list("status", flat=True)) == {"pending"}
    expected = {Event.objects.get(session_id=s.id, type=CREATED).id: s for s in (dead, cancelled, while_inactive)}
    assert set(new.values_list("event_id", flat=True)) == set(expected)
    for delivery in new:
        body = json.loads(delivery.body)
        event = Event.objects.get(pk=delivery.event_id)
        assert body["id"] == event.id and body["type"] == CREATED
        assert body["data"] == event_envelope(event)["data"]
        if delivery.replay_of_id:  # a dead letter or cancelled one: the same signed body again
            assert delivery.body == Delivery.objects.get(pk=delivery.replay_of_id).body

    # Idempotent: what was queued is pending now.
    assert recover(alice_key, endpoint.id, since=since(3)).json() == {"queued": 0, "more": False}


def test_the_window_and_the_cap(alice, alice_key, monkeypatch):
    endpoint = endpoint_for(alice)
    sessions = [factories.session(alice.workspace) for _ in range(5)]
    Delivery.objects.filter(endpoint=endpoint).update(status="dead_letter", terminal_at=timezone.now())
    monkeypatch.setattr(services.recover, "RECOVER_MAX", 2)
    assert recover(alice_key, endpoint.id, since=since(1)).json() == {"queued": 2, "more": True}
    assert recover(alice_key, endpoint.id, since=since(1)).json() == {"queued": 2, "more": True}
    assert recover(alice_key, endpoint.id, since=since(1)).json() == {"queued": 1, "more": False}
    assert Delivery.objects.filter(endpoint=endpoint, status="pending").count() == len(sessions)
    # A window that ends before them queues nothing.
    Delivery.objects.filter(endpoint=endpoint).update(status="dead_letter", terminal_at=timezone.now())
    assert recover(alice_key, endpoint.id, since=since(1), until=since(0.5)).json()["queued"] == 0


@pytest.mark.parametrize(
    "body, detail",
    [
        ({}, "since: required"),
        ({"since": "yesterday"}, "since: must be an ISO 8601 timestamp with a time zone"),
        ({"since": "2026-01-01T00:00:00"}, "since: must be an ISO 8601 timestamp with a time zone"),
        ({"since": 5}, "since: must be an ISO 8601 timestamp with a time zone"),
        ({"since": "__31_days__"}, "since: must be within the event log's retention (CONNECT_EVENT_RETENTION_DAYS)"),
        ({"since": "__1_day__", "until": "__2_days__"}, "until: must be after since"),
        ({"since": "__1_day__", "extra": 1}, "body: unknown field; the fields are since, until"),
    ],
)
def test_bad_bodies_are_invalid_request(alice, alice_key, body, detail):
    endpoint = endpoint_for(alice)
    values = {"__31_days__": since(31), "__1_day__": since(1), "__2_days__": since(2)}
    body = {k: values.get(v, v) if isinstance(v, str) else v for k, v in body.items()}
    response = recover(alice_key, endpoint.id, **body)
    assert response.status_code == 400 and response.json()["detail"] == detail


def test_inactive_endpoint_is_not_allowed_and_scopes_and_tenancy_hold(alice, alice_key, bob, bob_key):
    endpoint = endpoint_for(alice)
    reader = factories.api_key(alice, ["svc:webhooks:read", "svc:sessions:read"])
    response = recover(reader, endpoint.id, since=since(1))
    assert response.status_code == 403 and response.json()["error"] == "insufficient_scope"
    assert recover(bob_key, endpoint.id, since=since(1)).status_code == 404
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(active=False)
    response = recover(alice_key, endpoint.id, since=since(1))
    assert response.status_code == 409 and response.json()["error"] == "not_allowed"


def test_the_admin_action_recovers_for_staff(alice, admin_client):
    endpoint = endpoint_for(alice)
    factories.session(alice.workspace)
    Delivery.objects.filter(endpoint=endpoint).update(status="dead_letter", terminal_at=timezone.now())
    response = admin_client.post("/admin/webhooks/webhookendpoint/", {"action": "recover", "_selected_action": [endpoint.pk]},
                                 follow=True)
    assert response.status_code == 200
    assert "1 delivery(ies) queued." in response.content.decode()
    assert Delivery.objects.filter(endpoint=endpoint, status="pending").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_receiver_that_was_failing_gets_what_it_missed(webhook_server, live_receiver, alice):  # noqa: F811
    failing = True
    live_receiver.behaviour = lambda n: 500 if failing else 204
    endpoint_id = subscribe(webhook_server, alice, live_receiver.url)
    sessions = [factories.session(alice.workspace) for _ in range(3)]
    wait_until(lambda: Delivery.objects.filter(endpoint_id=endpoint_id, status="dead_letter").count() == 3)
    failed = len(live_receiver.requests)
    failing = False

    key = factories.api_key(alice, factories.ALL_SCOPES)
    with webhook_server.client(headers={"Authorization": f"Bearer {key}"}) as client:
        response = client.post(f"/api/v1/webhooks/{endpoint_id}/recover", json={"since": since(0.01)})
    assert response.status_code == 202 and response.json() == {"queued": 3, "more": False}
    wait_until(settled(endpoint_id=endpoint_id))
    recovered = [r for r in live_receiver.requests[failed:]]
    assert all(r.verified for r in recovered)
    events = {Event.objects.get(session_id=s.id, type=CREATED).id for s in sessions}
    assert sorted(r.headers["Svc-Event-Id"] for r in recovered) == sorted(events)
    assert Delivery.objects.filter(endpoint_id=endpoint_id, status="succeeded").count() == 3
