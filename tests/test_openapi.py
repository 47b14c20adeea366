"""`/openapi.json` is the machine-readable contract: it documents every path, and real
responses match it exactly (strict: every documented field present, no undocumented one)."""

from __future__ import annotations

import copy
import json
import re

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from apps.recordings import services
from tests import factories

CONTRACT_PATHS = {
    "/api/v1/sessions",
    "/api/v1/sessions/{id}",
    "/api/v1/sessions/{id}/transcripts",
    "/api/v1/sessions/{id}/transcript",
    "/api/v1/transcripts/search",
    "/api/v1/sessions/{sessionId}/boards",
    "/api/v1/sessions/{sessionId}/boards/{boardSpecId}",
    "/.well-known/oauth-protected-resource",
}


@pytest.fixture(scope="module")
def doc(django_db_blocker):
    with django_db_blocker.unblock():
        from django.test import Client

        return Client().get("/openapi.json").json()


def strict(schema):
    """Every object schema: all properties required, nothing else allowed."""
    if isinstance(schema, dict):
        if "properties" in schema:
            schema.setdefault("additionalProperties", False)
            schema["required"] = sorted(schema["properties"])
        for value in schema.values():
            strict(value)
    elif isinstance(schema, list):
        for value in schema:
            strict(value)
    return schema


def validator_for(doc, path: str, status: int = 200) -> Draft202012Validator:
    strict_doc = strict(copy.deepcopy(doc))
    text = json.dumps(strict_doc).replace('"#/components/', '"urn:openapi#/components/')
    whole = json.loads(text)
    registry = Registry().with_resource("urn:openapi", Resource.from_contents(whole, default_specification=DRAFT202012))
    schema = whole["paths"][path]["get"]["responses"][str(status)]["content"]["application/json"]["schema"]
    return Draft202012Validator(schema, registry=registry)


def test_document_basics(doc):
    assert doc["openapi"].startswith("3.1")
    assert doc["info"]["version"] == "1.0.0"
    assert CONTRACT_PATHS <= set(doc["paths"])
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {**schemes["bearerAuth"], "type": "http", "scheme": "bearer"}
    flow = schemes["oauth2"]["flows"]["authorizationCode"]
    assert flow["authorizationUrl"].endswith("/api/auth/oauth2/authorize")
    assert flow["tokenUrl"].endswith("/api/auth/oauth2/token")
    assert {"svc:sessions:read", "svc:transcripts:read", "svc:boards:read"} <= set(flow["scopes"])


@pytest.mark.parametrize("path", sorted(CONTRACT_PATHS - {"/.well-known/oauth-protected-resource"}))
def test_every_api_operation_documents_security_and_errors(doc, path):
    operation = doc["paths"][path]["get"]
    assert {"bearerAuth": []} in operation["security"]
    assert any("oauth2" in s and s["oauth2"] for s in operation["security"])
    for status in ("401", "403", "404", "500"):
        error = operation["responses"][status]["content"]["application/json"]["schema"]
        assert error == {"$ref": "#/components/schemas/Error"}


PUBLIC_PATHS = {
    "/.well-known/oauth-protected-resource": "get",
    "/.well-known/oauth-protected-resource/mcp": "get",
    "/.well-known/oauth-authorization-server": "get",
    "/.well-known/oauth-authorization-server/api/auth": "get",
    "/api/auth/oauth2/authorize": "get",
    "/api/auth/oauth2/token": "post",
    "/api/auth/oauth2/revoke": "post",
    "/api/auth/oauth2/register": "post",
}


@pytest.mark.parametrize("path, method", sorted(PUBLIC_PATHS.items()))
def test_public_and_authorization_server_paths_are_documented_without_security(doc, path, method):
    operation = doc["paths"][path][method]
    assert operation.get("security") in (None, [], [{}])
    assert operation["responses"]


def test_operation_ids_are_unique(doc):
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values() if isinstance(op, dict)]
    assert len(ids) == len(set(ids))


