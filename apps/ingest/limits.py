"""What one session record may hold, whichever door it comes in by: the ingest API
(`inputs`) and the importer (`importer.records`) check the same limits and the same id patterns,
so a session loaded from a file can be carried on over HTTP (its `externalId` is a valid path
segment) and a producer moving from one door to the other meets no new refusal.

The limits are what the columns and the read side hold comfortably: a segment's text fits a
search snippet's source and an export line; timestamps are 32-bit integer columns."""

from __future__ import annotations

import re
from typing import Any

import orjson

MAX_TEXT = 10_000  # characters of one segment's text
MAX_SPEAKER = 200  # characters of a speaker label
MAX_LABEL = 500  # characters of a session's label
MAX_MEMO = 20_000  # characters of a session's memo
MAX_BOARD_PAYLOAD_BYTES = 256 * 1024  # a board payload as canonical JSON (`payload_bytes`)
MAX_TIMESTAMP_MS = 2**31 - 1  # the segment columns' range: about 24.8 days from the session start

EXTERNAL_ID = re.compile(r"[A-Za-z0-9._~:@+=-]{1,200}")  # a path segment as it is, unescaped
BOARD_ID = re.compile(r"[A-Za-z0-9._:-]{1,100}")


def payload_bytes(payload: Any) -> int:
    """The size of a board payload as canonical JSON: sorted keys, no spaces, UTF-8 unescaped."""
    return len(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS))
