"""The ingest API's answers, each declared once (apps/core/shapes.py): the views encode with
these and /openapi.json documents them as components."""

from __future__ import annotations

from apps.core.shapes import INTEGER, STRING, Field, Shape
from apps.recordings.shapes import SESSION

INGEST_SESSION = Shape(
    "IngestSessionOut",
    (
        Field("id", STRING, source="session.id", description="the session's id in the read API"),
        Field("externalId", STRING, source="session.external_id", description="the producer's id for it"),
        Field("session", SESSION, description="the session as the read API shows it"),
    ),
    params=("session",),
    description="A session written through the ingest API.",
    component=True,
)
INGEST_APPEND = Shape(
    "IngestAppendOut",
    (
        Field("sessionId", STRING, source="session_id"),
        Field("appended", INTEGER, description="segments of the batch stored by this call"),
        Field("acknowledged", INTEGER, description="segments of the batch already stored with the same content"),
        Field("nextSequence", INTEGER, source="next_sequence", description="the sequence the session expects next"),
    ),
    params=("session_id", "appended", "acknowledged", "next_sequence"),
    description="What an append stored.",
    component=True,
)
INGEST_FINAL = Shape(
    "IngestFinalTranscriptOut",
    (
        Field("sessionId", STRING, source="transcript.session_id"),
        Field("transcriptId", STRING, source="transcript.id", description="the final revision's id"),
        Field("segmentCount", INTEGER, source="segment_count"),
    ),
    params=("transcript", "segment_count"),
    description="The final revision that replaced any earlier one.",
    component=True,
)
