"""`make run`'s demo key survives restarts and what a new one does to webhooks: the command the
Makefile runs (`issue_api_key … --replace --keep-in var/demo-keys.json [--reissue]`) prints the
kept key again while it holds, so endpoints made with it keep delivering; `--reissue`
(`make run NEW_KEY=1`) revokes it, names it, and the endpoints read inactive with the reason."""

from __future__ import annotations

import stat
from io import StringIO

import pytest
from django.core.management import call_command

from apps.tenancy.models import ApiKey
from tests.webhooks.test_api import Http, create, public_dns  # noqa: F401 (a fixture)

SCOPES = "svc:sessions:read,svc:transcripts:read,svc:boards:read,svc:webhooks:read,svc:webhooks:write"


def make_run_key(kept, *extra) -> tuple[str, str]:
    """What the Makefile's run target does: (the key on the last line, stderr)."""
    out, err = StringIO(), StringIO()
    call_command("issue_api_key", "acme", "--member", "alice@acme.test", "--replace", "--scopes", SCOPES,
                 "--name", "make run", "--keep-in", str(kept), *extra, stdout=out, stderr=err)
    return out.getvalue().strip().splitlines()[-1], err.getvalue()


@pytest.mark.django_db
def test_the_demo_key_is_kept_across_runs_and_a_new_one_says_what_it_revokes(alice, tmp_path):
    kept = tmp_path / "var" / "demo-keys.json"
    first, said = make_run_key(kept)
    assert first.startswith("svc_") and "new API key" in said
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    endpoint_id = create(Http(first)).json()["id"]

    again, said = make_run_key(kept)  # the next `make run`
    assert again == first and "kept API key" in said
    assert Http(first).call("get", f"/api/v1/webhooks/{endpoint_id}").json()["active"] is True

    new, said = make_run_key(kept, "--reissue")  # `make run NEW_KEY=1`
    assert new != first
    revoked = ApiKey.objects.get(revoked_at__isnull=False)
    assert f"revoked API key {revoked.prefix}…" in said and "installation_unauthorized" in said
    assert first not in said  # never the key itself
    shown = Http(new).call("get", f"/api/v1/webhooks/{endpoint_id}").json()
    assert (shown["active"], shown["disabledReason"]) == (False, "installation_unauthorized")
    assert Http(new).call("patch", f"/api/v1/webhooks/{endpoint_id}", {"active": True}).json()["active"] is True
    assert make_run_key(kept)[0] == new


@pytest.mark.django_db
def test_a_kept_key_that_no_longer_holds_is_replaced(alice, tmp_path):
    kept = tmp_path / "demo-keys.json"
    first, _ = make_run_key(kept)
    ApiKey.objects.filter(revoked_at__isnull=True).update(scopes=["svc:sessions:read"])  # scopes changed
    second, said = make_run_key(kept)
    assert second != first and "revoked API key" in said
    kept.write_text("not json")
    third, _ = make_run_key(kept)
    assert third not in (first, second)
