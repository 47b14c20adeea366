"""Places in the event log, pure (no Django): event ids, log positions and their wire form.

The log is ordered by `(position, id)`, not by id. Ids are time-sortable but made before
commit, and transactions commit out of id order; a position is a number the database gives a
row so that a reader who stops below the log's *horizon* (everything under it is settled) never
has a row appear behind it later (apps/events/log.py).

A reader's place is a `Position`: the last `(position, id)` it has, or, with `event_id` empty,
"every row up to and including `seq`" (where a poll that reached the horizon leaves it). `ms`
is the time up to which the reader has everything, checked against retention: events younger
than it are still in the log, so nothing was purged behind the reader.

On the wire a position is `pos_` + URL-safe text; `after` also takes a plain `evt_` id.
A position is not a secret and needs no signature: it only says where in the caller's own
workspace's log to start, and a forged one reads nothing another reader could not."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from apps.core.ids import CROCKFORD, crockford

_CROCKFORD_VALUES = {c: i for i, c in enumerate(CROCKFORD)}
EVENT_PREFIX = "evt_"
POSITION_PREFIX = "pos_"
MAX_AFTER_LENGTH = 120


def event_id_ms(event_id: str) -> int | None:
    """The millisecond timestamp inside an `evt_` id, or None if it is not one."""
    body = event_id[len(EVENT_PREFIX):] if event_id.startswith(EVENT_PREFIX) else ""
    if len(body) != 26 or any(c not in _CROCKFORD_VALUES for c in body):
        return None
    ms = 0
    for c in body[:10]:
        ms = ms * 32 + _CROCKFORD_VALUES[c]
    return ms


def id_floor(ms: int) -> str:
    """The smallest `evt_` id of millisecond `ms`."""
    return EVENT_PREFIX + crockford(max(ms, 0) << 80)


@dataclass(frozen=True)
class Position:
    seq: int
    event_id: str  # "" = all of `seq`
    ms: int

    def key(self) -> tuple[int, str]:
        """Order key: an empty `event_id` stands for the end of its `seq` (above every id)."""
        return (self.seq, self.event_id or "\U0010ffff")


class BadAfter(ValueError):
    """`after` is neither an `evt_` id nor a position this service wrote; `why` says which."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def encode_position(position: Position) -> str:
    raw = f"{position.seq}.{position.ms}.{position.event_id}".encode()
    return POSITION_PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_position(token: str) -> Position:
    body = token[len(POSITION_PREFIX):]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        seq_text, ms_text, event_id = raw.split(".", 2)
        seq, ms = int(seq_text), int(ms_text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadAfter("not a position this service wrote") from None
    if seq < 0 or ms < 0 or (event_id and event_id_ms(event_id) is None) or not seq_text.isdigit():
        raise BadAfter("not a position this service wrote")
    return Position(seq, event_id, ms)


def parse_after(value: str) -> Position | str:
    """A `Position` for a `pos_` token, the id itself for an `evt_` id (its position is the
    database's to look up); `BadAfter` otherwise."""
    if len(value) > MAX_AFTER_LENGTH:
        raise BadAfter(f"at most {MAX_AFTER_LENGTH} characters")
    if value.startswith(POSITION_PREFIX):
        return decode_position(value)
    if event_id_ms(value) is None:
        raise BadAfter("must be an evt_ id or a nextCursor from this endpoint")
    return value


def later(a: Position, b: Position) -> Position:
    """The further of two places (a reader never moves back)."""
    return a if a.key() >= b.key() else b
