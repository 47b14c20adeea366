"""The ingest namespace: what a recorder calls to feed Connect (`client.ingest.sessions`).

    client = Connect("https://connect.example.com", ingest_key="svc_…")
    client.ingest.sessions.upsert("meeting-42", label="Weekly sync")
    client.ingest.sessions.append_segments("meeting-42", [IngestSegment(0, 0, 1800, "Hello.")])

Every call sends a fresh `Idempotency-Key` (a UUID4) and keeps it across the client's own
retries, so a retry after a lost answer is answered with the first answer, never applied twice.
Sequences are 0-based and continue from call to call: a `Conflict` carries `expected_sequence`.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from . import models
from ._resource import _one, _Resource, _seg, _timestamp

_UNSET: Any = object()  # a session field not passed: left as it is (None clears it)


@dataclasses.dataclass(frozen=True)
class IngestSegment:
    """A committed segment as the producer numbers it; timestamps in milliseconds from the
    session start. In a final revision, `sequence` is not sent (the order is the numbering)."""

    sequence: int
    timestamp_start: int
    timestamp_end: int
    text: str
    speaker_label: str | None = None
    confidence: float | None = None

    def to_wire(self, *, sequenced: bool = True) -> dict[str, Any]:
        wire = {"timestampStart": self.timestamp_start, "timestampEnd": self.timestamp_end,
                "speakerLabel": self.speaker_label, "text": self.text, "confidence": self.confidence}
        return {"sequence": self.sequence, **wire} if sequenced else wire


def _segments(segments: Iterable[IngestSegment | Mapping[str, Any]], *, sequenced: bool) -> list[dict[str, Any]]:
    return [s.to_wire(sequenced=sequenced) if isinstance(s, IngestSegment) else dict(s) for s in segments]


def _key() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


class IngestSessions(_Resource):
    def upsert(self, external_id: str, *, label: str | None = _UNSET, memo: str | None = _UNSET,
               started_at: datetime | str | None = _UNSET,
               ended_at: datetime | str | None = _UNSET) -> models.IngestSession:
        """Create the session the producer calls `external_id`, or set the fields passed."""
        body: dict[str, Any] = {}
        for wire, value in (("label", label), ("memo", memo), ("startedAt", started_at), ("endedAt", ended_at)):
            if value is not _UNSET:
                body[wire] = _timestamp(value) if isinstance(value, datetime) else value
        return self._call("PUT", f"{_PATH}/{_seg(external_id)}", _one(models.IngestSession), json=body,
                          headers=_key())

    def append_segments(self, external_id: str,
                        segments: Iterable[IngestSegment | Mapping[str, Any]]) -> models.AppendResult:
        """1 to 500 segments numbered consecutively; those already stored are acknowledged."""
        return self._call("POST", f"{_PATH}/{_seg(external_id)}/segments", _one(models.AppendResult),
                          json={"segments": _segments(segments, sequenced=True)}, headers=_key())

    def set_status(self, external_id: str, status: str) -> models.IngestSession:
        """`processing`, `completed` or `failed`; the current status again changes nothing."""
        return self._call("POST", f"{_PATH}/{_seg(external_id)}/status", _one(models.IngestSession),
                          json={"status": status}, headers=_key())

    def put_final_transcript(self, external_id: str, segments: Iterable[IngestSegment | Mapping[str, Any]]
                             ) -> models.FinalTranscriptResult:
        """The final revision, replacing any earlier one at once."""
        return self._call("PUT", f"{_PATH}/{_seg(external_id)}/transcripts/final", _one(models.FinalTranscriptResult),
                          json={"segments": _segments(segments, sequenced=False)}, headers=_key())

    def put_board(self, external_id: str, board_id: str, payload: Any, *, status: str = "ready",
                  source_revision_kind: str = "final") -> models.Board:
        """A new version of the board (the current one, when it already says the same)."""
        body = {"status": status, "sourceRevisionKind": source_revision_kind, "payload": payload}
        return self._call("PUT", f"{_PATH}/{_seg(external_id)}/boards/{_seg(board_id)}", _one(models.Board),
                          json=body, headers=_key())


_PATH = "/api/v1/ingest/sessions"


class Ingest:
    def __init__(self, client: Any) -> None:
        self.sessions = IngestSessions(client)
