"""The six tools of contract §4.5, in one registry: name, description written for a model,
input and output schema, annotations, scope, and the function that runs it.

Every tool calls the selectors and representation functions REST calls, so a session, a
transcript segment or a board reads the same through either door. Tool-level failures are
results with `isError: true` and `{"error": code}` as their text (DESIGN.md "MCP credential
errors"): `insufficient_scope`, `not_found`, `invalid_request` (naming the argument).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from rest_framework import serializers

from apps.access.principal import Principal
from apps.core.cursors import decode_cursor, encode_cursor
from apps.core.errors import InsufficientScope, InvalidRequest, NotFound
from apps.core.params import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    CursorField,
    LimitField,
    SearchQueryField,
    StrictIntegerField,
)
from apps.core.shapes import INTEGER, STRING, Field, envelope
from apps.mcp.arguments import ToolArgumentError, input_schema, validate_arguments
from apps.mcp.protocol import STRUCTURED_OUTPUT_VERSIONS
from apps.recordings import search, selectors, shapes
from apps.recordings.representations import (
    board_repr,
    flat_segment_rows_repr,
    search_hit_repr,
    session_row_repr,
)

# get_transcript answers in one result up to this many segments; a longer transcript comes in
# pages of this size (hosts cap tool output at about 25k tokens; 200 segments stay well below).
TRANSCRIPT_PAGE_SEGMENTS = 200
TRANSCRIPT_MAX_LIMIT = 500

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


# --- Schemas ----------------------------------------------------------------------------------

# Output schemas: the shapes' portable JSON Schema (apps/core/shapes.py), one `type` per schema
# and nullability as `anyOf`, from the declarations the representations are generated from.

GET_TRANSCRIPT_OUTPUT = shapes.FLAT_TRANSCRIPT.extend(
    "GetTranscriptResult",
    Field("totalSegments", INTEGER),
    Field("nextCursor", STRING, nullable=True, description=shapes.NEXT_CURSOR),
    Field("note", STRING, required=False, description="present when this is one page of a longer transcript"),
)
LIST_BOARDS_OUTPUT = envelope("ListBoardsResult", "items", shapes.BOARD, many=True, component=False)


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


class GetTranscriptIn(serializers.Serializer):
    sessionId = session_id_field()
    cursor = CursorField(help_text="nextCursor of the previous page")
    limit = StrictIntegerField(required=False, min_value=1, max_value=TRANSCRIPT_MAX_LIMIT, help_text="segments per page")


class ListBoardsIn(serializers.Serializer):
    sessionId = session_id_field()


class GetBoardIn(serializers.Serializer):
    sessionId = session_id_field()
    boardSpecId = serializers.CharField(min_length=1, help_text="the board's boardId")


def _cursor_error() -> ToolArgumentError:
    return ToolArgumentError("cursor", "is not a cursor this tool handed out (or it expired); start without it")


# --- The tools --------------------------------------------------------------------------------


def list_sessions(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    given = validate_arguments(ListSessionsIn, arguments)
    limit, cursor = given.get("limit", DEFAULT_PAGE_SIZE), given.get("cursor")
    try:
        sessions, next_cursor = selectors.sessions_page(workspace=principal.workspace, limit=limit, cursor=cursor)
    except InvalidRequest:
        raise _cursor_error() from None
    return {"items": [session_row_repr(s) for s in sessions], "nextCursor": next_cursor}


def get_session(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    session_id = validate_arguments(GetSessionIn, arguments)["sessionId"]
    row = selectors.session_row(workspace=principal.workspace, session_id=session_id)
    return {"session": session_row_repr(row)}


def search_transcripts(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    given = validate_arguments(SearchTranscriptsIn, arguments)
    query, limit, cursor = given["query"], given.get("limit", DEFAULT_PAGE_SIZE), given.get("cursor")
    try:
        hits, next_cursor = search.search_transcripts(
            workspace=principal.workspace, query=query, limit=limit, cursor=cursor
        )
    except InvalidRequest:
        raise _cursor_error() from None
    return {"items": [search_hit_repr(h) for h in hits], "nextCursor": next_cursor}


def get_transcript(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    """The flat transcript as REST returns it, plus `nextCursor`. Without `cursor` and `limit`
    a transcript of up to TRANSCRIPT_PAGE_SEGMENTS segments comes whole; a longer one comes in
    pages, and the result says so (`note`, `totalSegments`) rather than cutting silently."""
    given = validate_arguments(GetTranscriptIn, arguments)
    session_id, limit, cursor = given["sessionId"], given.get("limit"), given.get("cursor")
    workspace = principal.workspace
    start, cursor_transcript = 0, None
    if cursor is not None:
        try:
            cursor_session, cursor_transcript, start = decode_cursor("mcp-transcript", workspace.id, cursor)
        except (InvalidRequest, ValueError, TypeError):
            raise _cursor_error() from None
        if cursor_session != session_id or not isinstance(start, int) or start < 0:
            raise _cursor_error()
    # REST's fast path: the flat revision's segments as rows, encoded by the same declaration.
    rows = selectors.transcript_rows(workspace=workspace, session_id=session_id, flat=True)
    transcript, segments = rows.flat
    transcript_id = transcript.id if segments else ""
    if cursor is not None:
        if cursor_transcript != transcript_id:
            # The final revision replaced the committed one between pages: offsets no longer apply.
            raise ToolArgumentError("cursor", "the transcript changed since this cursor was issued; start again")
    page_size = limit or TRANSCRIPT_PAGE_SEGMENTS
    if limit is None and cursor is None and len(segments) <= TRANSCRIPT_PAGE_SEGMENTS:
        page_size = len(segments)
    page = segments[start : start + page_size]
    end = start + len(page)
    result: dict[str, Any] = {"sessionId": session_id, "transcript": flat_segment_rows_repr(rows.stamp)(page)}
    result["totalSegments"] = len(segments)
    if end < len(segments):
        next_cursor = encode_cursor("mcp-transcript", workspace.id, [session_id, transcript_id, end])
        result["nextCursor"] = next_cursor
        result["note"] = (
            f"Segments {start + 1}-{end} of {len(segments)}. This is not the whole transcript: call "
            f"get_transcript again with sessionId {session_id!r} and cursor set to nextCursor for the rest."
        )
    else:
        result["nextCursor"] = None
    return result


def list_boards(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    session_id = validate_arguments(ListBoardsIn, arguments)["sessionId"]
    boards = selectors.session_boards(workspace=principal.workspace, session_id=session_id, with_payload=True)
    return {"items": [board_repr(b) for b in boards]}


def get_board(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    given = validate_arguments(GetBoardIn, arguments)
    session_id, board_id = given["sessionId"], given["boardSpecId"]
    board = selectors.current_board(workspace=principal.workspace, session_id=session_id, board_id=board_id)
    return {"board": board_repr(board)}


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    scope: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    run: Callable[[Principal, dict[str, Any]], dict[str, Any]]

    def definition(self, version: str) -> dict[str, Any]:
        definition: dict[str, Any] = {"name": self.name}
        if version in STRUCTURED_OUTPUT_VERSIONS:
            definition["title"] = self.title  # Tool.title arrived with structured output (2025-06-18)
        definition["description"] = self.description
        definition["inputSchema"] = self.input_schema
        if version in STRUCTURED_OUTPUT_VERSIONS:
            definition["outputSchema"] = self.output_schema
        definition["annotations"] = {"title": self.title, **READ_ONLY}
        return definition


# In the order tools/list shows them (deterministic, tools.mdx "Capabilities").
TOOLS: tuple[Tool, ...] = (
    Tool(
        name="list_sessions",
        title="List sessions",
        scope="svc:sessions:read",
        description=(
            "List the workspace's recorded sessions (meetings, calls), newest first. Each item has the session's id, "
            "label, memo, status (recording, processing, completed, failed) and timestamps; no transcript text. "
            "Use it to browse recent sessions or to find a session id for the other tools; to find sessions by "
            "what was said, use search_transcripts instead. Returns up to `limit` items (1-100, default 20) and "
            "`nextCursor`: when it is not null, call again with `cursor` set to it for the next (older) page."
        ),
        input_schema=input_schema(ListSessionsIn),
        output_schema=shapes.SESSION_PAGE.json_schema(portable=True),
        run=list_sessions,
    ),
    Tool(
        name="get_session",
        title="Get a session",
        scope="svc:sessions:read",
        description=(
            "Read one session's metadata by id: label, memo, status and its start, end, creation and update times. "
            "It does not include what was said; use get_transcript for that and list_boards or get_board for the "
            "AI-generated boards."
        ),
        input_schema=input_schema(GetSessionIn),
        output_schema=shapes.SESSION_ENVELOPE.json_schema(portable=True),
        run=get_session,
    ),
    Tool(
        name="search_transcripts",
        title="Search transcripts",
        scope="svc:transcripts:read",
        description=(
            "Full-text search over what was said in the workspace's sessions. Every word of `query` must occur in "
            "one transcript segment; case and accents are ignored and punctuation is not syntax. Returns the "
            "matching sessions, best match first, each with a snippet (at most 200 characters) around the match; "
            "a session can appear once per transcript revision (revisionKind committed = live, final = after "
            "recording). Up to `limit` hits (1-100, default 20); when `nextCursor` is not null, call again with "
            "the same query and `cursor` set to it. Newer matches come first: hits are ranked best first within "
            "each batch of the newest remaining matches, so a page can hold fewer than `limit` hits, even none, "
            "while `nextCursor` is not null; only a null `nextCursor` means there are no more. Use get_transcript "
            "with a hit's id for the full text."
        ),
        input_schema=input_schema(SearchTranscriptsIn),
        output_schema=shapes.SEARCH_PAGE.json_schema(portable=True),
        run=search_transcripts,
    ),
    Tool(
        name="get_transcript",
        title="Get a transcript",
        scope="svc:transcripts:read",
        description=(
            "The transcript of one session as a list of segments in spoken order (speaker label, text, start and "
            "end in milliseconds from the session start, confidence). It is the final revision when the session "
            "has one, else the live (committed) one; empty when nothing was transcribed. A transcript of up to "
            f"{TRANSCRIPT_PAGE_SEGMENTS} segments comes whole. A longer one comes in pages of "
            f"{TRANSCRIPT_PAGE_SEGMENTS} segments (or `limit`, 1-{TRANSCRIPT_MAX_LIMIT}): the result then has "
            "`totalSegments`, a `note`, and `nextCursor`; call again with the same sessionId and `cursor` set to "
            "nextCursor until nextCursor is null."
        ),
        input_schema=input_schema(GetTranscriptIn),
        output_schema=GET_TRANSCRIPT_OUTPUT.json_schema(portable=True),
        run=get_transcript,
    ),
    Tool(
        name="list_boards",
        title="List a session's boards",
        scope="svc:boards:read",
        description=(
            "Every AI-generated board content of one session (summaries, action items and the like), with its "
            "full JSON payload: every version of every board, grouped by board (boardId), newest version first; "
            "isCurrent marks the version in use. To read only the current version of one board, use get_board."
        ),
        input_schema=input_schema(ListBoardsIn),
        output_schema=LIST_BOARDS_OUTPUT.json_schema(portable=True),
        run=list_boards,
    ),
    Tool(
        name="get_board",
        title="Get a board",
        scope="svc:boards:read",
        description=(
            "The current content of one board of a session, with its full JSON payload and payloadHash. "
            "boardSpecId is the board's boardId as list_boards shows it."
        ),
        input_schema=input_schema(GetBoardIn),
        output_schema=shapes.BOARD_ENVELOPE.json_schema(portable=True),
        run=get_board,
    ),
)
TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}


def text_result(body: dict[str, Any], *, is_error: bool) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": orjson.dumps(body).decode()}], "isError": is_error}


@dataclass(frozen=True)
class WorkspaceTools:
    """The registry as one principal sees it (apps.mcp.protocol.Tools)."""

    principal: Principal

    def definitions(self, version: str) -> list[dict[str, Any]]:
        return [tool.definition(version) for tool in TOOLS]

    def knows(self, name: str) -> bool:
        return name in TOOLS_BY_NAME

    def call(self, name: str, arguments: dict[str, Any], version: str) -> dict[str, Any]:
        tool = TOOLS_BY_NAME[name]
        if not self.principal.has_scope(tool.scope):
            return text_result(InsufficientScope((tool.scope,)).body(request_id=False), is_error=True)
        try:
            body = tool.run(self.principal, arguments)
        except (NotFound, InvalidRequest) as error:
            return text_result(error.body(request_id=False), is_error=True)
        result = text_result(body, is_error=False)
        if version in STRUCTURED_OUTPUT_VERSIONS:
            result["structuredContent"] = body
        return result
