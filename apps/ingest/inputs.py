"""The ingest API's request bodies and path parameters, checked whole before anything is written.

Pure functions over decoded JSON (no Django): each returns what the services take or raises
`Invalid(name, why)`, `name` the field's path (`segments[3].timestampEnd`) and `why` ours — never
a value the client sent (it may be a secret pasted in the wrong place). Numbers are JSON
numbers, never booleans or strings; the JSON decoder already refuses NaN and Infinity.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from apps.ingest.limits import (  # noqa: F401 - the API's limits, named where its checks are
    BOARD_ID, EXTERNAL_ID, MAX_BOARD_PAYLOAD_BYTES, MAX_LABEL, MAX_MEMO, MAX_SPEAKER, MAX_TEXT, MAX_TIMESTAMP_MS,
    payload_bytes,
)
from apps.recordings.models import BoardStatus, RevisionKind, SessionStatus
from apps.recordings.services import SegmentInput

MAX_BATCH = 500  # segments per append
MAX_FINAL_SEGMENTS = 20_000  # segments in one final revision
MAX_SEQUENCE = 2**31 - 1

IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")

SEGMENT_FIELDS = ("timestampStart", "timestampEnd", "speakerLabel", "text", "confidence")
SESSION_FIELDS = {"label": "label", "memo": "memo", "startedAt": "started_at", "endedAt": "ended_at"}
# What a producer may set: `recording` is where every session starts.
TARGET_STATUSES = (SessionStatus.PROCESSING, SessionStatus.COMPLETED, SessionStatus.FAILED)


class Invalid(ValueError):
    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"{name}: {why}")
        self.name, self.why = name, why


def fields(body: Any, *, allowed: tuple[str, ...], required: tuple[str, ...] = (), where: str = "body") -> dict:
    """`body` as an object of the `allowed` fields, the `required` ones present."""
    if not isinstance(body, dict):
        raise Invalid(where, "must be a JSON object")
    for name in body:
        if name not in allowed:
            prefix = f"{where}." if where != "body" else ""
            raise Invalid(f"{prefix}{name[:64]}", "unknown field; the fields are " + ", ".join(allowed))
    for name in required:
        if name not in body:
            raise Invalid(f"{where}.{name}" if where != "body" else name, "required")
    return body


def integer(value: Any, name: str, *, low: int = 0, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise Invalid(name, "must be a number")
    if isinstance(value, float):
        if not value.is_integer():
            raise Invalid(name, "must be a whole number")
        value = int(value)
    if not low <= value <= high:
        raise Invalid(name, f"must be from {low} to {high}")
    return value


def text(value: Any, name: str, *, limit: int, nullable: bool = False, empty: bool = True) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise Invalid(name, "must be a string" + (" or null" if nullable else ""))
    if len(value) > limit:
        raise Invalid(name, f"at most {limit} characters")
    if not empty and not value.strip():
        raise Invalid(name, "must not be empty")
    return value


def timestamp(value: Any, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(name, "must be an ISO 8601 timestamp string or null")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Invalid(name, "must be an ISO 8601 timestamp, e.g. 2026-12-01T09:30:00Z") from None
    if parsed.tzinfo is None:
        raise Invalid(name, "must carry its offset (Z or ±hh:mm)")
    return parsed


def segment(value: Any, where: str, *, sequenced: bool) -> tuple[int | None, SegmentInput]:
    allowed = ("sequence", *SEGMENT_FIELDS) if sequenced else SEGMENT_FIELDS
    required = ("sequence", "timestampStart", "timestampEnd", "text") if sequenced else (
        "timestampStart", "timestampEnd", "text")
    item = fields(value, allowed=allowed, required=required, where=where)
    sequence = integer(item["sequence"], f"{where}.sequence", high=MAX_SEQUENCE) if sequenced else None
    start = integer(item["timestampStart"], f"{where}.timestampStart", high=MAX_TIMESTAMP_MS)
    end = integer(item["timestampEnd"], f"{where}.timestampEnd", high=MAX_TIMESTAMP_MS)
    if end < start:
        raise Invalid(f"{where}.timestampEnd", "must not be before timestampStart")
    confidence = item.get("confidence")
    if confidence is not None:
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
            raise Invalid(f"{where}.confidence", "must be a number from 0.0 to 1.0, or null")
        if not 0.0 <= confidence <= 1.0:
            raise Invalid(f"{where}.confidence", "must be from 0.0 to 1.0")
        confidence = float(confidence)
    return sequence, SegmentInput(
        timestamp_start=start,
        timestamp_end=end,
        text=text(item["text"], f"{where}.text", limit=MAX_TEXT, empty=False),
        speaker_label=text(item.get("speakerLabel"), f"{where}.speakerLabel", limit=MAX_SPEAKER, nullable=True),
        confidence=confidence,
    )


def _segment_list(body: Any, *, low: int, high: int) -> list:
    body = fields(body, allowed=("segments",), required=("segments",))
    items = body["segments"]
    if not isinstance(items, list):
        raise Invalid("segments", "must be an array")
    if not low <= len(items) <= high:
        raise Invalid("segments", f"must hold {low} to {high} segments")
    return items


def append_batch(body: Any) -> tuple[int, list[SegmentInput]]:
    """`{"segments": [...]}`, 1 to MAX_BATCH, numbered consecutively: (first sequence, segments)."""
    items = _segment_list(body, low=1, high=MAX_BATCH)
    parsed = [segment(item, f"segments[{i}]", sequenced=True) for i, item in enumerate(items)]
    first = parsed[0][0]
    for i, (sequence, _) in enumerate(parsed):
        if sequence != first + i:
            raise Invalid(f"segments[{i}].sequence", "must be one more than the previous segment's")
    return first, [s for _, s in parsed]


def final_segments(body: Any) -> list[SegmentInput]:
    """`{"segments": [...]}`, 0 to MAX_FINAL_SEGMENTS, in reading order (numbered 0, 1, … here)."""
    items = _segment_list(body, low=0, high=MAX_FINAL_SEGMENTS)
    return [segment(item, f"segments[{i}]", sequenced=False)[1] for i, item in enumerate(items)]


def session_changes(body: Any) -> dict[str, Any]:
    """The session fields a PUT sets (absent: left as they are; null: cleared)."""
    body = fields(body, allowed=tuple(SESSION_FIELDS))
    changes: dict[str, Any] = {}
    if "label" in body:
        changes["label"] = text(body["label"], "label", limit=MAX_LABEL, nullable=True)
    if "memo" in body:
        changes["memo"] = text(body["memo"], "memo", limit=MAX_MEMO, nullable=True)
    for wire in ("startedAt", "endedAt"):
        if wire in body:
            changes[SESSION_FIELDS[wire]] = timestamp(body[wire], wire)
    return changes


def target_status(body: Any) -> str:
    body = fields(body, allowed=("status",), required=("status",))
    if body["status"] not in TARGET_STATUSES:
        raise Invalid("status", "must be one of " + ", ".join(TARGET_STATUSES))
    return body["status"]


def board(body: Any) -> tuple[str, str, Any]:
    """(status, sourceRevisionKind, payload) of a board version."""
    body = fields(body, allowed=("status", "sourceRevisionKind", "payload"),
                  required=("status", "sourceRevisionKind", "payload"))
    if body["status"] not in BoardStatus.values:
        raise Invalid("status", "must be one of " + ", ".join(BoardStatus.values))
    if body["sourceRevisionKind"] not in RevisionKind.values:
        raise Invalid("sourceRevisionKind", "must be one of " + ", ".join(RevisionKind.values))
    payload = body["payload"]
    if payload_bytes(payload) > MAX_BOARD_PAYLOAD_BYTES:
        raise Invalid("payload", f"at most {MAX_BOARD_PAYLOAD_BYTES} bytes as JSON")
    return body["status"], body["sourceRevisionKind"], payload


def path_id(value: str, name: str, pattern: re.Pattern) -> str:
    if not pattern.fullmatch(value):
        raise Invalid(name, f"must match {pattern.pattern}")
    return value
