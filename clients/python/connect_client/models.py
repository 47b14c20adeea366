"""Typed results: the wire fields in Python naming, timestamps as aware `datetime`s.

Each model names the OpenAPI schema it reads (`SCHEMA`); tests/client/test_openapi_sync.py
fails when a documented field has no attribute here. Fields the API adds later land in
`extra` (wire names), never an error; `raw` keeps the object exactly as received.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from typing import Any, ClassVar, TypeVar

M = TypeVar("M", bound="Model")

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def parse_timestamp(value: Any) -> Any:
    """ISO 8601 with `Z` (or an offset) → aware datetime; None and non-strings pass through."""
    if not isinstance(value, str):
        return value
    text = value[:-1] + "+00:00" if value.endswith("Z") else value
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a zone: {value!r}")
    return parsed


@dataclasses.dataclass(frozen=True)
class Model:
    """Base of every result. `from_wire` maps camelCase fields to attributes."""

    SCHEMA: ClassVar[str] = ""
    TIMESTAMPS: ClassVar[frozenset[str]] = frozenset()  # wire names
    NESTED: ClassVar[dict[str, type[Model]]] = {}  # wire name → model (or list of it)

    extra: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def wire_names(cls) -> dict[str, str]:
        """wire name → attribute name, for every declared field."""
        return {
            f.metadata.get("wire", _camel(f.name)): f.name
            for f in dataclasses.fields(cls)
            if f.name not in ("extra", "raw")
        }

    @classmethod
    def from_wire(cls: type[M], data: dict[str, Any]) -> M:
        names = cls.wire_names()
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for wire, value in data.items():
            attribute = names.get(wire)
            if attribute is None:
                extra[wire] = value
                continue
            if wire in cls.TIMESTAMPS:
                value = parse_timestamp(value)
            elif wire in cls.NESTED and value is not None:
                nested = cls.NESTED[wire]
                value = [nested.from_wire(v) for v in value] if isinstance(value, list) else nested.from_wire(value)
            values[attribute] = value
        for attribute in names.values():  # a field the server stopped sending: None, not a crash
            values.setdefault(attribute, None)
        return cls(**values, extra=extra, raw=dict(data))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _ts(*names: str) -> frozenset[str]:
    return frozenset(names)


@dataclasses.dataclass(frozen=True)
class Session(Model):
    SCHEMA: ClassVar[str] = "SessionOut"
    TIMESTAMPS: ClassVar[frozenset[str]] = _ts("startedAt", "endedAt", "createdAt", "updatedAt")

    id: str = ""
    label: str | None = None
    memo: str | None = None
    status: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclasses.dataclass(frozen=True)
class SessionSummary(Model):
    SCHEMA: ClassVar[str] = "SessionSummaryOut"
    TIMESTAMPS: ClassVar[frozenset[str]] = _ts("startedAt", "endedAt", "createdAt")

    id: str = ""
    label: str | None = None
    status: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    created_at: datetime | None = None


@dataclasses.dataclass(frozen=True)
class Segment(Model):
    """A flat transcript segment (`GET /sessions/{id}/transcript`)."""

    SCHEMA: ClassVar[str] = "FlatSegmentOut"
    TIMESTAMPS: ClassVar[frozenset[str]] = _ts("createdAt")

    id: str = ""
    sequence: int = 0
    timestamp_start: int = 0
    timestamp_end: int = 0
    speaker_label: str | None = None
    text: str = ""
    confidence: float | None = None
    created_at: datetime | None = None


@dataclasses.dataclass(frozen=True)
class RevisionSegment(Segment):
    SCHEMA: ClassVar[str] = "RevisionSegmentOut"

    session_committed_index: int | None = None


@dataclasses.dataclass(frozen=True)
class Transcript(Model):
    """The flat transcript of a session."""

    SCHEMA: ClassVar[str] = "FlatTranscript"
    NESTED: ClassVar[dict[str, type[Model]]] = {"transcript": Segment}

    session_id: str = ""
    transcript: list[Segment] = dataclasses.field(default_factory=list)

    @property
    def segments(self) -> list[Segment]:
        return self.transcript


@dataclasses.dataclass(frozen=True)
class TranscriptRevision(Model):
    SCHEMA: ClassVar[str] = "TranscriptRevisionOut"
    TIMESTAMPS: ClassVar[frozenset[str]] = _ts("createdAt")
    NESTED: ClassVar[dict[str, type[Model]]] = {"segments": RevisionSegment}

    id: str = ""
    revision_kind: str = ""
    created_at: datetime | None = None
    segments: list[RevisionSegment] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class SearchHit(Model):
    """Both shapes the contract shows: revision-aware (`transcript_id`, `revision_kind`,
    `session`) and session-level (`id`, `label`, … of the session)."""

    SCHEMA: ClassVar[str] = "SearchHitOut"
    TIMESTAMPS: ClassVar[frozenset[str]] = _ts("startedAt", "endedAt", "createdAt")
    NESTED: ClassVar[dict[str, type[Model]]] = {"session": SessionSummary}

    transcript_id: str = ""
    revision_kind: str = ""
    session: SessionSummary | None = None
    id: str = ""
    label: str | None = None
    status: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    created_at: datetime | None = None
    snippet: str = ""
    # Where the match is: the matching segment's sequence and start (ms from the session start).
    sequence: int | None = None
    timestamp_start: int | None = None
    # How well it matched (semantic and hybrid modes; absent from keyword hits).
    score: float | None = None


@dataclasses.dataclass(frozen=True)
class BoardSummary(Model):
    SCHEMA: ClassVar[str] = "BoardSummaryOut"
    TIMESTAMPS: ClassVar[frozenset[str]] = _ts("createdAt")

    id: str = ""
    board_id: str = ""
    version: int = 0
    status: str = ""
    is_current: bool = False
    source_revision_kind: str = ""
    created_at: datetime | None = None


@dataclasses.dataclass(frozen=True)
class Board(BoardSummary):
    SCHEMA: ClassVar[str] = "BoardOut"

    payload: Any = None
    payload_hash: str = ""


@dataclasses.dataclass(frozen=True)
class WebhookFilter(Model):
    SCHEMA: ClassVar[str] = "FilterEntry"

    type: str = ""
    session_id: str | None = None
    status: list[str] | None = None

    def to_wire(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"type": self.type}
        if self.session_id is not None:
            entry["sessionId"] = self.session_id
        if self.status is not None:
            entry["status"] = list(self.status)
        return entry


@dataclasses.dataclass(frozen=True)
class Webhook(Model):
    """`signing_secret` is set only on the response that issued it (create, an update turning
    `standard-webhooks` on, `rotate_secret`)."""

    SCHEMA: ClassVar[str] = "EndpointOut"
    TIMESTAMPS: ClassVar[frozenset[str]] = _ts("createdAt", "updatedAt", "previousSecretExpiresAt")
    NESTED: ClassVar[dict[str, type[Model]]] = {"filters": WebhookFilter}

    id: str = ""
    name: str = ""
    url: str = ""
    filters: list[WebhookFilter] = dataclasses.field(default_factory=list)
    active: bool = False
    disabled_reason: str | None = None
    signing: str = "svc"
    signing_secret: str | None = None
    previous_secret_expires_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclasses.dataclass(frozen=True)
class DeliveryAttempt(Model):
    SCHEMA: ClassVar[str] = "AttemptOut"
    TIMESTAMPS: ClassVar[frozenset[str]] = _ts("startedAt", "completedAt")

    attempt_number: int = 0
    started_at: datetime | None = None
    completed_at: datetime | None = None
    http_status: int | None = None
    duration_ms: int = 0
    error: str | None = None
    error_detail: str | None = None


@dataclasses.dataclass(frozen=True)
class Delivery(Model):
    """A webhook delivery. `attempts` is None in lists, the attempts on a single read."""

    SCHEMA: ClassVar[str] = "DeliveryWithAttemptsOut"
    TIMESTAMPS: ClassVar[frozenset[str]] = _ts("nextAttemptAt", "terminalAt", "createdAt", "updatedAt")
    NESTED: ClassVar[dict[str, type[Model]]] = {"attempts": DeliveryAttempt}

    id: str = ""
    event_id: str = ""
    event_type: str = ""
    endpoint_id: str = ""
    endpoint_name: str = ""
    endpoint_url: str = ""
    kind: str = ""
    status: str = ""
    attempt_count: int = 0
    last_http_status: int | None = None
    next_attempt_at: datetime | None = None
    terminal_at: datetime | None = None
    stop_reason: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    attempts: list[DeliveryAttempt] | None = None


@dataclasses.dataclass(frozen=True)
class Event(Model):
    """A recorded event: the stream's envelope plus its `evt_` id. `data` is the event's own
    object as sent (its shape depends on `type`; see docs/api/events-and-stream.md); `session` is its Session
    snapshot when it has one."""

    SCHEMA: ClassVar[str] = "Event"
    TIMESTAMPS: ClassVar[frozenset[str]] = _ts("occurredAt")

    id: str | None = None
    type: str = ""
    session_id: str = ""
    occurred_at: datetime | None = None
    data: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def session(self) -> Session | None:
        snapshot = (self.data or {}).get("session")
        return Session.from_wire(snapshot) if isinstance(snapshot, dict) else None


@dataclasses.dataclass(frozen=True)
class Recovery(Model):
    SCHEMA: ClassVar[str] = "WebhookRecovery"

    queued: int = 0
    more: bool = False


@dataclasses.dataclass(frozen=True)
class IngestSession(Model):
    """A session written through the ingest API: its read-API `id`, the producer's `external_id`
    and the session itself."""

    SCHEMA: ClassVar[str] = "IngestSessionOut"
    NESTED: ClassVar[dict[str, type[Model]]] = {"session": Session}

    id: str = ""
    external_id: str = ""
    session: Session | None = None


@dataclasses.dataclass(frozen=True)
class AppendResult(Model):
    """What an append stored: `appended` new, `acknowledged` already there, `next_sequence`."""

    SCHEMA: ClassVar[str] = "IngestAppendOut"

    session_id: str = ""
    appended: int = 0
    acknowledged: int = 0
    next_sequence: int = 0


@dataclasses.dataclass(frozen=True)
class FinalTranscriptResult(Model):
    SCHEMA: ClassVar[str] = "IngestFinalTranscriptOut"

    session_id: str = ""
    transcript_id: str = ""
    segment_count: int = 0


# Every schema a 2xx response of the API holds, and how the client reads it: a model, or an
# envelope whose fields the client unwraps (a page's `items`/`nextCursor`, `{"session": …}`).
MODELS: dict[str, type[Model]] = {
    m.SCHEMA: m
    for m in (Session, SessionSummary, Segment, RevisionSegment, Transcript, TranscriptRevision, SearchHit,
              BoardSummary, Board, WebhookFilter, Webhook, DeliveryAttempt, Delivery, Event, Recovery, IngestSession,
              AppendResult, FinalTranscriptResult)
}
MODELS["DeliveryOut"] = Delivery  # the list's shape: the single read's without `attempts`
ENVELOPES: dict[str, dict[str, str]] = {
    # schema → {wire field: what the client does with it}
    "SessionPage": {"items": "Session", "nextCursor": "cursor"},
    "SearchPage": {"items": "SearchHit", "nextCursor": "cursor"},
    "WebhookPage": {"items": "Webhook", "nextCursor": "cursor"},
    "WebhookDeliveryPage": {"items": "Delivery", "nextCursor": "cursor"},
    "EventPage": {"items": "Event", "nextCursor": "cursor"},
    "SessionEnvelope": {"session": "Session"},
    "BoardEnvelope": {"board": "Board"},
    "BoardList": {"items": "BoardSummary"},
    "TranscriptRevisions": {"transcripts": "TranscriptRevision"},
}
