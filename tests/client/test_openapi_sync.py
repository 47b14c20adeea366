"""The client kept in step with the API: the live `/openapi.json` is walked, and the test fails
when a REST operation has no client method (`connect_client.OPERATIONS`), when a method does
not accept one of the operation's documented query parameters, or when a field of a documented
2xx response has no attribute in the client's model of that schema (`connect_client.models`).

The models are written by hand, not generated: they are few, their Python names and nesting
are part of the client's surface, and this test is what keeps them complete
(docs/decisions/python-client.md)."""

from __future__ import annotations

import copy
import inspect

import connect_client
import httpx
import pytest
from connect_client import models

pytestmark = [pytest.mark.e2e]

METHODS = ("get", "post", "patch", "put", "delete")
PAGINATOR_PARAMS = {"cursor"}  # the paginator sends it


def snake(name: str) -> str:
    return models.snake(name)


def client_method(client, dotted: str):
    target = client
    for name in dotted.split("."):  # `sessions.list`, `ingest.sessions.upsert`
        target = getattr(target, name, None)
    return target


def ref_name(schema: dict) -> str | None:
    ref = schema.get("$ref") or (schema.get("items") or {}).get("$ref")
    return ref.rsplit("/", 1)[1] if ref else None


def schema_problems(document: dict, name: str, model: type[models.Model] | None = None,
                    seen: set[str] | None = None) -> list[str]:
    """What the client misses of schema `name`: properties without an attribute, nested schemas
    it does not read."""
    seen = set() if seen is None else seen
    if name in seen:
        return []
    seen.add(name)
    schema = document["components"]["schemas"][name]
    properties = schema.get("properties", {})
    problems: list[str] = []
    if model is None and name in models.ENVELOPES:
        envelope = models.ENVELOPES[name]
        for prop, sub in properties.items():
            if prop not in envelope:
                problems.append(f"{name}.{prop}: not read by the client")
                continue
            nested = ref_name(sub)
            if nested:
                target = getattr(models, envelope[prop], None)
                problems += schema_problems(document, nested, target, seen)
        return problems
    model = model or models.MODELS.get(name)
    if model is None:
        return [f"{name}: no client model reads this schema"]
    if model.SCHEMA != name and models.MODELS.get(name) is not model:
        problems.append(f"{name}: read by {model.__name__}, which declares {model.SCHEMA}")
    wire = model.wire_names()
    for prop, sub in properties.items():
        if prop not in wire:
            problems.append(f"{name}.{prop}: no attribute on {model.__name__}")
            continue
        nested = ref_name(sub)
        if nested:
            problems += schema_problems(document, nested, model.NESTED.get(prop), seen)
    return problems


def problems_of(document: dict) -> list[str]:
    problems: list[str] = []
    sync = connect_client.Connect("http://x", api_key="k")
    asynchronous = connect_client.AsyncConnect("http://x", api_key="k")
    for path, operations in document["paths"].items():
        if not path.startswith("/api/v1"):
            continue
        for verb, operation in operations.items():
            if verb not in METHODS:
                continue
            op_id = operation.get("operationId")
            dotted = connect_client.OPERATIONS.get(op_id)
            if dotted is None:
                problems.append(f"{verb.upper()} {path} ({op_id}): no client method")
                continue
            method = client_method(sync, dotted)
            if method is None or client_method(asynchronous, dotted) is None:
                problems.append(f"{op_id}: {dotted} missing on Connect or AsyncConnect")
                continue
            accepted = set(inspect.signature(method).parameters)
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "query" and parameter["name"] not in PAGINATOR_PARAMS \
                        and snake(parameter["name"]) not in accepted and parameter["name"] not in accepted:
                    problems.append(f"{op_id}: {dotted}() takes no `{snake(parameter['name'])}`")
            for status, response in operation.get("responses", {}).items():
                if not status.startswith("2"):
                    continue
                for media, content in (response.get("content") or {}).items():
                    schema = content.get("schema") or {}
                    if media == "application/json" and ref_name(schema):
                        problems += [f"{op_id} {status}: {p}" for p in schema_problems(document, ref_name(schema))]
                    elif media == "text/event-stream":
                        for option in schema.get("oneOf", []):
                            name = ref_name(option)
                            properties = document["components"]["schemas"][name].get("properties", {})
                            problems += [f"{op_id} {status}: {name}.{prop}: no attribute on Event"
                                         for prop in properties if prop not in models.Event.wire_names()]
    sync.close()
    return problems


@pytest.fixture(scope="module")
def document(live) -> dict:
    response = httpx.get(f"{live.url}/openapi.json", timeout=60)
    assert response.status_code == 200
    return response.json()


def test_every_operation_and_documented_response_field_is_in_the_client(document):
    assert problems_of(document) == []
    checked = {op["operationId"] for path, ops in document["paths"].items() if path.startswith("/api/v1")
               for verb, op in ops.items() if verb in METHODS}
    assert len(checked) >= 20  # the walk saw the whole API, not an empty document


def test_a_new_operation_is_caught(document):
    doctored = copy.deepcopy(document)
    doctored["paths"]["/api/v1/sessions/{id}/notes"] = {"get": {"operationId": "listNotes", "responses": {}}}
    assert problems_of(doctored) == ["GET /api/v1/sessions/{id}/notes (listNotes): no client method"]


def test_a_new_response_field_is_caught_nested_too(document):
    doctored = copy.deepcopy(document)
    doctored["components"]["schemas"]["SessionOut"]["properties"]["ownerEmail"] = {"type": "string"}
    doctored["components"]["schemas"]["AttemptOut"]["properties"]["responseBytes"] = {"type": "integer"}
    found = problems_of(doctored)
    assert "listSessions 200: SessionOut.ownerEmail: no attribute on Session" in found
    assert "getWebhookDelivery 200: AttemptOut.responseBytes: no attribute on DeliveryAttempt" in found


def test_a_new_query_parameter_and_a_new_page_field_are_caught(document):
    doctored = copy.deepcopy(document)
    doctored["paths"]["/api/v1/sessions"]["get"]["parameters"].append({"name": "label", "in": "query"})
    doctored["components"]["schemas"]["SessionPage"]["properties"]["total"] = {"type": "integer"}
    found = problems_of(doctored)
    assert "listSessions: sessions.list() takes no `label`" in found
    assert "listSessions 200: SessionPage.total: not read by the client" in found
