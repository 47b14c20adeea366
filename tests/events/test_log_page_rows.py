"""The log page's fast path (apps/events/selectors.read_log_rows, issue 21's benchmark): rows read
as the envelope's columns, `occurredAt` formatted by the database and `data` spliced into the
page as stored. It must answer exactly what the model path (`read_log` + `event_item`) answers:
the same events, the same place, the same parsed JSON, on both databases."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import orjson
import pytest

from apps.core.timestamps import iso_ms
from apps.events import selectors
from apps.events.models import Event, EventType
from apps.events.positions import Position, encode_position
from apps.events.representations import StoredJsonRenderer, event_item, event_row_item
from apps.events.services import record_event
from apps.events.shapes import EVENT, EVENT_ROW

URL = "/api/v1/events"
UTC = timezone.utc
# Timestamps whose formatting has edges: no microseconds (Django stores no fraction then), the
# last microsecond of a millisecond (truncated, never rounded up into the next second), another
# time zone on the way in, a leap day, the first and last instant of a year.
TIMES = [
    datetime(2026, 11, 25, 10, 0, 0, tzinfo=UTC),
    datetime(2026, 11, 25, 10, 0, 59, 999999, tzinfo=UTC),
    datetime(2026, 11, 25, 10, 0, 1, 1000, tzinfo=UTC),
    datetime(2026, 11, 25, 10, 0, 1, 999, tzinfo=UTC),
    datetime(2026, 11, 25, 12, 30, 5, 123456, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2028, 2, 29, 23, 59, 59, 500000, tzinfo=UTC),
    datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
    datetime(2026, 12, 31, 23, 59, 59, 999000, tzinfo=UTC),
]
# Documents whose text must survive being spliced as stored: non-ASCII, the separators JSON allows
# raw but JavaScript did not, escapes, nesting, numbers of every kind, a key the declaration
# does not know, keys in no particular order.
DATA = [
    {"sessionId": "s1", "status": "completed", "previousStatus": "processing", "occurredAt": "2026-11-25T10:00:00.000Z"},
    {"text": "Grüße — 会議 🎉 \u2028line\u2029para \"quoted\" back\\slash\ttab\n", "sessionId": "s1", "id": "seg1",
     "sequence": 0, "timestampStart": 0, "timestampEnd": 1500, "speakerLabel": None, "confidence": 0.1 + 0.2,
     "createdAt": "2026-11-25T10:00:00.000Z", "occurredAt": "2026-11-25T10:00:00.000Z"},
    {"sessionId": "s2", "nested": {"list": [1, -2, 3.5e-7, 1e21, True, False, None, [], {}]}, "big": 2**53 + 1},
    {"z": 1, "a": 2, "sessionId": "s2", "title": "", "empty": {}},
]


def record_mixed(workspace) -> list[Event]:
    types = [EventType.SESSION_STATUS_CHANGED, EventType.TRANSCRIPT_SEGMENT_CREATED, EventType.SESSION_CREATED,
             EventType.SESSION_STATUS_CHANGED]
    recorded = [
        record_event(workspace_id=workspace.id, type=types[i % len(types)], session_id=f"s{i % 2 + 1}",
                     occurred_at=occurred_at, data=DATA[i % len(DATA)])
        for i, occurred_at in enumerate(TIMES)
    ]
    return [Event.objects.get(pk=e.pk) for e in recorded]  # as stored (position given by the database)


def as_json(value) -> object:
    """Parsed back with the standard library: PostgreSQL's jsonb gives 1e21 back as an integer
    wider than 64 bits, which both paths write and only orjson's parser refuses."""
    return json.loads(orjson.dumps(value) if any(isinstance(v, orjson.Fragment) for v in value.values())
                      else json.dumps(value))


def test_the_row_shape_is_the_event_shape_with_stored_fields():
    assert EVENT_ROW.json_schema() == EVENT.json_schema()
    assert [f.name for f in EVENT_ROW.fields] == [f.name for f in EVENT.fields]


