"""Ingest keys are a kind of their own: they write through the ingest API and read nothing, and
no read credential is admitted at the ingest API. Revocation and deactivation hold on the next
request; another workspace's session of the same external id is another session."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from apps.recordings.models import Segment, Session
from apps.tenancy import services as tenancy
from apps.tenancy.models import INGEST_SCOPE, ApiKey, hash_api_key
from tests import factories
from tests.ingest.conftest import batch

pytestmark = pytest.mark.django_db

READ_PATHS = [
    "/api/v1/sessions",
    "/api/v1/sessions/{id}",
    "/api/v1/sessions/{id}/transcript",
    "/api/v1/sessions/{id}/transcripts",
    "/api/v1/sessions/{id}/boards",
    "/api/v1/transcripts/search?query=budget",
    "/api/v1/events",
    "/api/v1/webhooks",
    "/api/v1/webhook-deliveries",
]


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue().strip().splitlines()[-1]


def test_issue_ingest_key_prints_a_key_whose_only_scope_is_ingest(alice):
    key = run("issue_ingest_key", "acme", "--name", "meeting bot")
    stored = ApiKey.objects.get(key_hash=hash_api_key(key))
    assert key.startswith("svc_") and stored.scopes == [INGEST_SCOPE] and stored.name == "meeting bot"
    assert stored.issued_by == alice and stored.is_ingest


def test_issue_ingest_key_needs_an_active_member(acme):
    with pytest.raises(CommandError, match="no active member"):
        run("issue_ingest_key", "acme")
    with pytest.raises(CommandError, match="unknown workspace"):
        run("issue_ingest_key", "nope")


@pytest.mark.parametrize("scopes", [["svc:sessions:read", INGEST_SCOPE], [INGEST_SCOPE, "svc:webhooks:write"]])
def test_no_key_holds_the_ingest_scope_beside_another(alice, scopes):
    with pytest.raises(tenancy.UnknownScope, match="only scope"):
        tenancy.issue_api_key(membership=alice, scopes=scopes)
    with pytest.raises(CommandError, match="only scope"):
        run("issue_api_key", "acme", "--member", "alice@acme.test", "--scopes", ",".join(scopes))
    assert not ApiKey.objects.exists()


def test_the_admin_issues_an_ingest_key_and_refuses_mixing(acme, alice):
    root = tenancy.add_member(workspace=acme, email="root@acme.test", staff=True)
    client = Client()
    client.force_login(root.user)
    add = reverse("admin:tenancy_apikey_add")
    mixed = client.post(add, {"issued_by": alice.pk, "name": "mixed", "scopes": ["svc:sessions:read", INGEST_SCOPE]})
    assert mixed.status_code == 200 and b"only scope" in mixed.content
    assert not ApiKey.objects.filter(name="mixed").exists()
    issued = client.post(add, {"issued_by": alice.pk, "name": "bot", "scopes": [INGEST_SCOPE]})
    assert issued.status_code == 200
    assert ApiKey.objects.get(name="bot").scopes == [INGEST_SCOPE]


def test_a_read_key_on_the_ingest_api_is_insufficient_scope(ingest, alice_key, alice):
    every_scope = factories.api_key(alice, factories.ALL_SCOPES)
    for key in (alice_key, every_scope):
        for method, path, body in [("PUT", "rec-1", {}), ("POST", "rec-1/segments", batch(0, 1)),
                                   ("POST", "rec-1/status", {"status": "completed"}),
                                   ("PUT", "rec-1/transcripts/final", {"segments": []}),
                                   ("PUT", "rec-1/boards/summary", {"status": "ready", "sourceRevisionKind": "final",
                                                                    "payload": {}})]:
            response = ingest.send(method, path, body, key)
            assert response.status_code == 403, (method, path)
            assert response.json()["error"] == "insufficient_scope"
    assert not Session.objects.exists()


def test_an_ingest_key_reads_nothing(api, acme, acme_ingest_key):
    session = factories.session(acme, committed=["budget talk"])
    for path in READ_PATHS:
        response = api.get(path.format(id=session.id), acme_ingest_key)
        assert response.status_code == 403, path
        assert response.json()["error"] == "insufficient_scope", path


def test_no_credential_is_401(ingest):
    response = ingest.put("rec-1", {}, None)
    assert response.status_code == 401 and response.json()["error"] == "unauthorized"


def test_revocation_holds_on_the_next_request(ingest, alice, acme_ingest_key):
    assert ingest.put("rec-1", {}, acme_ingest_key).status_code == 201
    tenancy.revoke_api_key(api_key=ApiKey.objects.get(key_hash=hash_api_key(acme_ingest_key)))
    response = ingest.post("rec-1/segments", batch(0, 1), acme_ingest_key)
    assert response.status_code == 401 and response.json()["error"] == "unauthorized"
    assert not Segment.objects.exists()


def test_a_deactivated_issuer_is_403_forbidden(ingest, alice, acme_ingest_key):
    tenancy.deactivate_member(membership=alice)
    response = ingest.put("rec-1", {}, acme_ingest_key)
    assert response.status_code == 403 and response.json()["error"] == "forbidden"


def test_the_same_external_id_in_two_workspaces_is_two_sessions(ingest, acme_ingest_key, globex_ingest_key):
    mine = ingest.put("rec-1", {"label": "acme's"}, acme_ingest_key).json()["id"]
    # Globex cannot reach acme's session: the id names nothing in its workspace until it says it.
    refused = ingest.post("rec-1/segments", batch(0, 2), globex_ingest_key)
    assert refused.status_code == 404 and refused.json()["error"] == "not_found"
    assert ingest.post("rec-1/status", {"status": "failed"}, globex_ingest_key).status_code == 404
    assert ingest.put("rec-1/transcripts/final", {"segments": []}, globex_ingest_key).status_code == 404
    theirs = ingest.put("rec-1", {"label": "globex's"}, globex_ingest_key)
    assert theirs.status_code == 201 and theirs.json()["id"] != mine
    assert ingest.post("rec-1/segments", batch(0, 2), globex_ingest_key).status_code == 200
    acme_session = Session.objects.get(pk=mine)
    assert acme_session.label == "acme's" and acme_session.status == "recording"
    assert not Segment.objects.filter(transcript__session=acme_session).exists()
    assert Segment.objects.filter(transcript__session_id=theirs.json()["id"]).count() == 2


def test_a_suspended_workspace_is_404_workspace_not_found(ingest, acme, acme_ingest_key):
    tenancy.suspend_workspace(workspace=acme)
    response = ingest.put("rec-1", {}, acme_ingest_key)
    assert response.status_code == 404 and response.json()["error"] == "workspace_not_found"
