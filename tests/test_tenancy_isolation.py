"""Two workspaces and an outsider: a credential reads its own workspace and nothing else.
Another workspace's row is indistinguishable from a missing one (`404 not_found`)."""

from __future__ import annotations

import pytest

from apps.recordings import services
from tests import factories

PER_SESSION_PATHS = [
    "/api/v1/sessions/{id}",
    "/api/v1/sessions/{id}/transcripts",
    "/api/v1/sessions/{id}/transcripts?revisionKind=final",
    "/api/v1/sessions/{id}/transcript",
    "/api/v1/sessions/{id}/boards",
    "/api/v1/sessions/{id}/boards/summary",
]


@pytest.fixture
def globex_session(globex):
    session = factories.session(globex, label="Globex secret plans", committed=["merger talk"], final=["Merger talk."])
    services.publish_board(session=session, board_id="summary", payload={"secret": True}, source_revision_kind="final")
    return session


@pytest.fixture
def acme_session(acme):
    session = factories.session(acme, label="Acme standup", committed=["merger rumours"], final=["Merger rumours."])
    services.publish_board(session=session, board_id="summary", payload={"ok": True}, source_revision_kind="final")
    return session


@pytest.fixture
def outsider(db):
    """A user with a key in a third workspace and no membership in acme or globex."""
    initech = factories.workspace("initech")
    return factories.api_key(factories.member(initech, "mallory@initech.test"), factories.ALL_SCOPES)


@pytest.mark.parametrize("path", PER_SESSION_PATHS)
def test_other_workspace_session_is_not_found(api, acme_session, globex_session, alice_key, path):
    own = api.client.get(path.format(id=acme_session.id), headers={"Authorization": f"Bearer {alice_key}"})
    assert own.status_code == 200
    foreign = api.client.get(path.format(id=globex_session.id), headers={"Authorization": f"Bearer {alice_key}"})
    assert foreign.status_code == 404
    assert foreign.json() == {"error": "not_found"}


@pytest.mark.parametrize("path", PER_SESSION_PATHS)
def test_outsider_sees_neither_workspace(api, acme_session, globex_session, outsider, path):
    for session in (acme_session, globex_session):
        response = api.client.get(path.format(id=session.id), headers={"Authorization": f"Bearer {outsider}"})
        assert response.status_code == 404 and response.json() == {"error": "not_found"}


def test_list_shows_only_own_sessions(api, acme_session, globex_session, alice_key, bob_key, outsider):
    assert [s["id"] for s in api.get("/api/v1/sessions", alice_key).json()["items"]] == [acme_session.id]
    assert [s["id"] for s in api.get("/api/v1/sessions", bob_key).json()["items"]] == [globex_session.id]
    assert api.get("/api/v1/sessions", outsider).json()["items"] == []


def test_search_finds_only_own_transcripts(api, acme_session, globex_session, alice_key, outsider):
    items = api.get("/api/v1/transcripts/search", alice_key, query="merger").json()["items"]
    assert items and {i["session"]["id"] for i in items} == {acme_session.id}
    assert api.get("/api/v1/transcripts/search", outsider, query="merger").json()["items"] == []


def test_member_of_both_workspaces_still_reads_one_per_key(api, acme, globex, acme_session, globex_session):
    both_acme = factories.member(acme, "carol@both.test")
    factories.member(globex, "carol@both.test")
    key = factories.api_key(both_acme, factories.READ_SCOPES)
    assert [s["id"] for s in api.get("/api/v1/sessions", key).json()["items"]] == [acme_session.id]
    assert api.get(f"/api/v1/sessions/{globex_session.id}", key).status_code == 404


def test_deactivation_in_one_workspace_leaves_the_other(api, acme, globex):
    from apps.tenancy import services as tenancy

    in_acme = factories.member(acme, "dave@both.test")
    in_globex = factories.member(globex, "dave@both.test")
    acme_key, globex_key = factories.api_key(in_acme), factories.api_key(in_globex)
    tenancy.deactivate_member(membership=in_acme)
    assert api.get("/api/v1/sessions", acme_key).json() == {"error": "forbidden"}
    assert api.get("/api/v1/sessions", globex_key).status_code == 200
