"""What a recorder sends to feed Connect (`client.ingest.sessions`, in `resources/ingest.py`).

    client = Connect("https://connect.example.com", ingest_key="svc_…")
    client.ingest.sessions.upsert("meeting-42", label="Weekly sync")
    client.ingest.sessions.append_segments("meeting-42", [IngestSegment(0, 0, 1800, "Hello.")])

Every call sends a fresh `Idempotency-Key` (a UUID4) and keeps it across the client's own
retries, so a retry after a lost answer is answered with the first answer, never applied twice.
Sequences are 0-based and continue from call to call: a `Conflict` carries `expected_sequence`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any


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
