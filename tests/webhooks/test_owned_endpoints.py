"""Endpoints another app owns (`WebhookEndpoint.owner`) and endpoints with an expiry
(`expires_at`): the REST matcher never queues for an owned endpoint nor for an expired one, and
the REST API neither shows nor changes an owned endpoint or its deliveries (it answers as for a
missing one). An owner queues its own bodies with `services.queue_delivery`."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.webhooks import selectors, services
from apps.webhooks.models import Delivery, WebhookEndpoint
from tests import factories

FILTERS = [{"type": "session.created"}]


@pytest.fixture(autouse=True)
def no_drain(monkeypatch):
    monkeypatch.setattr("apps.webhooks.drain_queue.request_drain", lambda: None)


def make_endpoint(member, *, owner: str = "", expires_at=None, name: str = "hook") -> WebhookEndpoint:
    now = timezone.now()
    return WebhookEndpoint.objects.create(
        workspace=member.workspace, name=name, url="https://hooks.example.com/connect", filters=FILTERS,
        owner=owner, expires_at=expires_at, created_at=now, updated_at=now, created_by=member,
        credential_kind="api_key", credential_id="key", sealed_secret=None,
    )


def test_the_rest_matcher_skips_owned_and_expired_endpoints(alice):
    rest = make_endpoint(alice)
    lasting = make_endpoint(alice, expires_at=timezone.now() + timedelta(hours=1))
    owned = make_endpoint(alice, owner="elsewhere", expires_at=timezone.now() + timedelta(hours=1))
    expired = make_endpoint(alice, expires_at=timezone.now() - timedelta(seconds=1))
    session = factories.session(alice.workspace)
    delivered = set(Delivery.objects.filter(body__contains=session.id).values_list("endpoint_id", flat=True))
    assert delivered == {rest.id, lasting.id}
    assert owned.id not in delivered and expired.id not in delivered

    # The owner's own view: its live endpoints only, and what it queues is delivered as it shaped it.
    now = timezone.now()
    assert list(selectors.deliverable_endpoints(workspace_id=alice.workspace.id, owner="elsewhere", now=now)) == [owned]
    assert not selectors.deliverable_endpoints(workspace_id=alice.workspace.id, owner="elsewhere",
                                               now=now + timedelta(hours=2)).exists()
    mine = services.queue_delivery(endpoint=owned, event_id="evt_x", event_type="session.created", body='{"own":1}')
    assert Delivery.objects.get(pk=mine.pk).body == '{"own":1}'


def test_the_rest_api_neither_shows_nor_changes_an_owned_endpoint(alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    client, auth = Client(), {"Authorization": f"Bearer {key}"}
    rest = make_endpoint(alice)
    owned = make_endpoint(alice, owner="elsewhere", expires_at=timezone.now() + timedelta(hours=1))
    factories.session(alice.workspace)
    services.queue_delivery(endpoint=owned, event_id="evt_x", event_type="session.created", body="{}")
    owned_delivery = Delivery.objects.get(endpoint=owned)

    listed = client.get("/api/v1/webhooks", headers=auth).json()["items"]
    assert [e["id"] for e in listed] == [rest.id]
    for method, path, body in [
        ("get", f"/api/v1/webhooks/{owned.id}", None),
        ("patch", f"/api/v1/webhooks/{owned.id}", {"name": "mine now"}),
        ("delete", f"/api/v1/webhooks/{owned.id}", None),
        ("post", f"/api/v1/webhooks/{owned.id}/test", None),
        ("get", f"/api/v1/webhook-deliveries/{owned_delivery.id}", None),
        ("post", f"/api/v1/webhook-deliveries/{owned_delivery.id}/replay", None),
    ]:
        response = getattr(client, method)(path, json.dumps(body) if body else "", content_type="application/json",
                                           headers=auth)
        assert (response.status_code, response.json()) == (404, {"error": "not_found"}), (method, path)
    deliveries = client.get("/api/v1/webhook-deliveries", headers=auth).json()["items"]
    assert {d["endpointId"] for d in deliveries} == {rest.id}
    assert client.get("/api/v1/webhook-deliveries", {"endpointId": owned.id}, headers=auth).json()["items"] == []
    owned.refresh_from_db()
    assert (owned.name, owned.deleted_at, owned.active) == ("hook", None, True)
