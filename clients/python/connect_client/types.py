"""The closed sets of values the API's parameters take, as `Literal`s, and the shape of a
filter entry as a `TypedDict`: a type checker refuses `status="paused"` before it is sent.

Response models keep plain `str` for the same fields: a value a later server adds must not make
an annotation false (`Session.status` may one day hold a status this version does not list).
"""

from __future__ import annotations

from typing import Literal, TypedDict

SessionStatus = Literal["recording", "processing", "completed", "failed"]
RevisionKind = Literal["committed", "final"]
TranscriptFormat = Literal["json", "vtt", "srt", "txt"]
TextFormat = Literal["vtt", "srt", "txt"]  # the exports: answered as text
SearchMode = Literal["keyword", "semantic", "hybrid"]  # semantic and hybrid: where search by meaning is on
EventType = Literal["session.created", "session.status_changed", "transcript.segment.created"]
DeliveryStatus = Literal["pending", "retrying", "succeeded", "dead_letter", "cancelled"]
DeliveryKind = Literal["event", "test"]
BoardStatus = Literal["generating", "ready", "failed"]
IngestStatus = Literal["processing", "completed", "failed"]  # what a producer may set
WebhookSigning = Literal["svc", "standard-webhooks"]  # Standard Webhooks headers beside the Svc-* ones


class _FilterType(TypedDict):
    type: EventType


class Filter(_FilterType, total=False):
    """One entry of a stream's or a webhook's `filters` (wire names): `type`, optionally one
    `sessionId`, and for `session.status_changed` the `status`es wanted."""

    sessionId: str
    status: list[SessionStatus]


__all__ = [
    "BoardStatus", "DeliveryKind", "DeliveryStatus", "EventType", "Filter", "IngestStatus", "RevisionKind",
    "SessionStatus", "TextFormat", "TranscriptFormat", "WebhookSigning",
]
