"""`/openapi.json`'s error examples are true: every example of every response carries an `error`
that its status can carry, by the contract's error table (§7) and the extension codes of
apps/core/errors.py, never by the examples themselves; every JSON error response has examples
(else Swagger UI makes one from the first branch of `Error`'s oneOf, whatever the status)."""

from __future__ import annotations

from typing import Any

import pytest

from apps.core.openapi import wire_codes

# The contract's error table: status → the codes it lists for it.
CONTRACT = {
    400: {"invalid_request", "invalid_filters", "filter_cost_exceeded"},
    401: {"unauthorized"},
    403: {"forbidden", "insufficient_scope"},
    404: {"not_found", "workspace_not_found"},
    429: {"connection_limit"},
    500: {"internal_server_error"},
}


def allowed() -> dict[int, set[str]]:
    """The contract's rows, and each extension code at the one status its class answers with."""
    by_status = {status: set(codes) for status, codes in CONTRACT.items()}
    for code, (status, _, _) in wire_codes().items():
        by_status.setdefault(status, set()).add(code)
    return by_status


@pytest.fixture(scope="module")
def doc(django_db_blocker) -> dict[str, Any]:
    with django_db_blocker.unblock():
        from django.test import Client

        return Client().get("/openapi.json").json()


def error_responses(doc: dict[str, Any]):
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict):
                continue
            for status, response in operation.get("responses", {}).items():
                if status.isdigit() and int(status) >= 400:
                    yield f"{method.upper()} {path} {status}", int(status), response, operation


def examples_of(media: dict[str, Any]) -> list[Any]:
    found = [example["value"] for example in media.get("examples", {}).values()]
    return found + ([media["example"]] if "example" in media else [])


def test_the_contract_table_is_what_the_error_classes_answer():
    codes = wire_codes()
    for status, names in CONTRACT.items():
        for code in names:
            assert codes[code][0] == status, code


def test_every_example_carries_a_code_its_status_can_carry(doc):
    table, codes = allowed(), wire_codes()
    checked = 0
    for where, status, response, _ in error_responses(doc):
        for media in response.get("content", {}).values():
            for value in examples_of(media):
                error = value.get("error") if isinstance(value, dict) else None
                if isinstance(error, dict):
                    continue  # a JSON-RPC error object (/mcp), not an error code
                assert isinstance(error, str), where
                assert error in table.get(status, set()), f"{where}: example says {error}"
                component = doc["components"]["schemas"][codes[error][1]]
                assert set(component["required"]) <= set(value), f"{where}: {error} lacks a required field"
                checked += 1
    assert checked > 100


def test_every_json_error_response_shows_examples_of_its_own(doc):
    for where, status, response, _ in error_responses(doc):
        media = response.get("content", {}).get("application/json")
        if media is None or "Error" not in repr(media.get("schema")):
            continue  # RFC 6749's OAuth errors, JSON-RPC's
        assert examples_of(media), where


def test_the_examples_of_refusals_say_what_to_do(doc):
    listing = doc["paths"]["/api/v1/sessions"]["get"]["responses"]
    unauthorized = examples_of(listing["401"]["content"]["application/json"])
    assert [e["error"] for e in unauthorized] == ["unauthorized"] * 3
    assert all(e["detail"].startswith("Authorization: ") for e in unauthorized)
    scope = examples_of(listing["403"]["content"]["application/json"])[0]
    assert (scope["error"], scope["requiredScopes"]) == ("insufficient_scope", ["svc:sessions:read"])
    ingest = doc["paths"]["/api/v1/ingest/sessions/{externalId}"]["put"]["responses"]
    assert examples_of(ingest["403"]["content"]["application/json"])[0]["requiredScopes"] == ["svc:ingest:write"]
    assert [e["error"] for e in examples_of(ingest["409"]["content"]["application/json"])] == ["conflict"]
    resync = examples_of(doc["paths"]["/api/v1/events"]["get"]["responses"]["410"]["content"]["application/json"])
    assert resync[0]["error"] == "resync_required" and "without `after`" in resync[0]["detail"]
    stream = doc["paths"]["/api/v1/events/stream"]["get"]["responses"]
    assert {e["error"] for e in examples_of(stream["429"]["content"]["application/json"])} == {
        "rate_limited", "connection_limit"}
    assert "connection_limit" not in {e["error"] for e in examples_of(listing["429"]["content"]["application/json"])}
    for where, status, response, operation in error_responses(doc):
        if status in (401, 403) and operation.get("security"):
            assert "WWW-Authenticate" in response.get("headers", {}), where
