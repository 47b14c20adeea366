"""The ingest API in /openapi.json: its own tag, the ingest scope on a Bearer key only, the
limits in the request schemas, and real answers that match the documented ones."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from apps.ingest import inputs
from tests.ingest.conftest import batch

OPERATIONS = {
    ("put", "/api/v1/ingest/sessions/{externalId}"),
    ("post", "/api/v1/ingest/sessions/{externalId}/segments"),
    ("post", "/api/v1/ingest/sessions/{externalId}/status"),
    ("put", "/api/v1/ingest/sessions/{externalId}/transcripts/final"),
    ("put", "/api/v1/ingest/sessions/{externalId}/boards/{boardId}"),
}


@pytest.fixture(scope="module")
def doc(django_db_blocker):
    with django_db_blocker.unblock():
        from django.test import Client

        return Client().get("/openapi.json").json()


def validator(doc: dict, schema: dict) -> Draft202012Validator:
    text = json.dumps(doc).replace('"#/components/', '"urn:openapi#/components/')
    registry = Registry().with_resource("urn:openapi", Resource.from_contents(json.loads(text),
                                                                              default_specification=DRAFT202012))
    return Draft202012Validator(json.loads(json.dumps(schema).replace('"#/components/', '"urn:openapi#/components/')),
                                registry=registry)


def test_every_ingest_operation_is_documented_under_its_tag_with_the_ingest_scope(doc):
    documented = {(m, p) for p, item in doc["paths"].items() if p.startswith("/api/v1/ingest/") for m in item}
    assert documented == OPERATIONS
    assert "ingest" in [tag["name"] for tag in doc["tags"]]
    for method, path in OPERATIONS:
        operation = doc["paths"][path][method]
        assert operation["tags"] == ["ingest"]
        assert operation["security"] == [{"bearerAuth": ["svc:ingest:write"]}]
        assert "svc:ingest:write" in operation["description"]
        assert "Idempotency-Key" in [p["name"] for p in operation["parameters"]]
        for status in ("400", "401", "403", "404", "409", "413", "422"):
            assert status in operation["responses"], (method, path, status)


def test_the_limits_are_in_the_request_schemas(doc):
    segments = doc["paths"]["/api/v1/ingest/sessions/{externalId}/segments"]["post"]["requestBody"]
    batch_schema = segments["content"]["application/json"]["schema"]["properties"]["segments"]
    assert (batch_schema["minItems"], batch_schema["maxItems"]) == (1, inputs.MAX_BATCH)
    assert batch_schema["items"]["properties"]["text"]["maxLength"] == inputs.MAX_TEXT
    board = doc["paths"]["/api/v1/ingest/sessions/{externalId}/boards/{boardId}"]["put"]["requestBody"]
    assert str(inputs.MAX_BOARD_PAYLOAD_BYTES) in json.dumps(board)


@pytest.mark.django_db
def test_real_answers_match_the_documented_schemas(doc, ingest, acme_ingest_key):
    def check(method: str, path: str, response) -> None:
        schema = doc["paths"][path][method]["responses"][str(response.status_code)]["content"]["application/json"]
        assert not list(validator(doc, schema["schema"]).iter_errors(response.json())), (path, response.json())

    base = "/api/v1/ingest/sessions/{externalId}"
    check("put", base, ingest.put("rec-1", {"label": "x"}, acme_ingest_key))
    check("post", base + "/segments", ingest.post("rec-1/segments", batch(0, 2), acme_ingest_key))
    check("post", base + "/segments", ingest.post("rec-1/segments", batch(5, 1), acme_ingest_key))
    check("post", base + "/status", ingest.post("rec-1/status", {"status": "completed"}, acme_ingest_key))
    check("post", base + "/status", ingest.post("rec-1/status", {"status": "processing"}, acme_ingest_key))
    final = {"segments": [{"timestampStart": 0, "timestampEnd": 1, "text": "x"}]}
    check("put", base + "/transcripts/final", ingest.put("rec-1/transcripts/final", final, acme_ingest_key))
    board = {"status": "ready", "sourceRevisionKind": "final", "payload": [1]}
    check("put", base + "/boards/{boardId}", ingest.put("rec-1/boards/summary", board, acme_ingest_key))
    check("put", base + "/boards/{boardId}", ingest.put("rec-1/boards/summary", board, acme_ingest_key))
    check("put", base, ingest.put("rec-1", {"label": 3}, acme_ingest_key))
