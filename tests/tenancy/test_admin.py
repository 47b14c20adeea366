"""The tenancy back office: staff only, every change through the services, API keys shown once."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from apps.tenancy import services
from apps.tenancy.models import ApiKey, Membership, Workspace, hash_api_key
from tests import factories

pytestmark = pytest.mark.django_db

TENANCY_MODELS = [Workspace, Membership, ApiKey]


@pytest.fixture
def staff(acme) -> Client:
    membership = services.add_member(workspace=acme, email="root@acme.test", staff=True)
    client = Client()
    client.force_login(membership.user)
    return client


def url(model, view: str, *args) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def changelist_action(client: Client, model, action: str, objs) -> None:
    response = client.post(
        url(model, "changelist"), {"action": action, admin.helpers.ACTION_CHECKBOX_NAME: [o.pk for o in objs]}
    )
    assert response.status_code == 302, response.content


def test_tenancy_models_are_registered():
    assert all(admin.site.is_registered(m) for m in TENANCY_MODELS)


def test_changelists_and_change_views_render_for_staff(staff, alice, alice_key, bob):
    for model in TENANCY_MODELS:
        assert staff.get(url(model, "changelist")).status_code == 200, model
        for obj in model.objects.all():
            assert staff.get(url(model, "change", obj.pk)).status_code == 200, (model, obj)
    assert staff.get(url(Membership, "add")).status_code == 200
    assert staff.get(url(Workspace, "add")).status_code == 200


def test_non_staff_and_anonymous_are_sent_to_login(alice):
    member = Client()
    member.force_login(alice.user)
    for client in (member, Client()):
        for path in ("/admin/", url(ApiKey, "changelist"), url(Workspace, "change", alice.workspace.pk)):
            response = client.get(path)
            assert response.status_code == 302
            assert response["Location"].startswith("/admin/login/")


def test_api_key_list_shows_prefix_issuer_and_scopes_but_no_hash(staff, alice, alice_key):
    api_key = ApiKey.objects.get()
    body = staff.get(url(ApiKey, "changelist")).content.decode()
    assert api_key.prefix in body
    assert "alice@acme.test" in body
    assert "svc:sessions:read" in body
    assert api_key.key_hash not in body
    change = staff.get(url(ApiKey, "change", api_key.pk)).content.decode()
    assert api_key.key_hash not in change and alice_key not in change


def test_issuing_a_key_shows_it_once_and_stores_only_its_hash(api, staff, alice):
    form = staff.get(url(ApiKey, "add")).content.decode()
    assert 'type="checkbox" name="scopes" value="svc:sessions:read"' in form

    response = staff.post(
        url(ApiKey, "add"),
        {"issued_by": alice.pk, "name": "Zapier", "scopes": ["svc:sessions:read", "svc:boards:read"]},
    )
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    api_key = ApiKey.objects.get()
    key = response.context["key"]
    body = response.content.decode()
    assert key.startswith("svc_") and body.count(key) == 1
    assert "shown only this once" in body

    assert api_key.key_hash == hash_api_key(key)
    assert (api_key.name, api_key.scopes, api_key.issued_by, api_key.workspace) == (
        "Zapier", ["svc:sessions:read", "svc:boards:read"], alice, alice.workspace
    )  # fmt: skip
    assert key not in {api_key.prefix, api_key.name}
    assert api.get("/api/v1/sessions", key).status_code == 200

    # Never again: not on the list, the key's page, nor in a message on the next page.
    for path in (url(ApiKey, "changelist"), url(ApiKey, "change", api_key.pk)):
        assert key not in staff.get(path).content.decode()


def test_issuing_without_scopes_is_refused(staff, alice):
    response = staff.post(url(ApiKey, "add"), {"issued_by": alice.pk, "name": "none", "scopes": []})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["scopes"]
    assert not ApiKey.objects.exists()


def test_only_active_members_can_issue(staff, alice):
    services.deactivate_member(membership=alice)
    response = staff.post(url(ApiKey, "add"), {"issued_by": alice.pk, "name": "x", "scopes": ["svc:sessions:read"]})
    assert "issued_by" in response.context["adminform"].form.errors
    assert not ApiKey.objects.exists()


def test_only_the_name_of_a_key_can_change(staff, alice, alice_key):
    api_key = ApiKey.objects.get()
    response = staff.post(
        url(ApiKey, "change", api_key.pk),
        {"name": "renamed", "key_hash": "0" * 64, "scopes": '["svc:webhooks:write"]', "revoked_at": "2020-01-01"},
    )
    assert response.status_code == 302
    api_key.refresh_from_db()
    assert api_key.name == "renamed"
    assert api_key.key_hash == hash_api_key(alice_key)
    assert api_key.scopes == factories.ALL_SCOPES and api_key.revoked_at is None


def test_keys_cannot_be_deleted(staff, alice_key):
    api_key = ApiKey.objects.get()
    assert staff.post(url(ApiKey, "delete", api_key.pk), {"post": "yes"}).status_code == 403
    assert ApiKey.objects.exists()


def test_revoke_action_makes_keys_unauthorized(api, staff, alice, alice_key):
    keep = factories.api_key(alice)
    changelist_action(staff, ApiKey, "revoke", ApiKey.objects.filter(key_hash=hash_api_key(alice_key)))
    assert api.get("/api/v1/sessions", alice_key).status_code == 401
    assert api.get("/api/v1/sessions", keep).status_code == 200


def test_suspend_and_unsuspend_actions(api, staff, acme, alice_key):
    changelist_action(staff, Workspace, "suspend", [acme])
    acme.refresh_from_db()
    assert acme.suspended_at is not None
    response = api.get("/api/v1/sessions", alice_key)
    assert response.status_code == 404 and response.json()["error"] == "workspace_not_found"
    changelist_action(staff, Workspace, "unsuspend", [acme])
    assert api.get("/api/v1/sessions", alice_key).status_code == 200


def test_deactivate_and_activate_actions(api, staff, alice, alice_key):
    changelist_action(staff, Membership, "deactivate", [alice])
    alice.refresh_from_db()
    assert not alice.is_active
    response = api.get("/api/v1/sessions", alice_key)
    assert response.status_code == 403 and response.json()["error"] == "forbidden"
    changelist_action(staff, Membership, "activate", [alice])
    alice.refresh_from_db()
    assert alice.is_active
    assert api.get("/api/v1/sessions", alice_key).status_code == 200


def test_adding_a_member_creates_the_user(staff, acme):
    response = staff.post(
        url(Membership, "add"), {"workspace": acme.pk, "email": "dave@acme.test", "password": "dave-password-1"}
    )
    assert response.status_code == 302, response.context and response.context["adminform"].form.errors
    membership = Membership.objects.select_related("user").get(user__email="dave@acme.test")
    assert membership.workspace == acme and membership.is_active
    assert membership.user.check_password("dave-password-1") and not membership.user.is_staff


def test_workspace_slug_is_fixed_once_created(staff, acme):
    response = staff.post(url(Workspace, "change", acme.pk), {"slug": "renamed", "name": "Acme Inc"})
    assert response.status_code == 302
    acme.refresh_from_db()
    assert (acme.slug, acme.name) == ("acme", "Acme Inc")
