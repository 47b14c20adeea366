"""The log's places, pure (apps/events/positions.py): event ids' time, position tokens, `after`."""

from __future__ import annotations

import pytest

from apps.events.models import new_event_id
from apps.events.positions import (
    BadAfter,
    Position,
    decode_position,
    encode_position,
    event_id_ms,
    id_floor,
    later,
    parse_after,
)


def test_an_event_id_carries_its_millisecond_and_the_floor_sorts_first():
    event_id = new_event_id()
    ms = event_id_ms(event_id)
    assert ms is not None and id_floor(ms) <= event_id < id_floor(ms + 1)
    assert event_id_ms(id_floor(ms)) == ms


@pytest.mark.parametrize("value", ["", "evt_", "evt_" + "u" * 26, "evt_" + "0" * 25, "wh_" + "0" * 26, "EVT_" + "0" * 26])
def test_what_is_not_an_event_id(value):
    assert event_id_ms(value) is None


@pytest.mark.parametrize("position", [Position(0, "", 0), Position(123456789012, new_event_id(), 1795572750531),
                                      Position(7, "", 5)])
def test_a_position_round_trips_and_is_url_safe(position):
    token = encode_position(position)
    assert token.startswith("pos_") and all(c.isalnum() or c in "-_" for c in token)
    assert decode_position(token) == position
    assert parse_after(token) == position


@pytest.mark.parametrize("token", ["pos_", "pos_%%", "pos_" + "A" * 20, "pos_LTEuMi4", "pos_MS4yLmV2dF94"])
def test_a_position_this_service_did_not_write_is_refused(token):
    # "pos_LTEuMi4" is "-1.2.", "pos_MS4yLmV2dF94" is "1.2.evt_x"
    with pytest.raises(BadAfter):
        decode_position(token)


def test_after_takes_an_event_id_or_a_position_and_nothing_else():
    event_id = new_event_id()
    assert parse_after(event_id) == event_id
    for value in ["nope", "evt_x", "x" * 121]:
        with pytest.raises(BadAfter):
            parse_after(value)


def test_an_empty_event_id_stands_for_the_end_of_its_position_and_readers_never_move_back():
    a, b = Position(5, "evt_a", 1), Position(5, "", 2)
    assert b.key() > a.key() and later(a, b) == b and later(b, a) == b
    assert later(Position(6, "evt_0", 0), b).seq == 6
