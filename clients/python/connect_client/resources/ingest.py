"""`client.ingest.sessions`: what a recorder calls to feed Connect (see `connect_client.ingest`).

Every call sends a fresh `Idempotency-Key` (a UUID4), kept across the client's own retries."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .. import models
from .._resource import AsyncAPIResource, SyncAPIResource, _one, _seg, _timestamp, to_async_raw, to_raw
from .._response import Request
from ..ingest import IngestSegment, _segments
from ..types import BoardStatus, IngestStatus, RevisionKind

if TYPE_CHECKING:
    from ..client import AsyncConnect, Connect

_PATH = "/api/v1/ingest/sessions"
_UNSET: Any = object()  # a session field not passed: left as it is (None clears it)
Segments = Iterable[IngestSegment | Mapping[str, Any]]


def _key() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


def _upsert(external_id: str, fields: dict[str, Any]) -> Request[models.IngestSession]:
    body = {wire: _timestamp(value) if isinstance(value, datetime) else value
            for wire, value in fields.items() if value is not _UNSET}
    return Request("PUT", f"{_PATH}/{_seg(external_id)}", _one(models.IngestSession), json=body, headers=_key())


def _append(external_id: str, segments: Segments) -> Request[models.AppendResult]:
    return Request("POST", f"{_PATH}/{_seg(external_id)}/segments", _one(models.AppendResult),
                   json={"segments": _segments(segments, sequenced=True)}, headers=_key())


def _status(external_id: str, status: IngestStatus) -> Request[models.IngestSession]:
    return Request("POST", f"{_PATH}/{_seg(external_id)}/status", _one(models.IngestSession),
                   json={"status": status}, headers=_key())


def _final(external_id: str, segments: Segments) -> Request[models.FinalTranscriptResult]:
    return Request("PUT", f"{_PATH}/{_seg(external_id)}/transcripts/final", _one(models.FinalTranscriptResult),
                   json={"segments": _segments(segments, sequenced=False)}, headers=_key())


def _board(external_id: str, board_id: str, payload: Any, status: BoardStatus,
           source_revision_kind: RevisionKind) -> Request[models.Board]:
    body = {"status": status, "sourceRevisionKind": source_revision_kind, "payload": payload}
    return Request("PUT", f"{_PATH}/{_seg(external_id)}/boards/{_seg(board_id)}", _one(models.Board), json=body,
                   headers=_key())


class IngestSessions(SyncAPIResource):
    @cached_property
    def with_raw_response(self) -> IngestSessionsWithRawResponse:
        return IngestSessionsWithRawResponse(IngestSessions(self._client, raw=True))

    def upsert(self, external_id: str, *, label: str | None = _UNSET, memo: str | None = _UNSET,
               started_at: datetime | str | None = _UNSET,
               ended_at: datetime | str | None = _UNSET) -> models.IngestSession:
        """Create the session the producer calls `external_id`, or set the fields passed."""
        fields = {"label": label, "memo": memo, "startedAt": started_at, "endedAt": ended_at}
        return self._send(_upsert(external_id, fields))

    def append_segments(self, external_id: str, segments: Segments) -> models.AppendResult:
        """1 to 500 segments numbered consecutively; those already stored are acknowledged."""
        return self._send(_append(external_id, segments))

    def set_status(self, external_id: str, status: IngestStatus) -> models.IngestSession:
        """`processing`, `completed` or `failed`; the current status again changes nothing."""
        return self._send(_status(external_id, status))

    def put_final_transcript(self, external_id: str, segments: Segments) -> models.FinalTranscriptResult:
        """The final revision, replacing any earlier one at once."""
        return self._send(_final(external_id, segments))

    def put_board(self, external_id: str, board_id: str, payload: Any, *, status: BoardStatus = "ready",
                  source_revision_kind: RevisionKind = "final") -> models.Board:
        """A new version of the board (the current one, when it already says the same)."""
        return self._send(_board(external_id, board_id, payload, status, source_revision_kind))


class AsyncIngestSessions(AsyncAPIResource):
    @cached_property
    def with_raw_response(self) -> AsyncIngestSessionsWithRawResponse:
        return AsyncIngestSessionsWithRawResponse(AsyncIngestSessions(self._client, raw=True))

    async def upsert(self, external_id: str, *, label: str | None = _UNSET, memo: str | None = _UNSET,
                     started_at: datetime | str | None = _UNSET,
                     ended_at: datetime | str | None = _UNSET) -> models.IngestSession:
        fields = {"label": label, "memo": memo, "startedAt": started_at, "endedAt": ended_at}
        return await self._send(_upsert(external_id, fields))

    async def append_segments(self, external_id: str, segments: Segments) -> models.AppendResult:
        return await self._send(_append(external_id, segments))

    async def set_status(self, external_id: str, status: IngestStatus) -> models.IngestSession:
        return await self._send(_status(external_id, status))

    async def put_final_transcript(self, external_id: str, segments: Segments) -> models.FinalTranscriptResult:
        return await self._send(_final(external_id, segments))

    async def put_board(self, external_id: str, board_id: str, payload: Any, *, status: BoardStatus = "ready",
                        source_revision_kind: RevisionKind = "final") -> models.Board:
        return await self._send(_board(external_id, board_id, payload, status, source_revision_kind))


class IngestSessionsWithRawResponse:
    def __init__(self, sessions: IngestSessions) -> None:
        self.upsert = to_raw(sessions.upsert)
        self.append_segments = to_raw(sessions.append_segments)
        self.set_status = to_raw(sessions.set_status)
        self.put_final_transcript = to_raw(sessions.put_final_transcript)
        self.put_board = to_raw(sessions.put_board)


class AsyncIngestSessionsWithRawResponse:
    def __init__(self, sessions: AsyncIngestSessions) -> None:
        self.upsert = to_async_raw(sessions.upsert)
        self.append_segments = to_async_raw(sessions.append_segments)
        self.set_status = to_async_raw(sessions.set_status)
        self.put_final_transcript = to_async_raw(sessions.put_final_transcript)
        self.put_board = to_async_raw(sessions.put_board)


class Ingest:
    def __init__(self, client: Connect) -> None:
        self.sessions = IngestSessions(client)


class AsyncIngest:
    def __init__(self, client: AsyncConnect) -> None:
        self.sessions = AsyncIngestSessions(client)
