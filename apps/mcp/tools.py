"""The six tools (docs/api/mcp.md), in one registry: name, description written for a model,
input and output schema (apps/mcp/tool_schemas.py), annotations, scope, and the function that
runs it (apps/mcp/tool_calls.py).

Tool-level failures are results with `isError: true` and `{"error": code}` as their text
(docs/api/mcp.md, "Errors"): `insufficient_scope`, `not_found`, `invalid_request` (naming the
argument).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from apps.access.principal import Principal
from apps.core.errors import InsufficientScope, InvalidRequest, NotFound
from apps.mcp.arguments import input_schema
from apps.mcp.discovery import ICON_VERSIONS, icons, server_info
from apps.mcp.protocol import STRUCTURED_OUTPUT_VERSIONS
from apps.mcp.resources import WorkspaceResources
from apps.mcp.tool_calls import get_board, get_session, get_transcript, list_boards, list_sessions, search_transcripts
from apps.mcp.tool_schemas import (
    GET_BOARD_OUTPUT,
    GET_TRANSCRIPT_OUTPUT,
    LIST_BOARDS_OUTPUT,
    TRANSCRIPT_MAX_LIMIT,
    GetBoardIn,
    GetSessionIn,
    GetTranscriptIn,
    ListBoardsIn,
    ListSessionsIn,
    SearchTranscriptsIn,
    with_note,
)
from apps.recordings import shapes

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


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
        if version in ICON_VERSIONS:
            definition["icons"] = icons()  # Tool.icons arrived in 2025-11-25
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
            "`nextCursor`: when it is not null, call again with `cursor` set to it for the next (older) page (a page "
            "also ends where one result is full)."
        ),
        input_schema=input_schema(ListSessionsIn),
        output_schema=with_note(shapes.SESSION_PAGE.json_schema(portable=True)),
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
        output_schema=with_note(shapes.SESSION_ENVELOPE.json_schema(portable=True)),
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
            "with a hit's id for the full text. `mode` semantic finds what a question means when the words differ "
            "(hybrid: both lists fused); each hit then has a `score`, and the list is at most 100 revisions, best "
            "first. It needs search by meaning turned on on the server."
        ),
        input_schema=input_schema(SearchTranscriptsIn),
        output_schema=with_note(shapes.SEARCH_PAGE.json_schema(portable=True)),
        run=search_transcripts,
    ),
    Tool(
        name="get_transcript",
        title="Get a transcript",
        scope="svc:transcripts:read",
        description=(
            "The transcript of one session in spoken order. It is the final revision when the session has one, "
            "else the live (committed) one; empty when nothing was transcribed. `format` json (default) gives "
            "segments (speaker label, text, start and end in milliseconds from the session start, confidence); "
            "text gives one line per segment, `[HH:MM:SS.mmm] Speaker: text`, about a third of the size. `from` "
            "and `to` (milliseconds) keep only the segments that start in that window. A result holds as many "
            f"segments as fit in one result (and at most `limit`, 1-{TRANSCRIPT_MAX_LIMIT}); when there are more, "
            "it has a `note` and `nextCursor`: call again with the same sessionId, format and window and `cursor` "
            "set to nextCursor until nextCursor is null. `totalSegments` counts the segments in the window."
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
            "isCurrent marks the version in use. As many versions as fit in one result come at once; when there "
            "are more, `nextCursor` is not null (call again with `cursor` set to it). A payload too large for a "
            "result on its own is left out (`payloadOmitted`) and the `note` names the resource to read it from. "
            "To read only the current version of one board, use get_board."
        ),
        input_schema=input_schema(ListBoardsIn),
        output_schema=with_note(LIST_BOARDS_OUTPUT.json_schema(portable=True)),
        run=list_boards,
    ),
    Tool(
        name="get_board",
        title="Get a board",
        scope="svc:boards:read",
        description=(
            "The current content of one board of a session, with its full JSON payload and payloadHash. "
            "boardSpecId is the board's boardId as list_boards shows it. A payload too large for one result is "
            "left out (`payloadOmitted`) and the `note` names the resource to read it from, in pages."
        ),
        input_schema=input_schema(GetBoardIn),
        output_schema=with_note(GET_BOARD_OUTPUT.json_schema(portable=True)),
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

    @property
    def resources(self) -> WorkspaceResources:
        return WorkspaceResources(self.principal)

    def server_info(self, version: str) -> dict[str, Any]:
        return server_info(version)

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
        if "text" in body and name == "get_transcript":
            # Format text: the model reads the lines themselves, then what is left and the cursor.
            tail = f"\n[{body['note']} nextCursor: {body['nextCursor']}]\n" if body.get("note") else ""
            result["content"][0]["text"] = body["text"] + tail
        if version in STRUCTURED_OUTPUT_VERSIONS:
            result["structuredContent"] = body
        return result
