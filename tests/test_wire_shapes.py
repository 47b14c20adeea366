"""One declaration per wire shape (apps/core/shapes.py and each app's shapes.py): the bytes the
generated representations write are those the hand-written functions wrote; enum values are the
models' choices; /openapi.json's components are the declarations; and the same session reads
the same through REST, MCP `structuredContent`, the event stream and a webhook body."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import httpx
import orjson
import pytest
from django.db import connection
from django.test import Client

from apps.core.shapes import COMPONENTS, STRING, TIMESTAMP, Field, Shape, Spread
from apps.events.models import Event
from apps.events.representations import event_envelope
from apps.events.shapes import EVENT_ENVELOPE
from apps.recordings import representations as recordings_repr
from apps.recordings import services as recordings
from apps.recordings import shapes as recordings_shapes
from apps.recordings.models import BoardContent, Segment, Session, Transcript
from apps.recordings.search import SearchHit
from apps.webhooks import representations as webhooks_repr
from apps.webhooks import shapes as webhooks_shapes
from apps.webhooks.models import Delivery, DeliveryAttempt, WebhookEndpoint
from tests import factories
from tests.events.live import Reader
from tests.webhooks.conftest import fresh_process_caches, wait_until, webhook_settings  # noqa: F401
from tests.webhooks.receiver import Receiver

T = datetime(2026, 1, 5, 9, 30, 0, 123456, tzinfo=timezone.utc)

# What the hand-written representation functions (56306b3) wrote for the objects below, byte
# for byte (orjson, as REST and MCP write them; the webhook body as it is signed).
GOLDEN = {
    'session': (
        '{"id":"01sess","label":"Kickoff ☃ \\"q\\"","status":"processing","startedAt":"2026-01-05T09:30:00.'
        '123Z","endedAt":null,"createdAt":"2026-01-05T09:30:00.123Z","memo":null,"updatedAt":"2026-01-05T'
        '09:30:01.123Z"}'
    ),
    'summary': (
        '{"id":"01sess","label":"Kickoff ☃ \\"q\\"","status":"processing","startedAt":"2026-01-05T09:30:00.'
        '123Z","endedAt":null,"createdAt":"2026-01-05T09:30:00.123Z"}'
    ),
    'flat_segment': (
        '{"id":"01seg","sequence":3,"timestampStart":1000,"timestampEnd":2500,"speakerLabel":null,"text":'
        '"héllo\\nworld","confidence":0.30000000000000004,"createdAt":"2026-01-05T09:30:00.123Z"}'
    ),
    'revision': (
        '{"id":"01tr","revisionKind":"final","createdAt":"2026-01-05T09:30:00.123Z","segments":[{"id":"01'
        'seg","sequence":3,"timestampStart":1000,"timestampEnd":2500,"speakerLabel":null,"text":"héllo\\nw'
        'orld","confidence":0.30000000000000004,"createdAt":"2026-01-05T09:30:00.123Z","sessionCommittedI'
        'ndex":7},{"id":"01seg","sequence":3,"timestampStart":1000,"timestampEnd":2500,"speakerLabel":nul'
        'l,"text":"héllo\\nworld","confidence":0.30000000000000004,"createdAt":"2026-01-05T09:30:00.123Z",'
        '"sessionCommittedIndex":7}]}'
    ),
    'search_hit': (
        '{"transcriptId":"01tr","revisionKind":"final","session":{"id":"01sess","label":"Kickoff ☃ \\"q\\""'
        ',"status":"processing","startedAt":"2026-01-05T09:30:00.123Z","endedAt":null,"createdAt":"2026-0'
        '1-05T09:30:00.123Z"},"id":"01sess","label":"Kickoff ☃ \\"q\\"","status":"processing","startedAt":"'
        '2026-01-05T09:30:00.123Z","endedAt":null,"createdAt":"2026-01-05T09:30:00.123Z","snippet":"…héll'
        'o…","sequence":3,"timestampStart":1000}'
    ),
    'board_summary': (
        '{"id":"01b","boardId":"summary","version":2,"status":"ready","isCurrent":true,"sourceRevisionKin'
        'd":"committed","createdAt":"2026-01-05T09:30:00.123Z"}'
    ),
    'board': (
        '{"id":"01b","boardId":"summary","version":2,"status":"ready","isCurrent":true,"sourceRevisionKin'
        'd":"committed","createdAt":"2026-01-05T09:30:00.123Z","payload":{"a":[1,null,2.5]},"payloadHash"'
        ':"sha256:ab"}'
    ),
    'endpoint': (
        '{"id":"wh_1","name":"n","url":"https://x.example/h","filters":[{"type":"session.status_changed","s'
        'tatus":["completed"]}],"active":true,"disabledReason":null,"signing":"svc","signingSecret":null,"p'
        'reviousSecretExpiresAt":null,"createdAt":"2026-01-05T09:30:00.123Z","updatedAt":"2026-01-05T09:30:'
        '00.123Z"}'
    ),
    'delivery': (
        '{"id":"dlv_1","eventId":"evt_1","eventType":"session.created","endpointId":"wh_1","endpointName"'
        ':"n","endpointUrl":"https://x.example/h","kind":"event","status":"dead_letter","attemptCount":7,'
        '"lastHttpStatus":500,"nextAttemptAt":null,"terminalAt":"2026-01-05T09:30:00.123Z","stopReason":"'
        'max_attempts","createdAt":"2026-01-05T09:30:00.123Z","updatedAt":"2026-01-05T09:30:00.123Z"}'
    ),
    'live_delivery': (
        '{"id":"dlv_2","eventId":"evt_2","eventType":"webhook.test","endpointId":"wh_1","endpointName":"n'
        '","endpointUrl":"https://x.example/h","kind":"test","status":"retrying","attemptCount":1,"lastHt'
        'tpStatus":null,"nextAttemptAt":"2026-01-05T09:30:00.123Z","terminalAt":null,"stopReason":null,"c'
        'reatedAt":"2026-01-05T09:30:00.123Z","updatedAt":"2026-01-05T09:30:00.123Z"}'
    ),
    'with_attempts': (
        '{"id":"dlv_1","eventId":"evt_1","eventType":"session.created","endpointId":"wh_1","endpointName":"'
        'n","endpointUrl":"https://x.example/h","kind":"event","status":"dead_letter","attemptCount":7,"las'
        'tHttpStatus":500,"nextAttemptAt":null,"terminalAt":"2026-01-05T09:30:00.123Z","stopReason":"max_at'
        'tempts","createdAt":"2026-01-05T09:30:00.123Z","updatedAt":"2026-01-05T09:30:00.123Z","attempts":['
        '{"attemptNumber":1,"startedAt":"2026-01-05T09:30:00.123Z","completedAt":"2026-01-05T09:30:00.123Z"'
        ',"httpStatus":null,"durationMs":12,"error":"timeout","errorDetail":null},{"attemptNumber":2,"start'
        'edAt":"2026-01-05T09:30:00.123Z","completedAt":"2026-01-05T09:30:00.123Z","httpStatus":204,"durati'
        'onMs":3,"error":null,"errorDetail":null}]}'
    ),
    'body': (
        '{"id":"evt_1","type":"session.created","occurredAt":"2026-01-05T09:30:00.123Z","data":{"sessionI'
        'd":"01sess","session":{"id":"01sess","label":"Kickoff ☃ \\"q\\"","status":"processing","startedAt"'
        ':"2026-01-05T09:30:00.123Z","endedAt":null,"createdAt":"2026-01-05T09:30:00.123Z","memo":null,"u'
        'pdatedAt":"2026-01-05T09:30:01.123Z"}}}'
    ),
}


def objects() -> tuple:
    session = Session(id="01sess", label="Kickoff ☃ \"q\"", memo=None, status="processing", started_at=T,
                      ended_at=None, created_at=T, updated_at=T + timedelta(seconds=1))
    segment = Segment(id="01seg", transcript_id="01tr", sequence=3, session_committed_index=7, timestamp_start=1000,
                      timestamp_end=2500, speaker_label=None, text="héllo\nworld", confidence=0.1 + 0.2,
                      created_at=T)
    transcript = Transcript(id="01tr", revision_kind="final", created_at=T)
    board = BoardContent(id="01b", board_id="summary", version=2, status="ready", is_current=True,
                         source_revision_kind="committed", created_at=T, payload={"a": [1, None, 2.5]},
                         payload_hash="sha256:ab")
    endpoint = WebhookEndpoint(id="wh_1", name="n", url="https://x.example/h",
                               filters=[{"type": "session.status_changed", "status": ["completed"]}], active=True,
                               created_at=T, updated_at=T)
    delivery = Delivery(id="dlv_1", event_id="evt_1", event_type="session.created", endpoint=endpoint, kind="event",
                        status="dead_letter", attempt_count=7, last_http_status=500, next_attempt_at=T,
                        terminal_at=T, stop_reason="max_attempts", created_at=T, updated_at=T)
    live = Delivery(id="dlv_2", event_id="evt_2", event_type="webhook.test", endpoint=endpoint, kind="test",
                    status="retrying", attempt_count=1, last_http_status=None, next_attempt_at=T, terminal_at=None,
                    stop_reason="", created_at=T, updated_at=T)
    attempts = [DeliveryAttempt(number=1, started_at=T, completed_at=T, http_status=None, duration_ms=12,
                                error="timeout"),
                DeliveryAttempt(number=2, started_at=T, completed_at=T, http_status=204, duration_ms=3, error="")]
    return session, segment, transcript, board, endpoint, delivery, live, attempts


def test_generated_representations_write_the_bytes_the_hand_written_ones_wrote():
    r, w = recordings_repr, webhooks_repr
    session, segment, transcript, board, endpoint, delivery, live, attempts = objects()
    produced = {
        "session": r.session_repr(session),
        "summary": r.session_summary_repr(session),
        "flat_segment": r.flat_segment_repr(segment),
        "revision": r.transcript_revision_repr(transcript, [segment, segment]),
        "search_hit": r.search_hit_repr(SearchHit(transcript, session, "…héllo…", 3, 1000)),
        "board_summary": r.board_summary_repr(board),
        "board": r.board_repr(board),
        "endpoint": w.endpoint_repr(endpoint),
        "delivery": w.delivery_repr(delivery),
        "live_delivery": w.delivery_repr(live),
        "with_attempts": w.delivery_with_attempts_repr(delivery, attempts),
    }
    written = {name: orjson.dumps(value).decode() for name, value in produced.items()}
    written["body"] = w.request_body(event_id="evt_1", event_type="session.created",
                                     occurred_at="2026-01-05T09:30:00.123Z",
                                     data={"sessionId": "01sess", "session": produced["session"]})
    assert written == GOLDEN


def test_event_data_is_the_declared_shape_of_the_rest_representations():
    session, segment, *_ = objects()
    created = recordings_repr.session_created_data(session, T)
    assert list(created) == ["sessionId", "occurredAt", "session"]
    assert created["session"] == recordings_repr.session_repr(session)
    changed = recordings_repr.session_status_changed_data(session, "recording", T)
    assert list(changed) == ["sessionId", "status", "previousStatus", "occurredAt", "session"]
    assert (changed["status"], changed["previousStatus"]) == ("processing", "recording")
    segment_data = recordings_repr.transcript_segment_created_data("01sess", T, segment)
    assert segment_data == {"sessionId": "01sess", "occurredAt": "2026-01-05T09:30:00.123Z",
                            **recordings_repr.flat_segment_repr(segment)}
    assert list(segment_data)[2:] == list(recordings_repr.flat_segment_repr(segment))


def test_stored_data_goes_out_in_declared_order_whatever_order_the_database_kept():
    session, segment, *_ = objects()
    recorded = recordings_repr.session_status_changed_data(session, "recording", T)

    def jsonb(value):  # PostgreSQL's jsonb order: shorter keys first, then bytewise
        if isinstance(value, dict):
            return {k: jsonb(value[k]) for k in sorted(value, key=lambda k: (len(k.encode()), k.encode()))}
        return value

    stored = jsonb(recorded)
    assert list(stored) != list(recorded) and list(stored["session"]) != list(recorded["session"])
    event = Event(type="session.status_changed", session_id="01sess", occurred_at=T, data=stored)
    assert orjson.dumps(event_envelope(event)["data"]) == orjson.dumps(recorded)
    # Keys the declaration does not know (an older or newer writer) are kept, after the rest.
    event.data = {"extra": 1, **stored}
    assert list(event_envelope(event)["data"]) == [*recorded, "extra"]
    unknown_type = Event(type="board.updated", session_id="01sess", occurred_at=T, data={"b": 1, "a": 2})
    assert list(event_envelope(unknown_type)["data"]) == ["b", "a"]


# --- Enum values are the models' choices ---------------------------------------------------------

MODEL_SHAPES = [
    (Session, recordings_shapes.SESSION, ""),
    (Transcript, recordings_shapes.TRANSCRIPT_REVISION, "transcript."),
    (BoardContent, recordings_shapes.BOARD, ""),
    (Event, EVENT_ENVELOPE, ""),
    (Delivery, webhooks_shapes.DELIVERY, ""),
    (DeliveryAttempt, webhooks_shapes.ATTEMPT, ""),
]


@pytest.mark.parametrize("model, shape, prefix", MODEL_SHAPES, ids=[s.name for _, s, _ in MODEL_SHAPES])
def test_every_field_with_choices_on_the_wire_declares_the_models_choices(model, shape, prefix):
    by_path = {f.path: f for f in shape.fields}
    checked = 0
    for model_field in model._meta.concrete_fields:
        declared = by_path.get(prefix + model_field.name)
        if declared is None or not model_field.choices:
            continue
        values = [value for value, _ in model_field.choices]
        assert declared.enum == values, (shape.name, declared.name)
        schema = shape.json_schema()["properties"][declared.name]
        assert [v for v in schema["enum"] if v is not None] == values
        checked += 1
    assert checked, f"{shape.name} reads no field with choices from {model.__name__}"


# --- /openapi.json, MCP and the declarations -----------------------------------------------------


@pytest.fixture(scope="module")
def doc(django_db_blocker):
    with django_db_blocker.unblock():
        return Client().get("/openapi.json").json()


def test_openapi_components_are_the_declarations(doc):
    schemas = doc["components"]["schemas"]
    assert {"SessionOut", "FlatSegmentOut", "SearchHitOut", "BoardOut", "DeliveryOut", "AttemptOut"} <= set(COMPONENTS)
    for name, shape in COMPONENTS.items():
        assert schemas[name] == shape.json_schema(), name
    # A session in an event, a webhook body or a search hit is that one component, not a copy.
    session_ref = {"$ref": "#/components/schemas/SessionOut"}
    created_event = schemas["SessionCreatedEvent"]["properties"]["data"]["properties"]["session"]
    webhook = doc["webhooks"]["session.status_changed"]["post"]["requestBody"]["content"]["application/json"]
    assert {k: v for k, v in created_event.items() if k != "description"} == session_ref
    assert webhook["schema"]["properties"]["data"]["properties"]["session"]["$ref"] == session_ref["$ref"]
    assert "WebhookSession" not in schemas


def test_nullability_is_a_type_list_in_openapi_and_any_of_in_portable_schemas():
    shape = Shape("Probe", (Field("at", TIMESTAMP, nullable=True), Field("kind", STRING, nullable=True,
                                                                             choices=["a", "b"])))
    openapi, portable = shape.json_schema()["properties"], shape.json_schema(portable=True)["properties"]
    assert openapi["at"]["type"] == ["string", "null"]
    assert openapi["kind"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert portable["at"]["anyOf"] == [{"type": "string", "format": "date-time"}, {"type": "null"}]
    assert portable["kind"] == {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]}


def test_a_declaration_that_names_a_wire_field_twice_or_a_source_of_no_parameter_is_refused():
    with pytest.raises(ValueError, match="declared twice"):
        Shape("Twice", (Field("id", STRING), Spread(recordings_shapes.SESSION_SUMMARY, "obj")))
    with pytest.raises(ValueError, match="does not start with"):
        Shape("Stray", (Field("id", STRING, source="elsewhere.id"),), params=("a", "b")).encode  # noqa: B018


# --- The same session through every door ---------------------------------------------------------


@pytest.fixture
def live_receiver(webhook_server, webhook_settings):  # noqa: F811
    receiver = Receiver(f"{webhook_server.url}/.well-known/webhook-signing-keys.json")
    yield receiver
    receiver.close()


def mcp_get_session(url: str, key: str, session_id: str) -> dict:
    response = httpx.post(
        f"{url}/mcp",
        headers={"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream",
                 "MCP-Protocol-Version": "2025-11-25"},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "get_session", "arguments": {"sessionId": session_id}}},
        timeout=20,
    )
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return result["structuredContent"]["session"]


@pytest.mark.django_db(transaction=True)
def test_rest_mcp_stream_log_outbox_and_webhook_show_one_session_alike(webhook_server, live_receiver, alice):  # noqa: F811
    url = webhook_server.url
    key = factories.api_key(alice, factories.ALL_SCOPES)
    headers = {"Authorization": f"Bearer {key}"}
    subscribed = httpx.post(f"{url}/api/v1/webhooks", headers=headers, timeout=20, json={
        "name": "shapes", "url": live_receiver.url,
        "filters": [{"type": "session.created"}, {"type": "session.status_changed"}]})
    assert subscribed.status_code == 201, subscribed.text
    reader = Reader(url, key)
    try:
        assert reader.status == 200
        session = recordings.create_session(workspace=alice.workspace, label='Wire ☃ "shapes" é',
                                            memo="two\nlines")
        for step, event_type in enumerate(["session.created", "session.status_changed"]):
            if event_type == "session.status_changed":
                recordings.change_session_status(session=session, status="completed")
            rest = httpx.get(f"{url}/api/v1/sessions/{session.id}", headers=headers, timeout=20).json()["session"]
            mcp = mcp_get_session(url, key, session.id)
            [frame] = [e for e in reader.wait_events(step + 1) if e.event == event_type]
            stream = frame.json["data"]["session"]
            # As a resumed stream (or a process without Redis) sends it: read back from the outbox.
            stored = Event.objects.get(session_id=session.id, type=event_type)
            outbox = event_envelope(stored)["data"]["session"]
            received = wait_until(lambda: [r for r in live_receiver.requests  # noqa: B023
                                           if r.event and r.event["type"] == event_type], timeout=60)
            assert received[0].verified
            webhook = received[0].event["data"]["session"]
            assert rest["status"] == ("recording" if step == 0 else "completed")
            for door, seen in {"mcp": mcp, "stream": stream, "outbox": outbox, "webhook": webhook}.items():
                assert seen == rest, (event_type, door)
                assert list(seen) == list(rest), (event_type, door)  # the same field order
            # The signed webhook bytes hold the session exactly as REST writes it.
            assert orjson.dumps(rest) in received[0].body, event_type
            # The event log's item is the stream's data plus the stream's `id:`, which is also
            # the webhook's Svc-Event-Id; listed or read alone, the same object.
            logged = httpx.get(f"{url}/api/v1/events", headers=headers, timeout=20,
                               params={"sessionId": session.id, "type": event_type}).json()["items"]
            assert [item["id"] for item in logged] == [frame.id]
            assert {k: v for k, v in logged[0].items() if k != "id"} == frame.json, event_type
            if connection.vendor == "sqlite":
                # The same bytes. On PostgreSQL the log splices `data` as jsonb keeps it (its own
                # key order; apps/events/selectors.py read_log_rows, docs/events.md): equal parsed.
                assert orjson.dumps({k: v for k, v in logged[0].items() if k != "id"}).decode() == frame.data
            assert received[0].headers["Svc-Event-Id"] == frame.id
            one = httpx.get(f"{url}/api/v1/events/{frame.id}", headers=headers, timeout=20).json()
            assert one == logged[0]
        # A stream resumed after the first event replays the second from the outbox.
        first = Event.objects.get(session_id=session.id, type="session.created")
        resumed = Reader(url, key, last_event_id=first.id)
        try:
            [replayed] = [e for e in resumed.wait_events(1) if e.event == "session.status_changed"]
            assert replayed.data.encode() == orjson.dumps(event_envelope(
                Event.objects.get(session_id=session.id, type="session.status_changed")))
            assert list(replayed.json["data"]["session"]) == list(rest)
            assert list(replayed.json["data"]) == ["sessionId", "status", "previousStatus", "occurredAt", "session"]
        finally:
            resumed.close()
    finally:
        reader.close()


def test_the_row_encoder_gives_what_the_named_row_encoder_gives():
    """`encode_rows` (tuples, unpacked) against `encode_formatted` (named rows) of the same values:
    a timestamp already in wire form or turned so by `stamp`, a nullable one, `empty_is_null`,
    and a one-field shape (a one-element tuple target)."""
    from collections import namedtuple

    from apps.core.shapes import INTEGER

    shape = Shape("RowProbe", (
        Field("id", STRING), Field("n", INTEGER), Field("label", STRING, nullable=True, empty_is_null=True),
        Field("at", TIMESTAMP), Field("endedAt", TIMESTAMP, nullable=True),
    ))  # fmt: skip
    Row = namedtuple("Row", shape.flat_columns())
    rows = [("a", 1, "", "2026-01-02T03:04:05.006Z", None), ("b", 2, "x", "2026-01-02T03:04:05.007Z", "2026-01-02T03:04:06.000Z")]
    assert shape.flat_columns() == ("id", "n", "label", "at", "ended_at")
    assert shape.encode_rows()(rows) == [shape.encode_formatted(Row(*r)) for r in rows]
    stamp = str.upper
    assert shape.encode_rows(stamp)(rows) == [
        {**shape.encode_formatted(Row(*r)), "at": r[3].upper(), "endedAt": r[4] and r[4].upper()} for r in rows
    ]
    assert shape.encode_rows(stamp) is shape.encode_rows(stamp)
    one = Shape("OneProbe", (Field("id", STRING),))
    assert one.encode_rows()([("a",), ("b",)]) == [{"id": "a"}, {"id": "b"}]


def test_a_shape_with_nested_or_computed_fields_has_no_row_encoder():
    for shape in (recordings_shapes.TRANSCRIPT_REVISION, recordings_shapes.SEARCH_HIT, recordings_shapes.FLAT_TRANSCRIPT):
        with pytest.raises(ValueError):
            shape.encode_rows()
    assert recordings_shapes.FLAT_SEGMENT.flat_columns() == recordings_shapes.FLAT_SEGMENT.source_attributes()
