"""`/openapi.json` documents the event stream (issue 6, point 10): the path, `text/event-stream`
with one envelope schema per event type, the `filters` parameter, `Last-Event-ID` (our
extension), every error. The schemas are checked against what the code really produces: the
envelopes of events recorded by the services, the cost error's body, and the filter rules."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from apps.events import filters
from apps.events.models import Event
from apps.events.representations import event_envelope
from apps.recordings import services as recordings
from tests import factories

PATH = "/api/v1/events/stream"
TYPES = {
    "session.created": "SessionCreatedEvent",
    "session.status_changed": "SessionStatusChangedEvent",
    "transcript.segment.created": "TranscriptSegmentCreatedEvent",
}


@pytest.fixture(scope="module")
def doc(django_db_blocker):
    with django_db_blocker.unblock():
        return Client().get("/openapi.json").json()


@pytest.fixture(scope="module")
def operation(doc):
    return doc["paths"][PATH]["get"]


def validator(doc, schema: dict) -> Draft202012Validator:
    text = json.dumps(doc).replace('"#/components/', '"urn:openapi#/components/')
    whole = json.loads(text)
    registry = Registry().with_resource("urn:openapi", Resource.from_contents(whole, default_specification=DRAFT202012))
    schema = json.loads(json.dumps(schema).replace('"#/components/', '"urn:openapi#/components/'))
    return Draft202012Validator(schema, registry=registry)


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def errors_of(v: Draft202012Validator, instance) -> list[str]:
    return [e.message for e in v.iter_errors(instance)]


def test_the_stream_is_a_get_with_bearer_and_per_type_scopes(doc, operation):
    assert set(doc["paths"][PATH]) == {"get"}  # anything else is 405, documented below
    assert {"bearerAuth": []} in operation["security"]
    oauth = [s["oauth2"] for s in operation["security"] if "oauth2" in s]
    assert ["svc:sessions:read"] in oauth and ["svc:transcripts:read"] in oauth
    ids = [op["operationId"] for item in doc["paths"].values() for op in item.values() if isinstance(op, dict)]
    assert ids.count(operation["operationId"]) == 1


def test_200_is_text_event_stream_with_one_envelope_per_event_type(doc, operation):
    ok = operation["responses"]["200"]
    assert set(ok["content"]) == {"text/event-stream"}
    schema = ok["content"]["text/event-stream"]["schema"]
    assert schema["oneOf"] == [ref(name) for name in TYPES.values()]
    assert schema["discriminator"]["mapping"] == {t: ref(n)["$ref"] for t, n in TYPES.items()}
    assert {"Cache-Control", "X-Accel-Buffering"} <= set(ok["headers"])
    for text in (": ping", "id: evt_", "event: ", "data: ", "Last-Event-ID", "best effort", "REST"):
        assert text in operation["description"] + ok["content"]["text/event-stream"]["example"], text
    for event_type, name in TYPES.items():
        envelope = doc["components"]["schemas"][name]
        assert envelope["additionalProperties"] is False
        assert envelope["required"] == ["type", "sessionId", "occurredAt", "data"]
        assert set(envelope["properties"]) == {"type", "sessionId", "occurredAt", "data"}
        assert envelope["properties"]["type"]["const"] == event_type


def test_event_data_fields_are_the_contracts(doc):
    # docs/api/events-and-stream.md, field for field.
    expected = {
        "session.created": {"sessionId", "occurredAt", "session"},
        "session.status_changed": {"sessionId", "status", "previousStatus", "occurredAt", "session"},
        "transcript.segment.created": {
            "sessionId", "occurredAt", "id", "sequence", "timestampStart", "timestampEnd",
            "speakerLabel", "text", "confidence", "createdAt",
        },
    }
    for event_type, name in TYPES.items():
        data = doc["components"]["schemas"][name]["properties"]["data"]
        assert set(data["properties"]) == set(data["required"]) == expected[event_type], event_type
        assert data["additionalProperties"] is False
    segment = doc["components"]["schemas"]["TranscriptSegmentCreatedEvent"]["properties"]["data"]["properties"]
    assert "null" in segment["speakerLabel"]["type"] and "null" in segment["confidence"]["type"]
    assert "null" not in segment["text"]["type"]


@pytest.mark.django_db
def test_events_recorded_by_the_services_match_their_documented_schema(doc, acme):
    session = recordings.create_session(workspace=acme, label=None)
    recordings.append_committed_segments(session=session, segments=factories.segments(["hello", "world"]))
    recordings.change_session_status(session=session, status="processing")
    recordings.change_session_status(session=session, status="completed")
    events = list(Event.objects.filter(session_id=session.id).order_by("id"))
    assert [e.type for e in events] == [
        "session.created", "transcript.segment.created", "transcript.segment.created",
        "session.status_changed", "session.status_changed",
    ]
    stream_schema = doc["paths"][PATH]["get"]["responses"]["200"]["content"]["text/event-stream"]["schema"]
    any_event = validator(doc, stream_schema)
    for event in events:
        envelope = json.loads(json.dumps(event_envelope(event)))  # as the wire carries it
        assert not errors_of(validator(doc, ref(TYPES[event.type])), envelope), event.type
        assert not errors_of(any_event, envelope), event.type
        # The schemas can fail: an extra property, a missing one, or another type's shape.
        assert errors_of(any_event, {**envelope, "id": event.id})
        assert errors_of(any_event, {k: v for k, v in envelope.items() if k != "occurredAt"})
        assert errors_of(any_event, {**envelope, "data": {**envelope["data"], "extra": 1}})
        other = next(t for t in TYPES if t != event.type)
        assert errors_of(validator(doc, ref(TYPES[other])), envelope)


def test_filters_parameter_is_a_url_encoded_json_array(operation):
    [param] = [p for p in operation["parameters"] if p["name"] == "filters"]
    assert param["in"] == "query" and param["required"] is False
    schema = param["content"]["application/json"]["schema"]
    assert schema == {"type": "array", "minItems": 1, "maxItems": 20, "items": ref("EventStreamFilterEntry")}
    for text in ("URL-encoded", "OR-matched", "sessionId", "10", "100"):
        assert text in param["description"], text


ENTRY_CASES = [
    {"type": "session.created"},
    {"type": "session.status_changed"},
    {"type": "session.created", "sessionId": "s1"},
    {"type": "transcript.segment.created", "sessionId": "s1"},
    {"type": "transcript.segment.created"},
    {"type": "transcript.segment.created", "sessionId": ""},
    {"type": "session.created", "sessionId": ""},
    {"type": "session.created", "sessionId": 1},
    {"type": "session.created", "sessionId": None},
    {"type": "session.created", "extra": True},
    {"type": "board.updated"},
    {"sessionId": "s1"},
    {},
    "session.created",
    None,
]


@pytest.mark.parametrize("entry", ENTRY_CASES, ids=[json.dumps(e) for e in ENTRY_CASES])
def test_documented_filter_entry_schema_agrees_with_the_code(doc, operation, entry):
    [param] = [p for p in operation["parameters"] if p["name"] == "filters"]
    documented = not errors_of(validator(doc, param["content"]["application/json"]["schema"]), [entry])
    try:
        filters.parse_entries([entry])
        accepted = True
    except filters.InvalidFilters:
        accepted = False
    assert documented is accepted


def test_array_length_limits_agree_with_the_code(doc, operation):
    [param] = [p for p in operation["parameters"] if p["name"] == "filters"]
    v = validator(doc, param["content"]["application/json"]["schema"])
    for count in (0, 1, 20, 21):
        value = [{"type": "session.created"}] * count
        assert (not errors_of(v, value)) is (1 <= count <= 20)


def test_last_event_id_is_documented_as_an_extension(operation):
    [param] = [p for p in operation["parameters"] if p["name"] == "Last-Event-ID"]
    assert param["in"] == "header" and param["required"] is False
    assert param["schema"]["maxLength"] == 64
    for text in ("Extension beyond the contract", "CONNECT_SSE_RESUME_SECONDS", "resume-unavailable", "REST"):
        assert text in param["description"], text


def test_every_error_is_documented_as_json(operation):
    responses = operation["responses"]
    assert set(responses) == {"200", "400", "401", "403", "404", "405", "429", "500", "503"}
    for status in ("401", "403", "404", "405", "429", "500", "503"):
        assert responses[status]["content"]["application/json"]["schema"] == ref("Error"), status
    assert responses["400"]["content"]["application/json"]["schema"] == {
        "anyOf": [ref("Error"), ref("FilterCostExceeded")]
    }
    for status, codes in {
        "400": ["invalid_filters", "filter_cost_exceeded", "invalid_request"],
        "401": ["unauthorized"],
        "403": ["insufficient_scope", "forbidden"],
        "404": ["workspace_not_found"],
        "405": ["method_not_allowed"],
        "429": ["rate_limited", "connection_limit", "CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE"],
        "500": ["internal_server_error"],
        "503": ["unavailable", "Retry-After"],
    }.items():
        for code in codes:
            assert code in responses[status]["description"], (status, code)
    assert "WWW-Authenticate" in responses["401"]["headers"]
    # Opening a stream counts in REST's rate-limit buckets: rate_limited too, and the RateLimit headers.
    assert "rate_limited" in responses["429"]["description"]
    assert "Retry-After" in responses["429"]["headers"]
    assert all("RateLimit-Limit" in responses[status]["headers"] for status in ("200", "400", "403", "429"))


def test_filter_cost_exceeded_body_matches_its_schema(doc):
    entries = [filters.FilterEntry("transcript.segment.created", f"s{i}") for i in range(10)]
    entries.append(filters.FilterEntry("session.created"))
    with pytest.raises(filters.FilterCostExceeded) as caught:
        filters.check_cost(entries)
    body = {"error": "filter_cost_exceeded", **caught.value.body_fields()}
    v = validator(doc, ref("FilterCostExceeded"))
    assert not errors_of(v, body)
    assert errors_of(v, {**body, "cost": "110"})
    assert errors_of(v, {k: val for k, val in body.items() if k != "budget"})
    assert errors_of(v, {**body, "entries": [{"type": "session.created"}]})  # each entry has its cost
    four_hundred = doc["paths"][PATH]["get"]["responses"]["400"]["content"]["application/json"]["schema"]
    assert not errors_of(validator(doc, four_hundred), body)
    invalid_filters = {"error": "invalid_filters", "detail": "filters[0].sessionId: required for transcript.segment.created"}
    assert not errors_of(validator(doc, four_hundred), invalid_filters)
