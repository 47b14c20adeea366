"""An endpoint whose installation's credential stopped holding reads `"active": false` with
`disabledReason: "installation_unauthorized"` — however the credential went (revoked by a save,
replaced by `issue_api_key --replace`, expired with no save at all) — in REST, the admin and the
health board; PATCH `active: true` with a valid credential re-enables it, makes that credential
its installation, and deliveries resume (a live `serve` and a real receiver). The Standard
Webhooks inputs answer `{"error", "detail"}` and need the webhook scopes like every write."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.tenancy import services as tenancy
from apps.tenancy.models import ApiKey
from apps.webhooks.models import Delivery, WebhookEndpoint
from tests import factories
from tests.webhooks.conftest import wait_until
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_api import URL, Http, create, public_dns  # noqa: F401 (a fixture)

READ_ONLY = ["svc:webhooks:read", "svc:sessions:read"]


def demo_key(membership, scopes=None) -> tuple[str, ApiKey]:
    issued = tenancy.issue_api_key(membership=membership, scopes=scopes or factories.ALL_SCOPES, name="demo")
    return issued.key, issued.api_key


def read(http: Http, endpoint_id: str) -> dict:
    response = http.call("get", f"/api/v1/webhooks/{endpoint_id}")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
@pytest.mark.parametrize("how", ["revoked", "replaced", "expired"])
def test_an_endpoint_whose_key_stopped_holding_reads_inactive_with_the_reason(alice, how):
    key, api_key = demo_key(alice)
    endpoint = create(Http(key)).json()
    assert (endpoint["active"], endpoint["disabledReason"]) == (True, None)
    if how == "revoked":
        tenancy.revoke_api_key(api_key=api_key)  # a save: the receiver turns it off at once
    elif how == "replaced":
        demo_key_again = tenancy.issue_api_key(membership=alice, scopes=factories.ALL_SCOPES, name="demo",
                                               replace=True)  # an UPDATE: no signal is sent
        assert demo_key_again.api_key.pk != api_key.pk
    else:
        ApiKey.objects.filter(pk=api_key.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    other = Http(factories.api_key(alice, READ_ONLY))
    shown = read(other, endpoint["id"])
    assert (shown["active"], shown["disabledReason"]) == (False, "installation_unauthorized")
    listed = other.call("get", "/api/v1/webhooks").json()["items"]
    assert [(e["id"], e["active"], e["disabledReason"]) for e in listed] == [
        (endpoint["id"], False, "installation_unauthorized")]
    stored = WebhookEndpoint.objects.get(pk=endpoint["id"])
    assert (stored.active, stored.disabled_reason) == (False, "installation_unauthorized")


@pytest.mark.django_db
def test_re_enabling_makes_the_caller_the_installation(alice, webhook_settings):
    key, api_key = demo_key(alice)
    endpoint_id = create(Http(key)).json()["id"]
    tenancy.revoke_api_key(api_key=api_key)

    # The old key cannot re-enable it (it no longer authenticates); one without
    # svc:sessions:read cannot become its installation.
    assert Http(key).call("patch", f"/api/v1/webhooks/{endpoint_id}", {"active": True}).status_code == 401
    no_sessions = Http(factories.api_key(alice, ["svc:webhooks:read", "svc:webhooks:write"]))
    refused = no_sessions.call("patch", f"/api/v1/webhooks/{endpoint_id}", {"active": True})
    assert refused.status_code == 403 and refused.json()["error"] == "insufficient_scope"

    new_key, new_api_key = demo_key(alice)
    patched = Http(new_key).call("patch", f"/api/v1/webhooks/{endpoint_id}", {"active": True})
    assert patched.status_code == 200, patched.content
    assert (patched.json()["active"], patched.json()["disabledReason"]) == (True, None)
    stored = WebhookEndpoint.objects.get(pk=endpoint_id)
    assert (stored.credential_kind, stored.credential_id) == ("api_key", str(new_api_key.pk))

    # Turned off by a caller: the other reason, and its installation stays as it was.
    off = Http(new_key).call("patch", f"/api/v1/webhooks/{endpoint_id}", {"active": False}).json()
    assert (off["active"], off["disabledReason"]) == (False, "endpoint_disabled")


@pytest.mark.django_db
def test_the_admin_and_the_health_board_show_the_reason(alice, staff):
    key, api_key = demo_key(alice)
    endpoint_id = create(Http(key)).json()["id"]
    ApiKey.objects.filter(pk=api_key.pk).update(revoked_at=timezone.now())  # no signal: found when shown
    changelist = staff.get("/admin/webhooks/webhookendpoint/").content.decode()
    assert "its installation&#x27;s credential no longer holds" in changelist or \
        "its installation's credential no longer holds" in changelist
    board = staff.get("/admin/webhooks/delivery/health/").content.decode()
    assert endpoint_id in board and "installation_unauthorized" in board
    change = staff.get(f"/admin/webhooks/webhookendpoint/{endpoint_id}/change/").content.decode()
    assert "installation_unauthorized" in change or "no longer holds" in change


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "detail"), [
    ({"signing": "hmac"}, 'signing: must be one of "svc", "standard-webhooks"'),
    ({"signing": None}, 'signing: must be one of "svc", "standard-webhooks"'),
])
def test_bad_signing_is_invalid_request(alice, body, detail):
    http = Http(factories.api_key(alice, factories.ALL_SCOPES))
    created = create(http, **body)
    assert (created.status_code, created.json()) == (400, {"error": "invalid_request", "detail": detail})
    endpoint_id = create(http).json()["id"]
    patched = http.call("patch", f"/api/v1/webhooks/{endpoint_id}", body)
    assert (patched.status_code, patched.json()) == (400, {"error": "invalid_request", "detail": detail})


@pytest.mark.django_db
def test_rotate_secret_errors_and_scopes(alice):
    http = Http(factories.api_key(alice, factories.ALL_SCOPES))
    svc_id = create(http).json()["id"]
    refused = http.call("post", f"/api/v1/webhooks/{svc_id}/rotate-secret")
    assert refused.status_code == 409 and refused.json()["error"] == "not_allowed"
    assert "standard-webhooks" in refused.json()["detail"]

    standard_id = create(http, signing="standard-webhooks").json()["id"]
    for grace in (-1, 7 * 86400 + 1, "60", True, 1.5):
        bad = http.call("post", f"/api/v1/webhooks/{standard_id}/rotate-secret", {"graceSeconds": grace})
        assert bad.json() == {"error": "invalid_request",
                              "detail": "graceSeconds: must be an integer from 0 to 604800"}, grace
    unknown = http.call("post", f"/api/v1/webhooks/{standard_id}/rotate-secret", {"grace": 1})
    assert unknown.status_code == 400 and unknown.json()["detail"].startswith("body: unknown field")
    reader = Http(factories.api_key(alice, READ_ONLY))
    forbidden = reader.call("post", f"/api/v1/webhooks/{standard_id}/rotate-secret")
    assert forbidden.status_code == 403 and forbidden.json()["error"] == "insufficient_scope"
    done = http.call("post", f"/api/v1/webhooks/{standard_id}/rotate-secret")
    assert done.status_code == 200 and done.json()["signingSecret"].startswith("whsec_")
    assert http.call("post", "/api/v1/webhooks/wh_nope/rotate-secret").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_deliveries_stop_while_disabled_and_resume_once_re_enabled(webhook_server, webhook_settings, alice):
    receiver = Receiver(f"{webhook_server.url}/.well-known/webhook-signing-keys.json")
    try:
        key, api_key = demo_key(alice)
        with webhook_server.client(headers={"Authorization": f"Bearer {key}"}) as client:
            endpoint_id = client.post("/api/v1/webhooks", json={
                "name": "demo", "url": receiver.url, "filters": [{"type": "session.created"}]}).json()["id"]
        factories.session(alice.workspace)
        receiver.wait_for(1)
        # The attempt is recorded after the receiver answered: a revocation before that cancels
        # the delivery under the worker (its lease is lost), which is not what this test is about.
        wait_until(lambda: Delivery.objects.filter(endpoint_id=endpoint_id, status="succeeded").exists())
        tenancy.revoke_api_key(api_key=api_key)  # what `make run NEW_KEY=1` does to the old key

        factories.session(alice.workspace)  # nothing is queued for an inactive endpoint
        assert Delivery.objects.filter(endpoint_id=endpoint_id).count() == 1
        new_key, _ = demo_key(alice)
        with webhook_server.client(headers={"Authorization": f"Bearer {new_key}"}) as client:
            assert client.get(f"/api/v1/webhooks/{endpoint_id}").json()["disabledReason"] == \
                "installation_unauthorized"
            assert client.patch(f"/api/v1/webhooks/{endpoint_id}", json={"active": True}).json()["active"] is True
        session = factories.session(alice.workspace)
        second = receiver.wait_for(2)[1]
        assert second.verified and second.event["data"]["sessionId"] == session.id
        wait_until(lambda: set(Delivery.objects.filter(endpoint_id=endpoint_id).values_list("status", flat=True))
                   == {"succeeded"})
    finally:
        receiver.close()
