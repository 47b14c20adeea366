"""Standard Webhooks beside the contract's headers, end to end: a live `serve` delivers to a real
receiver, which verifies every request's Svc-Signature (docs/webhooks.md's receiver, against the
live JWKS) and its `webhook-signature` with the unmodified `standardwebhooks` and `svix`
libraries from PyPI — before and after a rotation (both secrets verify during the grace
period), and never a tampered body."""

from __future__ import annotations

import base64

import pytest
import standardwebhooks
import svix.webhooks
from standardwebhooks.webhooks import WebhookVerificationError as StandardError
from svix.webhooks import WebhookVerificationError as SvixError

from apps.webhooks.models import Delivery, WebhookEndpoint
from tests import factories
from tests.webhooks.conftest import wait_until
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def live_receiver(webhook_server, webhook_settings):
    receiver = Receiver(f"{webhook_server.url}/.well-known/webhook-signing-keys.json")
    yield receiver
    receiver.close()


def verifies(secret: str, body: bytes, headers: dict[str, str]) -> bool:
    """Both libraries, unmodified, agree on whether `secret` signed this request."""
    results = []
    for library, error in ((standardwebhooks.Webhook, StandardError), (svix.webhooks.Webhook, SvixError)):
        try:
            library(secret).verify(body, headers)
            results.append(True)
        except error:
            results.append(False)
    assert results[0] == results[1], results
    return results[0]


def test_opted_in_deliveries_verify_with_standard_webhooks_libraries_through_a_rotation(
        webhook_server, live_receiver, alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    with webhook_server.client(headers={"Authorization": f"Bearer {key}"}) as client:
        created = client.post("/api/v1/webhooks", json={
            "name": "standard", "url": live_receiver.url, "filters": [{"type": "session.created"}],
            "signing": "standard-webhooks"})
        assert created.status_code == 201, created.text
        endpoint = created.json()
        first_secret = endpoint["signingSecret"]
        assert endpoint["signing"] == "standard-webhooks" and first_secret.startswith("whsec_")
        # Shown once: a read never shows it again, and the stored row is sealed.
        assert client.get(f"/api/v1/webhooks/{endpoint['id']}").json()["signingSecret"] is None
        row = WebhookEndpoint.objects.get(pk=endpoint["id"])
        assert first_secret.encode() not in bytes(row.sealed_secret)
        assert base64.b64decode(first_secret[6:]) not in bytes(row.sealed_secret)

        factories.session(alice.workspace)
        [first] = live_receiver.wait_for(1)
        assert first.verified  # the contract's Ed25519 signature is still there
        assert first.headers["webhook-id"] == first.headers["Svc-Event-Id"] == first.event["id"]
        assert first.headers["webhook-timestamp"] == first.headers["Svc-Signature"].split(",")[0][2:]
        assert verifies(first_secret, first.body, first.headers)
        assert not verifies(first_secret, first.body.replace(b'"session.created"', b'"session.deleted"'),
                            first.headers)

        rotated = client.post(f"/api/v1/webhooks/{endpoint['id']}/rotate-secret", json={"graceSeconds": 3600})
        assert rotated.status_code == 200, rotated.text
        second_secret = rotated.json()["signingSecret"]
        assert second_secret.startswith("whsec_") and second_secret != first_secret
        assert rotated.json()["previousSecretExpiresAt"] is not None

        factories.session(alice.workspace)
        second = live_receiver.wait_for(2)[1]
        assert second.verified and len(second.headers["webhook-signature"].split(" ")) == 2
        assert verifies(second_secret, second.body, second.headers)
        assert verifies(first_secret, second.body, second.headers)  # the grace period
        assert not verifies(second_secret, second.body + b" ", second.headers)

        # No grace: the previous secret stops signing at once (after a leak).
        ended = client.post(f"/api/v1/webhooks/{endpoint['id']}/rotate-secret", json={"graceSeconds": 0})
        third_secret = ended.json()["signingSecret"]
        assert ended.json()["previousSecretExpiresAt"] is None
        factories.session(alice.workspace)
        third = live_receiver.wait_for(3)[2]
        assert third.verified and len(third.headers["webhook-signature"].split(" ")) == 1
        assert verifies(third_secret, third.body, third.headers)
        assert not verifies(second_secret, third.body, third.headers)
        assert not verifies(first_secret, third.body, third.headers)
    wait_until(lambda: not Delivery.objects.filter(endpoint_id=endpoint["id"], status="pending").exists())


def test_an_endpoint_that_did_not_opt_in_gets_only_the_contract_headers(webhook_server, live_receiver, alice):
    key = factories.api_key(alice, factories.ALL_SCOPES)
    with webhook_server.client(headers={"Authorization": f"Bearer {key}"}) as client:
        created = client.post("/api/v1/webhooks", json={
            "name": "svc", "url": live_receiver.url, "filters": [{"type": "session.created"}]})
        assert created.json()["signing"] == "svc" and created.json()["signingSecret"] is None
        factories.session(alice.workspace)
        [request] = live_receiver.wait_for(1)
        assert request.verified
        assert not {name.lower() for name in request.headers} & {"webhook-id", "webhook-timestamp",
                                                                   "webhook-signature"}
        # Opting in later issues the secret in that response, and the next delivery carries it.
        patched = client.patch(f"/api/v1/webhooks/{created.json()['id']}", json={"signing": "standard-webhooks"})
        secret = patched.json()["signingSecret"]
        assert secret.startswith("whsec_")
        factories.session(alice.workspace)
        second = live_receiver.wait_for(2)[1]
        assert verifies(secret, second.body, second.headers)
