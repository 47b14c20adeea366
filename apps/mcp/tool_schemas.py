"""What each MCP tool takes and returns (apps/mcp/tools.py registers them): its arguments as
one serializer of REST's query parameter fields (apps/core/params.py), from which
apps/mcp/arguments.py derives the input schema and validates a call, and its result as a shape
(apps/core/shapes.py), whose portable JSON Schema is the tool's `outputSchema`."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from apps.core.params import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    CursorField,
    LimitField,
    SearchQueryField,
    StrictIntegerField,
)
from apps.core.shapes import BOOLEAN, INTEGER, JSON, STRING, Field, Shape, envelope, page_of
from apps.mcp import transcripts
from apps.recordings import shapes
from apps.recordings.search import semantic as search_modes

# get_transcript's largest page by count (`limit`); every page is bounded by the result budget
# (apps/mcp/budget.py) as well, which is what usually ends a page.
TRANSCRIPT_MAX_LIMIT = 500
WINDOW_MAX_MS = 2**31 - 1  # timestamps are 32-bit integer columns


# --- Schemas ----------------------------------------------------------------------------------

# Output schemas: the shapes' portable JSON Schema (apps/core/shapes.py), one `type` per schema
# and nullability as `anyOf`, from the declarations the representations are generated from.

NOTE_DESCRIPTION = "present when this is not the whole answer: what was left out and how to get it"
NOTE = Field("note", STRING, required=False, description=NOTE_DESCRIPTION)
GET_TRANSCRIPT_OUTPUT = Shape(
    "GetTranscriptResult",
    (
        Field("sessionId", STRING),
        Field("transcript", shapes.FLAT_SEGMENT, many=True, required=False, description="format json"),
        Field("text", STRING, required=False, description="format text: one line per segment"),
        Field("totalSegments", INTEGER, description="segments in the transcript (in the window, when given)"),
        Field("nextCursor", STRING, nullable=True, description=shapes.NEXT_CURSOR),
        NOTE,
    ),
)
LIST_BOARDS_ITEM = shapes.BOARD_SUMMARY.extend(
    "ListBoardsItem",
    Field("payload", JSON, required=False, description="free-form JSON; its shape depends on the board definition"),
    Field("payloadHash", STRING, required=False, description="`sha256:` + hex of the canonical JSON"),
    Field("payloadOmitted", BOOLEAN, required=False, description="true when the payload alone is larger than a "
          "result may be: read the board resource the note names"),
)
GET_BOARD_OUTPUT = envelope("GetBoardResult", "board", LIST_BOARDS_ITEM, component=False)
LIST_BOARDS_OUTPUT = page_of(LIST_BOARDS_ITEM, "ListBoardsResult", cursor_description=shapes.NEXT_CURSOR,
                             component=False)


def with_note(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with the optional `note` a result carries when it is not the whole answer."""
    note = {"type": "string", "description": NOTE_DESCRIPTION}
    return {**schema, "properties": {**schema["properties"], "note": note}}


# --- Arguments: one declaration per tool, of REST's query parameter fields --------------------


def session_id_field() -> serializers.CharField:
    return serializers.CharField(min_length=1, help_text="a session id, from list_sessions or search_transcripts")


class ListSessionsIn(serializers.Serializer):
    limit = LimitField(help_text=f"page size, 1-{MAX_PAGE_SIZE}; default {DEFAULT_PAGE_SIZE}")
    cursor = CursorField(help_text="nextCursor of the previous page")


class GetSessionIn(serializers.Serializer):
    sessionId = session_id_field()


class SearchTranscriptsIn(serializers.Serializer):
    query = SearchQueryField(help_text="words to find")
    limit = LimitField(help_text=f"hits per page, 1-{MAX_PAGE_SIZE}; default {DEFAULT_PAGE_SIZE}")
    cursor = CursorField(help_text="nextCursor of the previous page of the same query")
    mode = serializers.ChoiceField(
        choices=list(search_modes.MODES), required=False,
        help_text="keyword (default: every word in one segment), semantic (nearest in meaning: questions, "
                  "paraphrases) or hybrid (both, fused); semantic and hybrid add a score to each hit",
    )  # fmt: skip


def _window_field(help_text: str) -> StrictIntegerField:
    return StrictIntegerField(required=False, min_value=0, max_value=WINDOW_MAX_MS, help_text=help_text)


# `from` is a Python keyword: the declaration is built with its wire names as they are.
GetTranscriptIn = type("GetTranscriptIn", (serializers.Serializer,), {
    "sessionId": session_id_field(),
    "format": serializers.ChoiceField(choices=list(transcripts.FORMATS), required=False,
                                      help_text="json (default: REST's segments) or text (one line per segment)"),
    "from": _window_field("only segments starting at or after this many milliseconds from the session start"),
    "to": _window_field("only segments starting before this many milliseconds from the session start"),
    "cursor": CursorField(help_text="nextCursor of the previous page (with the same format and window)"),
    "limit": StrictIntegerField(required=False, min_value=1, max_value=TRANSCRIPT_MAX_LIMIT,
                                help_text="at most this many segments per page"),
})  # fmt: skip


class ListBoardsIn(serializers.Serializer):
    sessionId = session_id_field()
    cursor = CursorField(help_text="nextCursor of the previous page")


class GetBoardIn(serializers.Serializer):
    sessionId = session_id_field()
    boardSpecId = serializers.CharField(min_length=1, help_text="the board's boardId")