def test_public_metadata_needs_no_credential(doc):
    operation = doc["paths"]["/.well-known/oauth-protected-resource"]["get"]
    assert operation.get("security") in (None, [], [{}])


def test_paginated_parameters_are_documented(doc):
    params = {p["name"]: p for p in doc["paths"]["/api/v1/sessions"]["get"]["parameters"]}
    assert params["limit"]["schema"] == {**params["limit"]["schema"], "minimum": 1, "maximum": 100}
    assert params["cursor"]["schema"]["minLength"] == 1
    search = {p["name"]: p for p in doc["paths"]["/api/v1/transcripts/search"]["get"]["parameters"]}
    assert search["query"]["required"] is True
    assert search["revisionKind"]["schema"]["enum"] == ["committed", "final"]


def test_docs_page_is_served_offline(api, db):
    response = api.client.get("/docs")
    assert response.status_code == 200
    assert b"/openapi.json" in response.content
    assert b"cdn." not in response.content and b"unpkg" not in response.content


def test_real_responses_match_the_documented_schemas(api, doc, acme, alice_key):
    session = factories.session(acme, label=None, committed=["alpha beta", "gamma"], final=["Alpha beta gamma."])
    services.publish_board(session=session, board_id="summary", payload={"a": [1, None]}, source_revision_kind="final")
    factories.session(acme, label="second")
    calls = {
        "/api/v1/sessions": f"/api/v1/sessions?limit=1",
        "/api/v1/sessions/{id}": f"/api/v1/sessions/{session.id}",
        "/api/v1/sessions/{id}/transcripts": f"/api/v1/sessions/{session.id}/transcripts",
        "/api/v1/sessions/{id}/transcript": f"/api/v1/sessions/{session.id}/transcript",
        "/api/v1/transcripts/search": "/api/v1/transcripts/search?query=alpha",
        "/api/v1/sessions/{sessionId}/boards": f"/api/v1/sessions/{session.id}/boards",
        "/api/v1/sessions/{sessionId}/boards/{boardSpecId}": f"/api/v1/sessions/{session.id}/boards/summary",
        "/.well-known/oauth-protected-resource": "/.well-known/oauth-protected-resource",
    }
    for path, url in calls.items():
        response = api.client.get(url, headers={"Authorization": f"Bearer {alice_key}"})
        assert response.status_code == 200, (url, response.content)
        errors = list(validator_for(doc, path).iter_errors(response.json()))
        assert not errors, (path, [e.message for e in errors])
    not_found = api.get("/api/v1/sessions/nope", alice_key)
    assert not list(validator_for(doc, "/api/v1/sessions/{id}", 404).iter_errors(not_found.json()))


def test_the_document_lists_itself(doc):
    operation = doc["paths"]["/openapi.json"]["get"]
    assert operation.get("security") in (None, [], [{}])
    assert "200" in operation["responses"]


def test_every_wire_code_is_one_component_and_error_is_exactly_one_of_them(doc):
    from apps.core import errors
    from apps.core.openapi import DETAILED_CODES, wire_codes

    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.ApiError)]
    codes = wire_codes()
    assert {c.code for c in classes} | {"unsupported_media_type", "not_acceptable"} == set(codes)
    schemas = doc["components"]["schemas"]
    refs = [one["$ref"].rsplit("/", 1)[1] for one in schemas["Error"]["oneOf"]]
    assert sorted(refs) == sorted(name for _, name, _ in codes.values()) and len(refs) == len(set(refs))
    for code, (status, name, _) in codes.items():
        assert schemas[name]["properties"]["error"]["const"] == code
        detailed = (status == 400 and code != "filter_cost_exceeded") or code in DETAILED_CODES
        assert ("detail" in schemas[name]["required"]) is detailed
    # Each code's body validates against Error, as one of them only.
    body_of = {"filter_cost_exceeded": {"cost": 110, "budget": 100, "entries": []}}
    error = validator_for_schema(doc, {"$ref": "#/components/schemas/Error"})
    for code, (status, _, _) in codes.items():
        detail = {"detail": "limit: why"} if (status == 400 or code in DETAILED_CODES) and code not in body_of else {}
        body = {"error": code, **detail, **body_of.get(code, {})}
        assert not list(error.iter_errors(body)), code
    assert list(error.iter_errors({"error": "no_such_code"}))
    assert list(error.iter_errors({"error": "invalid_request"})), "a 400 without detail is not documented"


