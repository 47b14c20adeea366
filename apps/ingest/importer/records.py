"""One session record of the import format (a JSON Lines line, or a caption file with its
sidecar) checked and turned into the bulk loader's `ImportedSession`.

`parse_record` either returns a whole, valid session or raises `Refused` with the first thing
wrong in words a producer can act on; it never half-accepts a record. Everything the database
would refuse later (lengths, NUL characters PostgreSQL cannot store, non-finite numbers) is
refused here, so a refusal names its line and never aborts the run."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from apps.ingest.limits import (
    BOARD_ID, EXTERNAL_ID, MAX_BOARD_PAYLOAD_BYTES, MAX_LABEL, MAX_MEMO, MAX_SPEAKER, MAX_TEXT, MAX_TIMESTAMP_MS,
    payload_bytes,
)
from apps.recordings.models import BoardStatus, RevisionKind, SessionStatus
from apps.recordings.services import ImportedBoard, ImportedSession, SegmentInput

MAX_SEGMENTS = 100_000  # per revision: a history file carries whole revisions, not batches
MAX_BOARD_VERSIONS = 1_000

SESSION_FIELDS = {"externalId", "label", "memo", "status", "startedAt", "endedAt", "createdAt",
                  "committed", "final", "boards"}  # fmt: skip
SEGMENT_FIELDS = {"sequence", "timestampStart", "timestampEnd", "speakerLabel", "text", "confidence"}
BOARD_FIELDS = {"boardId", "status", "sourceRevisionKind", "payload", "createdAt"}


class Refused(ValueError):
    """A record the importer will not load; the message says what is wrong and where in it."""


@dataclass(frozen=True)
class SessionRecord:
    external_id: str
    session: ImportedSession
    segment_count: int


def parse_record(data: Any) -> SessionRecord:
    if not isinstance(data, dict):
        raise Refused(f"a session is a JSON object, not {_kind(data)}")
    _no_unknown(data, SESSION_FIELDS, "session")
    external_id = _id(data, "externalId", EXTERNAL_ID)
    status = data.get("status")
    if status not in SessionStatus.values:
        raise Refused(f"status {status!r} is not one of {', '.join(SessionStatus.values)}")
    label = _string(data, "label", MAX_LABEL)
    memo = _string(data, "memo", MAX_MEMO)
    started_at = _time(data, "startedAt")
    ended_at = _time(data, "endedAt")
    created_at = _time(data, "createdAt") or started_at
    if created_at is None:
        raise Refused("startedAt or createdAt is required (a historic session has a time)")
    if started_at and ended_at and ended_at < started_at:
        raise Refused("endedAt is before startedAt")
    if status == SessionStatus.RECORDING and ended_at is not None:
        raise Refused("a session still recording has no endedAt (give its status, or drop endedAt)")
    if status != SessionStatus.RECORDING and ended_at is None:
        raise Refused(f"a {status} session has ended: endedAt is required")

    start = started_at or created_at
    committed = _segments(data.get("committed", []), "committed")
    final = None if data.get("final") is None else _segments(data["final"], "final")
    final_at = ended_at or created_at
    boards = _boards(data.get("boards", []), default_at=final_at)
    updated_at = max([created_at, final_at, *(b.created_at for b in boards)])  # its last change
    session = ImportedSession(
        label=label, memo=memo, status=status, started_at=started_at, ended_at=ended_at,
        created_at=created_at, updated_at=updated_at,
        # Each committed segment was committed when it was spoken: the session start plus its end.
        committed=[(start + timedelta(milliseconds=s.timestamp_end), [s]) for s in committed],
        final=final, final_at=final_at if final is not None else None, boards=boards, external_id=external_id,
    )  # fmt: skip
    return SessionRecord(external_id, session, len(committed) + len(final or []))


def _segments(value: Any, where: str) -> list[SegmentInput]:
    if not isinstance(value, list):
        raise Refused(f"{where} is a list of segments, not {_kind(value)}")
    if len(value) > MAX_SEGMENTS:
        raise Refused(f"{where} has {len(value)} segments; at most {MAX_SEGMENTS} per revision")
    numbered = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise Refused(f"{at} is a JSON object, not {_kind(item)}")
        _no_unknown(item, SEGMENT_FIELDS, at)
        sequence = item.get("sequence", i)
        if type(sequence) is not int or sequence < 0:
            raise Refused(f"{at}.sequence is a whole number ≥ 0")
        start, end = _ms(item, "timestampStart", at), _ms(item, "timestampEnd", at)
        if end < start:
            raise Refused(f"{at} ends before it starts (timestampEnd {end} < timestampStart {start})")
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise Refused(f"{at}.text is required: a non-empty string")
        if len(text) > MAX_TEXT:
            raise Refused(f"{at}.text is {len(text)} characters; at most {MAX_TEXT}")
        _no_nul(text, f"{at}.text")
        confidence = item.get("confidence")
        if confidence is not None:
            if not _is_number(confidence) or not 0.0 <= confidence <= 1.0:
                raise Refused(f"{at}.confidence is a number from 0.0 to 1.0, or null")
            confidence = float(confidence)
        speaker = _string(item, "speakerLabel", MAX_SPEAKER, where=at)
        numbered.append((sequence, SegmentInput(start, end, text, speaker, confidence)))
    sequences = [n for n, _ in numbered]
    if len(set(sequences)) != len(sequences):
        raise Refused(f"{where} numbers two segments alike (sequence must be unique)")
    return [s for _, s in sorted(numbered, key=lambda pair: pair[0])]


def _boards(value: Any, *, default_at: datetime) -> list[ImportedBoard]:
    if not isinstance(value, list):
        raise Refused(f"boards is a list of board versions, not {_kind(value)}")
    if len(value) > MAX_BOARD_VERSIONS:
        raise Refused(f"boards has {len(value)} versions; at most {MAX_BOARD_VERSIONS}")
    boards = []
    for i, item in enumerate(value):
        at = f"boards[{i}]"
        if not isinstance(item, dict):
            raise Refused(f"{at} is a JSON object, not {_kind(item)}")
        _no_unknown(item, BOARD_FIELDS, at)
        board_id = _id(item, "boardId", BOARD_ID, where=at)
        status = item.get("status")
        if status not in BoardStatus.values:
            raise Refused(f"{at}.status {status!r} is not one of {', '.join(BoardStatus.values)}")
        kind = item.get("sourceRevisionKind")
        if kind not in RevisionKind.values:
            raise Refused(f"{at}.sourceRevisionKind {kind!r} is not one of {', '.join(RevisionKind.values)}")
        if "payload" not in item:
            raise Refused(f"{at}.payload is required (any JSON value; {{}} while generating)")
        try:
            encoded = json.dumps(item["payload"], separators=(",", ":"), allow_nan=False)
        except ValueError:
            raise Refused(f"{at}.payload holds a non-finite number") from None
        size = payload_bytes(item["payload"])
        if size > MAX_BOARD_PAYLOAD_BYTES:
            raise Refused(f"{at}.payload is {size} bytes as JSON; at most {MAX_BOARD_PAYLOAD_BYTES}")
        if "\\u0000" in encoded:
            raise Refused(f"{at}.payload holds a NUL character, which cannot be stored")
        created_at = _time(item, "createdAt", where=at) or default_at
        boards.append(ImportedBoard(board_id, item["payload"], kind, status, created_at))
    return boards


def _no_unknown(data: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise Refused(f"{where} has unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


def _string(data: dict, key: str, limit: int, *, required: bool = False, where: str = "") -> str | None:
    name = f"{where}.{key}" if where else key
    value = data.get(key)
    if value is None:
        if required:
            raise Refused(f"{name} is required")
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise Refused(f"{name} is a {'non-empty ' if required else ''}string, not {_kind(value)}")
    if len(value) > limit:
        raise Refused(f"{name} is {len(value)} characters; at most {limit}")
    _no_nul(value, name)
    return value


def _id(data: dict, key: str, pattern: re.Pattern, *, where: str = "") -> str:
    """An id the ingest API takes in its paths as well, so it is checked by the same pattern."""
    name = f"{where}.{key}" if where else key
    value = _string(data, key, 1_000, required=True, where=where)
    if not pattern.fullmatch(value):
        raise Refused(f"{name} must match {pattern.pattern} (the ingest API takes it in its paths)")
    return value


def _no_nul(value: str, name: str) -> None:
    if "\x00" in value:
        raise Refused(f"{name} holds a NUL character, which cannot be stored")


def _time(data: dict, key: str, *, where: str = "") -> datetime | None:
    name = f"{where}.{key}" if where else key
    value = data.get(key)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None:
        raise Refused(f"{name} is an ISO 8601 time such as 2026-11-30T09:00:00Z, not {value!r}")
    if parsed.tzinfo is None:
        raise Refused(f"{name} {value!r} has no time zone (add Z or an offset)")
    return parsed.astimezone(timezone.utc)


def _ms(item: dict, key: str, where: str) -> int:
    value = item.get(key)
    if value is None:
        raise Refused(f"{where}.{key} is required (milliseconds from the session start)")
    if not _is_number(value) or value != int(value) or not 0 <= value <= MAX_TIMESTAMP_MS:
        raise Refused(f"{where}.{key} is a whole number of milliseconds from 0 to {MAX_TIMESTAMP_MS}, not {value!r}")
    return int(value)


def _is_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
