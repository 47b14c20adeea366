"""The operator commands of DESIGN §3: one result on the last line of stdout, errors on stderr
with a non-zero exit."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from apps.tenancy.models import ApiKey, Membership, Workspace, hash_api_key
from tests import factories
from tests.servers import ROOT, database_url_for_test_db

READ = "svc:sessions:read,svc:transcripts:read"


def run(*args: str) -> str:
    """call_command; returns the last line of stdout."""
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue().strip().splitlines()[-1]


def manage(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url_for_test_db(), "CONNECT_DEVELOPMENT": "1"}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


# create_workspace


@pytest.mark.django_db
def test_create_workspace_prints_the_slug():
    assert run("create_workspace", "initech", "--name", "Initech Corp") == "initech"
    assert Workspace.objects.get(slug="initech").name == "Initech Corp"


@pytest.mark.django_db
def test_create_workspace_name_defaults_to_the_slug():
    run("create_workspace", "hooli")
    assert Workspace.objects.get(slug="hooli").name == "hooli"


@pytest.mark.django_db
def test_create_workspace_with_a_taken_slug_is_an_error(acme):
    with pytest.raises(CommandError, match="already exists"):
        run("create_workspace", "acme")
    assert Workspace.objects.filter(slug="acme").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["has space", "a/b", "x" * 65])
def test_create_workspace_with_an_invalid_slug_is_an_error(slug):
    with pytest.raises(CommandError, match="invalid slug"):
        run("create_workspace", slug)
    assert not Workspace.objects.exists()


# add_member / deactivate_member


@pytest.mark.django_db
def test_add_member_creates_an_active_member_with_a_password(acme):
    assert run("add_member", "acme", "carol@acme.test", "--password", "carol-password-1") == "carol@acme.test"
    membership = Membership.objects.select_related("user").get(workspace=acme, user__email="carol@acme.test")
    assert membership.is_active
    assert membership.user.check_password("carol-password-1")
    assert not membership.user.is_staff


@pytest.mark.django_db
def test_add_member_staff_gets_admin_access(acme):
    run("add_member", "acme", "root@acme.test", "--staff")
    assert get_user_model().objects.get(email="root@acme.test").is_staff


@pytest.mark.django_db
def test_add_member_reactivates_a_deactivated_member(acme, alice):
    run("deactivate_member", "acme", "alice@acme.test")
    run("add_member", "acme", "alice@acme.test")
    alice.refresh_from_db()
    assert alice.is_active and alice.deactivated_at is None
    assert Membership.objects.filter(workspace=acme).count() == 1


@pytest.mark.django_db
def test_add_member_errors(acme):
    with pytest.raises(CommandError, match="unknown workspace"):
        run("add_member", "nope", "carol@acme.test")
    with pytest.raises(CommandError, match="invalid email"):
        run("add_member", "acme", "not-an-email")
    assert not Membership.objects.exists()


@pytest.mark.django_db
def test_deactivate_member_makes_their_keys_forbidden(api, alice, alice_key):
    assert api.get("/api/v1/sessions", alice_key).status_code == 200
    assert run("deactivate_member", "acme", "alice@acme.test") == "alice@acme.test"
    response = api.get("/api/v1/sessions", alice_key)
    assert response.status_code == 403
    assert response.json()["error"] == "forbidden"
    # Idempotent.
    assert run("deactivate_member", "acme", "ALICE@acme.test") == "alice@acme.test"


@pytest.mark.django_db
def test_deactivate_member_errors(alice, bob):
    with pytest.raises(CommandError, match="unknown workspace"):
        run("deactivate_member", "nope", "alice@acme.test")
    with pytest.raises(CommandError, match="not a member of acme"):
        run("deactivate_member", "acme", "bob@globex.test")
    bob.refresh_from_db()
    assert bob.is_active


# issue_api_key / revoke_api_key


@pytest.mark.django_db
def test_issued_key_reads_sessions_and_only_its_hash_is_stored(api, acme, alice):
    factories.session(acme, label="Kickoff")
    key = run("issue_api_key", "acme", "--member", "alice@acme.test", "--scopes", READ, "--name", "ci")
    assert key.startswith("svc_") and len(key) >= 36
    response = api.get("/api/v1/sessions", key)
    assert response.status_code == 200
    assert [s["label"] for s in response.json()["items"]] == ["Kickoff"]

    stored = ApiKey.objects.get()
    assert stored.key_hash == hash_api_key(key)
    assert stored.name == "ci"
    assert stored.scopes == ["svc:sessions:read", "svc:transcripts:read"]
    assert stored.issued_by == alice
    assert key not in {stored.prefix, stored.key_hash, stored.name}


@pytest.mark.django_db
def test_issued_key_has_only_the_scopes_asked_for(api, alice):
    key = run("issue_api_key", "acme", "--member", "alice@acme.test", "--scopes", "svc:boards:read")
    response = api.get("/api/v1/sessions", key)
    assert response.status_code == 403
    assert response.json()["error"] == "insufficient_scope"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args, message",
    [
        (["nope", "--member", "alice@acme.test", "--scopes", READ], "unknown workspace"),
        (["acme", "--member", "bob@globex.test", "--scopes", READ], "not a member"),
        (["acme", "--member", "alice@acme.test", "--scopes", "svc:sessions:read,svc:everything"], "svc:everything"),
        (["acme", "--member", "alice@acme.test", "--scopes", ","], "scopes"),
    ],
)
def test_issue_api_key_errors(alice, bob, args, message):
    with pytest.raises(CommandError, match=message):
        run("issue_api_key", *args)
    assert not ApiKey.objects.exists()


@pytest.mark.django_db
def test_issue_api_key_refuses_a_deactivated_member(alice):
    run("deactivate_member", "acme", "alice@acme.test")
    with pytest.raises(CommandError, match="deactivated"):
        run("issue_api_key", "acme", "--member", "alice@acme.test", "--scopes", READ)
    assert not ApiKey.objects.exists()


@pytest.mark.django_db
def test_issue_api_key_replace_leaves_one_live_key_of_that_name(api, alice):
    """`make run` issues its demo key with --replace: repeated runs leave one live "make run"
    key (the previous ones answer 401), and keys of other names or members are untouched."""
    other_member = factories.member(alice.workspace, "carol@acme.test")
    other_name = run("issue_api_key", "acme", "--member", "alice@acme.test", "--scopes", READ, "--name", "ci")
    carol = run("issue_api_key", "acme", "--member", "carol@acme.test", "--scopes", READ, "--name", "make run")
    keys = [run("issue_api_key", "acme", "--member", "alice@acme.test", "--scopes", READ, "--name", "make run",
                "--replace") for _ in range(3)]
    live = ApiKey.objects.filter(revoked_at__isnull=True)
    assert sorted(live.values_list("name", "issued_by")) == sorted(
        [("ci", alice.id), ("make run", other_member.id), ("make run", alice.id)]
    )
    assert [api.get("/api/v1/sessions", key).status_code for key in keys] == [401, 401, 200]
    assert api.get("/api/v1/sessions", other_name).status_code == 200
    assert api.get("/api/v1/sessions", carol).status_code == 200


@pytest.mark.django_db
def test_issue_api_key_replace_with_an_unknown_scope_revokes_nothing(alice):
    kept = run("issue_api_key", "acme", "--member", "alice@acme.test", "--scopes", READ, "--name", "make run")
    with pytest.raises(CommandError, match="svc:everything"):
        run("issue_api_key", "acme", "--member", "alice@acme.test", "--scopes", "svc:everything",
            "--name", "make run", "--replace")
    assert ApiKey.objects.get(revoked_at__isnull=True).key_hash == hash_api_key(kept)


@pytest.mark.django_db
def test_revoke_by_key_makes_it_unauthorized(api, alice):
    key = run("issue_api_key", "acme", "--member", "alice@acme.test", "--scopes", READ)
    assert run("revoke_api_key", key) == ApiKey.objects.get().id
    response = api.get("/api/v1/sessions", key)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


@pytest.mark.django_db
def test_revoke_by_id_makes_it_unauthorized_and_is_idempotent(api, alice, alice_key):
    other_key = factories.api_key(alice)
    api_key = ApiKey.objects.get(key_hash=hash_api_key(alice_key))
    assert run("revoke_api_key", api_key.id) == api_key.id
    revoked_at = ApiKey.objects.get(pk=api_key.pk).revoked_at
    assert revoked_at is not None
    assert run("revoke_api_key", api_key.id) == api_key.id
    assert ApiKey.objects.get(pk=api_key.pk).revoked_at == revoked_at
    assert api.get("/api/v1/sessions", alice_key).status_code == 401
    assert api.get("/api/v1/sessions", other_key).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["svc_" + "x" * 40, "01J0000000000000000000000"])
def test_revoke_an_unknown_key_is_an_error(alice_key, value):
    with pytest.raises(CommandError, match="no such API key"):
        run("revoke_api_key", value)
    assert not ApiKey.objects.filter(revoked_at__isnull=False).exists()


# As operators and scripts run them: a real process, exit status, stdout and stderr.


@pytest.mark.django_db(transaction=True)
def test_commands_in_a_process_print_the_result_last_and_fail_on_stderr(api):
    created = manage("create_workspace", "umbrella", "--name", "Umbrella")
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip().splitlines()[-1] == "umbrella"

    taken = manage("create_workspace", "umbrella")
    assert taken.returncode != 0
    assert "already exists" in taken.stderr
    assert taken.stdout.strip() == ""

    factories.member(Workspace.objects.get(slug="umbrella"), "ada@umbrella.test")
    issued = manage("issue_api_key", "umbrella", "--member", "ada@umbrella.test", "--scopes", READ)
    assert issued.returncode == 0, issued.stderr
    key = issued.stdout.strip().splitlines()[-1]
    assert key.startswith("svc_")
    assert api.get("/api/v1/sessions", key).status_code == 200

    revoked = manage("revoke_api_key", key)
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.strip().splitlines()[-1] == ApiKey.objects.get().id
    assert api.get("/api/v1/sessions", key).status_code == 401