def test_every_error_response_refers_to_the_code_components(doc):
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict):
                continue
            for status, response in operation["responses"].items():
                schema = response.get("content", {}).get("application/json", {}).get("schema")
                # /mcp answers JSON-RPC errors; the authorization server, OAuth's (RFC 6749 §5.2).
                oauth = path.startswith(("/api/auth/", "/.well-known/oauth-authorization-server"))
                if int(status) < 400 or schema is None or path == "/mcp" or oauth:
                    continue
                text = json.dumps(schema)
                assert "#/components/schemas/" in text, (path, method, status)


def test_body_taking_operations_document_413(doc):
    for path, item in doc["paths"].items():
        for method in ("post", "put", "patch", "delete"):
            if method in item:
                assert "413" in item[method]["responses"], (method, path)
    webhook = doc["paths"]["/api/v1/webhooks"]["post"]["responses"]["413"]
    assert webhook["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/PayloadTooLargeError"}
    assert "payload_too_large" in webhook["description"]


def validator_for_schema(doc, schema) -> Draft202012Validator:
    text = json.dumps(doc).replace('"#/components/', '"urn:openapi#/components/')
    registry = Registry().with_resource(
        "urn:openapi", Resource.from_contents(json.loads(text), default_specification=DRAFT202012)
    )
    return Draft202012Validator(json.loads(json.dumps(schema).replace('"#/components/', '"urn:openapi#/components/')),
                                registry=registry)


def test_operations_are_grouped_by_resource(doc):
    """Issue 23: `/docs` groups operations by resource, not under one `api` tag; every operation
    has exactly one of the declared tags, and each tag is used."""
    declared = [tag["name"] for tag in doc["tags"]]
    assert declared[:7] == ["sessions", "transcripts", "search", "boards", "events", "webhooks", "deliveries"]
    used = {}
    for path, item in doc["paths"].items():
        if path.startswith("/test/"):
            continue  # tests/urls.py's views, routed in tests only
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation:
                assert len(operation.get("tags", [])) == 1 and operation["tags"][0] in declared, (method, path)
                used.setdefault(operation["tags"][0], set()).add(f"{method.upper()} {path}")
    assert set(declared) == used.keys()
    assert used["sessions"] == {"GET /api/v1/sessions", "GET /api/v1/sessions/{id}"}
    assert "GET /api/v1/sessions/{id}/transcript" in used["transcripts"]
    assert used["search"] == {"GET /api/v1/transcripts/search"}
    assert "GET /api/v1/events/stream" in used["events"]
    assert "GET /.well-known/webhook-signing-keys.json" in used["webhooks"]
    assert "POST /api/v1/webhook-deliveries/{id}/replay" in used["deliveries"]


def test_component_names_are_wire_names(doc):
    """No serializer-derived names (`PatchedEndpointPatchInRequest`): request bodies are named for
    what they are on the wire, and every `$ref` points at a component that exists."""
    schemas = doc["components"]["schemas"]
    assert not [n for n in schemas if n.startswith("Patched") or n.endswith(("Request", "In"))]
    body = doc["paths"]["/api/v1/webhooks/{id}"]["patch"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/WebhookUpdate"}
    create = doc["paths"]["/api/v1/webhooks"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert create == {"$ref": "#/components/schemas/WebhookCreate"}
    refs = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(doc)))
    assert refs <= schemas.keys()
