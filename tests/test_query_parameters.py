"""Unknown query parameters (issue 23 point 5): every REST GET answers 400 naming the ones it
does not take, instead of ignoring them (`?status=` and `?label=` looked like filters); the
credential comes first (401 whatever the parameters), and an `access_token` in the query is
never a credential. The operations are read from the served OpenAPI document, so a GET added
later is covered without touching this test."""

from __future__ import annotations

import re

import pytest

from tests import factories

pytestmark = pytest.mark.django_db


def _get_operations(api) -> list[tuple[str, list[str]]]:
    """(path with its parameters filled in, the query parameters it declares) per REST GET."""
    schema = api.client.get("/openapi.json").json()
    found = []
    for path, item in schema["paths"].items():
        operation = item.get("get")
        if not path.startswith("/api/v1/") or operation is None:
            continue
        declared = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
        found.append((re.sub(r"\{[^}]+\}", "x", path), declared))
    return found


def test_the_document_lists_the_gets(api):
    paths = {path for path, _ in _get_operations(api)}
    assert {"/api/v1/sessions", "/api/v1/sessions/x", "/api/v1/sessions/x/transcript", "/api/v1/events",
            "/api/v1/webhooks/x", "/api/v1/webhook-deliveries/x", "/api/v1/sessions/x/boards/x"} <= paths
    assert len(paths) >= 13


def test_every_rest_get_refuses_an_unknown_parameter_naming_it(api, alice_key):
    stream = "/api/v1/events/stream"  # not a DRF view: tests/test_edges.py talks to it over HTTP
    for path, declared in _get_operations(api):
        if path == stream:
            continue
        response = api.get(path, alice_key, bogus="1")
        assert response.status_code == 400, (path, response.content)
        assert response.json()["error"] == "invalid_request", path
        detail = response.json()["detail"]
        if declared:
            assert detail.startswith("bogus: unknown query parameter; the parameters are "), path
            assert sorted(detail.split("the parameters are ")[1].split(", ")) == sorted(declared), path
        else:
            assert detail == "bogus: unknown query parameter; this operation takes no query parameters", path


def test_without_a_credential_every_get_is_401_whatever_its_parameters(api, alice_key):
    for path, _ in _get_operations(api):
        for params in ({"bogus": "1"}, {"access_token": alice_key}, {"limit": "0", "bogus": "1"}):
            response = api.get(path, None, **params)
            assert response.status_code == 401, (path, params, response.content)
            assert response.json()["error"] == "unauthorized"


def test_a_bad_credential_is_401_before_any_parameter(api, alice_key):
    for path, _ in _get_operations(api):
        response = api.get(path, "svc_" + "x" * 40, bogus="1")
        assert response.status_code == 401, path


def test_access_token_in_the_query_is_a_parameter_like_any_other(api, acme, alice_key):
    factories.session(acme)
    response = api.get("/api/v1/sessions", alice_key, access_token=alice_key)
    assert response.status_code == 400
    assert response.json()["detail"].startswith("access_token: unknown query parameter;")
    assert alice_key not in response.content.decode()


def test_known_parameters_still_work_everywhere_they_did(api, acme, alice_key):
    session = factories.session(acme, committed=["budget talk"], completed=True)
    for path, params in [
        ("/api/v1/sessions", {"limit": "1"}),
        (f"/api/v1/sessions/{session.id}", {}),
        (f"/api/v1/sessions/{session.id}/transcripts", {"revisionKind": "committed"}),
        ("/api/v1/transcripts/search", {"query": "budget"}),
        ("/api/v1/events", {"limit": "5"}),
        ("/api/v1/webhooks", {"limit": "5"}),
        ("/api/v1/webhook-deliveries", {"limit": "5"}),
    ]:
        response = api.get(path, alice_key, **params)
        assert response.status_code == 200, (path, response.content)
