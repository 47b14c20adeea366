"""The ingest API in /openapi.json (tag `ingest`, apps/core/openapi.TAGS): each view's
`extend_schema`, its request and response bodies written from the limits in apps/ingest/inputs.py."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema

from apps.core.openapi import error_responses
from apps.ingest import idempotency, inputs, shapes
from apps.recordings.models import BoardStatus, RevisionKind

SCOPE_NOTE = (
    "Needs an ingest key (scope `svc:ingest:write`, issued by `manage.py issue_ingest_key`); a read "
    "credential is `403 insufficient_scope` with `requiredScopes: [\"svc:ingest:write\"]`, and an ingest key is "
    "refused the same way on every read path, naming the read scopes that path needs."
)
CONFLICT = (
    "`conflict`: the request contradicts what is stored, or a request with the same `Idempotency-Key` is in "
    "progress; `detail` says what to do"
)
IDEMPOTENCY = OpenApiParameter(
    idempotency.HEADER,
    str,
    OpenApiParameter.HEADER,
    description=(
        "Optional; 1 to 255 printable ASCII characters, unique per request (a UUID). Sent again with the same "
        "body within 24 hours, the first answer is returned again with `Idempotent-Replayed: true`; with "
        "another body, `422 idempotency_key_reused`; while the first is still running, `409 conflict`. "
        "Scoped to the credential. 5xx answers are not kept (a retry runs again)."
    ),
)
EXTERNAL_ID = OpenApiParameter(
    "externalId", str, OpenApiParameter.PATH,
    description=f"The producer's own id for the session, unique in the workspace: `{inputs.EXTERNAL_ID.pattern}`",
)
BOARD_ID = OpenApiParameter(
    "boardId", str, OpenApiParameter.PATH,
    description=f"The board spec's id (the read API's `boardSpecId`): `{inputs.BOARD_ID.pattern}`",
)
REPLAYED = OpenApiParameter(
    idempotency.REPLAYED, str, OpenApiParameter.HEADER, response=True, enum=["true"],
    description="Present on an answer repeated for an `Idempotency-Key` seen before",
)

MS = {"type": "integer", "minimum": 0, "maximum": inputs.MAX_TIMESTAMP_MS,
      "description": "milliseconds from the session start"}


def _segment(sequenced: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "timestampStart": MS,
        "timestampEnd": {**MS, "description": "milliseconds from the session start; not before timestampStart"},
        "speakerLabel": {"type": ["string", "null"], "maxLength": inputs.MAX_SPEAKER},
        "text": {"type": "string", "minLength": 1, "maxLength": inputs.MAX_TEXT},
        "confidence": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
    }
    required = ["timestampStart", "timestampEnd", "text"]
    if sequenced:
        properties = {"sequence": {"type": "integer", "minimum": 0, "description": (
            "0-based, the committed revision's own `sequence`: the first segment ever is 0, and each batch "
            "continues where the last ended, one more per segment")}, **properties}
        required = ["sequence", *required]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


SESSION_IN = {
    "type": "object",
    "additionalProperties": False,
    "description": "Every field optional: absent, left as it is; null, cleared.",
    "properties": {
        "label": {"type": ["string", "null"], "maxLength": inputs.MAX_LABEL},
        "memo": {"type": ["string", "null"], "maxLength": inputs.MAX_MEMO},
        "startedAt": {"type": ["string", "null"], "format": "date-time", "description": "default: when created"},
        "endedAt": {"type": ["string", "null"], "format": "date-time", "description": "not before startedAt"},
    },
}
SESSION_OUT = shapes.INGEST_SESSION.ref()
SEGMENTS_IN = {
    "type": "object", "additionalProperties": False, "required": ["segments"],
    "properties": {"segments": {"type": "array", "minItems": 1, "maxItems": inputs.MAX_BATCH,
                                "items": _segment(True)}},
}
APPENDED_OUT = shapes.INGEST_APPEND.ref()
STATUS_IN = {
    "type": "object", "additionalProperties": False, "required": ["status"],
    "properties": {"status": {"type": "string", "enum": list(inputs.TARGET_STATUSES)}},
}
FINAL_IN = {
    "type": "object", "additionalProperties": False, "required": ["segments"],
    "properties": {"segments": {"type": "array", "maxItems": inputs.MAX_FINAL_SEGMENTS, "items": _segment(False)}},
}
FINAL_OUT = shapes.INGEST_FINAL.ref()
BOARD_IN = {
    "type": "object", "additionalProperties": False, "required": ["status", "sourceRevisionKind", "payload"],
    "properties": {
        "status": {"type": "string", "enum": BoardStatus.values},
        "sourceRevisionKind": {"type": "string", "enum": RevisionKind.values},
        "payload": {"description": f"any JSON value, at most {inputs.MAX_BOARD_PAYLOAD_BYTES} bytes as canonical JSON"},
    },
}
BOARD_OUT = {"$ref": "#/components/schemas/BoardOut"}


def _operation(operation_id: str, summary: str, description: str, request: dict, responses: dict[int, Any],
               *parameters: OpenApiParameter, errors: tuple[int, ...] = (400,)):
    refusals = error_responses(*errors)
    if 409 in refusals:  # the ingest API's 409 is always `conflict`, never the webhooks' `not_allowed`
        refusals[409] = OpenApiResponse(refusals[409].response, description=CONFLICT, examples=[OpenApiExample(
            "conflict", {"error": "conflict", "detail": f"{idempotency.HEADER}: a request with this key is still in "
                         "progress; retry once it has finished"})])
    if 422 in refusals:
        refusals[422] = OpenApiResponse(refusals[422].response, description=refusals[422].description,
                                        examples=[OpenApiExample("idempotency_key_reused", {
                                            "error": "idempotency_key_reused", "detail": f"{idempotency.HEADER}: "
                                            "already used with a different request in the last 24 hours; send a "
                                            "new key for a new request"})])
    return extend_schema(
        operation_id=operation_id,
        summary=summary,
        description=f"{description}\n\n{SCOPE_NOTE}",
        parameters=[*parameters, IDEMPOTENCY, REPLAYED],
        request={"application/json": request},
        responses={**{status: OpenApiResponse(schema, description=text) for status, (schema, text) in responses.items()},
                   **refusals},
    )


put_session = _operation(
    "ingestPutSession", "Create or update a session by the producer's id",
    "The same `externalId` twice is one session: the first call creates it (status `recording`, event "
    "`session.created`), later calls set the fields they carry. Another workspace's session of the same "
    "`externalId` is another session.",
    SESSION_IN, {201: (SESSION_OUT, "created"), 200: (SESSION_OUT, "updated (or unchanged)")}, EXTERNAL_ID,
    errors=(400, 409, 422),
)
append_segments = _operation(
    "ingestAppendSegments", "Append committed segments, numbered by the producer",
    f"1 to {inputs.MAX_BATCH} segments, numbered consecutively from where the session's committed revision "
    "ends. One transaction: all are stored or none. A retried batch never duplicates: segments already stored "
    "with the same content are acknowledged and the rest appended; a sequence already stored with other "
    "content, or a gap, is `409 conflict` with `expectedSequence`, the sequence to send next. Each new segment "
    "records `transcript.segment.created`. New segments for a session that is no longer recording: `409 conflict`.",
    SEGMENTS_IN, {200: (APPENDED_OUT, "stored (or already stored)")}, EXTERNAL_ID, errors=(400, 409, 422),
)
set_status = _operation(
    "ingestSetStatus", "Change a session's status",
    "recording → processing → completed, recording → completed, recording/processing → failed; each change "
    "records `session.status_changed`. The status the session already has is no change (200). Any other "
    "transition: `409 conflict`, with a `detail` naming the transitions left.",
    STATUS_IN, {200: (SESSION_OUT, "the session as it now is")}, EXTERNAL_ID, errors=(400, 409, 422),
)
put_final_transcript = _operation(
    "ingestPutFinalTranscript", "Put the final revision of a session's transcript",
    f"0 to {inputs.MAX_FINAL_SEGMENTS} segments in reading order (numbered 0, 1, …). Replaces any earlier final "
    "revision in one transaction: readers see the old revision or the new one, never a part.",
    FINAL_IN, {200: (FINAL_OUT, "the final revision was written")}, EXTERNAL_ID, errors=(400, 409, 422),
)
put_board = _operation(
    "ingestPutBoard", "Put a new version of a board",
    "Adds the next version and makes it current; `payloadHash` is computed as the read API shows it. When the "
    "current version already has this status, source revision kind and payload, it is returned unchanged (200).",
    BOARD_IN, {201: (BOARD_OUT, "a new version"), 200: (BOARD_OUT, "the current version already said this")},
    EXTERNAL_ID, BOARD_ID, errors=(400, 409, 422),
)