def read_both(**query):
    """Both readers on one query, the rows' read between two of the model path's. A page that
    reaches the horizon stands at the horizon, which on PostgreSQL is the whole cluster's and moves
    forward whenever any transaction ends (another test run's too); it only moves forward, so when
    the two model reads agree it held still for the rows' read as well."""
    for _ in range(100):
        events, place = selectors.read_log(**query)
        rows, row_place = selectors.read_log_rows(**query)
        _, again = selectors.read_log(**query)
        if (again.seq, again.event_id) == (place.seq, place.event_id):
            return events, place, rows, row_place
    raise AssertionError("the log's horizon never held still for three reads")


def test_rows_answer_what_the_model_path_answers(acme, globex):
    mine = record_mixed(acme)
    record_mixed(globex)  # another workspace's rows interleave in the log and never show
    for limit in (1, 3, 100):
        # A place after an id, and "all of a position" (where a poll that reached the horizon stands).
        for after in (None, *(Position(e.position, e.id, 0) for e in mine[:3]), Position(mine[1].position, "", 0)):
            for types, session_id in ((None, None), ({EventType.SESSION_STATUS_CHANGED}, None), (None, "s2"),
                                      ({EventType.SESSION_CREATED, EventType.TRANSCRIPT_SEGMENT_CREATED}, "s2")):
                events, place, rows, row_place = read_both(after=after, limit=limit, workspace_id=acme.id,
                                                           types=types, session_id=session_id)
                assert [r.id for r in rows] == [e.id for e in events]
                assert encode_position(row_place)[:4] == "pos_"
                assert (row_place.seq, row_place.event_id) == (place.seq, place.event_id)
                assert [as_json(event_row_item(r)) for r in rows] == [as_json(event_item(e)) for e in events]
    assert len(selectors.read_log_rows(after=None, limit=100, workspace_id=acme.id)[0]) == len(TIMES)


def test_occurred_at_is_formatted_by_the_database_as_iso_ms_formats_it(acme):
    record_mixed(acme)
    rows, _ = selectors.read_log_rows(after=None, limit=100, workspace_id=acme.id)
    stored = dict(Event.objects.filter(workspace=acme).values_list("id", "occurred_at"))
    assert [r.occurred_at for r in rows] == [iso_ms(stored[r.id]) for r in rows]
    assert sorted(r.occurred_at for r in rows) == sorted(iso_ms(t) for t in TIMES)
    assert "2026-11-25T10:00:59.999Z" in {r.occurred_at for r in rows}  # truncated, as iso_ms does


def test_the_page_on_the_wire_is_the_model_path_parsed(api, acme, alice_key):
    events = record_mixed(acme)
    response = api.get(URL, alice_key, limit=100)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    logged = sorted(events, key=lambda e: (e.position, e.id))
    assert [item["id"] for item in body["items"]] == [e.id for e in logged]
    assert body["items"] == [as_json(event_item(e)) for e in logged]
    assert all(list(item) == ["id", "type", "sessionId", "occurredAt", "data"] for item in body["items"])
    # The raw separators travel unescaped (valid JSON) and parse back to the same text.
    segment = next(i for i in body["items"] if "text" in i["data"])
    assert segment["data"]["text"] == DATA[1]["text"]


def test_errors_of_the_list_are_still_the_json_error_body(api, acme, alice_key):
    response = api.get(URL, alice_key, limit=0)
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_request", "detail": response.json()["detail"]}
    assert response.json()["detail"].startswith("limit:")


@pytest.mark.parametrize("value", [{"items": [], "nextCursor": "pos_x"}, {"a": "\u2028 é", "b": [1.5, None]}])
def test_the_renderer_writes_what_drfs_would_parse_to(value):
    from rest_framework.renderers import JSONRenderer

    assert orjson.loads(StoredJsonRenderer().render(value)) == orjson.loads(JSONRenderer().render(value))
    assert StoredJsonRenderer().render(None) == b""


def test_a_stored_fragment_is_written_as_is():
    stored = '{"b": 1, "a": [true, null]}'
    body = StoredJsonRenderer().render({"data": orjson.Fragment(stored)})
    assert body == b'{"data":{"b": 1, "a": [true, null]}}'
