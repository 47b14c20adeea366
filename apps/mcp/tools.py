"""The six tools (docs/api/mcp.md), in one registry: name, description written for a model,
input and output schema, annotations, scope, and the function that runs it.

Every tool calls the selectors and representation functions REST calls, so a session, a
transcript segment or a board reads the same through either door, and every result fits the
result budget, paging with a note (apps/mcp/budget.py). Tool-level failures are results with
`isError: true` and `{"error": code}` as their text (docs/api/mcp.md, "Errors"):
`insufficient_scope`, `not_found`, `invalid_request` (naming the argument).
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
from apps.core.shapes import BOOLEAN, INTEGER, JSON, STRING, Field, Shape, envelope, page_of
from apps.mcp import budget, transcripts
from apps.mcp.arguments import ToolArgumentError, input_schema, validate_arguments
from apps.mcp.discovery import ICON_VERSIONS, icons, server_info
from apps.mcp.protocol import STRUCTURED_OUTPUT_VERSIONS
from apps.mcp.resources import WorkspaceResources, board_uri, fit_session
from apps.recordings import search, selectors, shapes
from apps.recordings.search import semantic as search_modes
from apps.recordings.semantic import HOW_TO_TURN_ON
from apps.recordings.semantic import enabled as semantic_enabled
from apps.recordings.representations import board_repr, board_summary_repr, search_hit_repr, session_row_repr

# get_transcript's largest page by count (`limit`); every page is bounded by the result budget
# (apps/mcp/budget.py) as well, which is what usually ends a page.
TRANSCRIPT_MAX_LIMIT = 500
WINDOW_MAX_MS = 2**31 - 1  # timestamps are 32-bit integer columns

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


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


def _cursor_error() -> ToolArgumentError:
    return ToolArgumentError("cursor", "is not a cursor this tool handed out (or it expired); start without it")


# --- The tools --------------------------------------------------------------------------------


def _fit_page(fetch: Callable[[int], tuple[list[dict[str, Any]], str | None]], limit: int,
              more: str) -> dict[str, Any]:
    """A page of at most `limit` items that fits the budget: when `limit` items do not fit, the
    page is asked for again with as many as fit (so its cursor follows the last item shown), and
    a note says that the budget, not `limit`, ended it (`more` says how to go on)."""
    asked = limit
    while True:
        items, next_cursor = fetch(limit)
        fit = budget.fitting(map(budget.size, items), budget.room())
        if fit >= len(items):
            page: dict[str, Any] = {"items": items, "nextCursor": next_cursor}
            if limit < asked and next_cursor is not None:
                page["note"] = f"Only {len(items)} items fit in one result. {more}"
            return page
        if fit == 0:
            # One item larger than the budget: only a session's memo can make it so; it is cut.
            if limit == 1:
                item, note = fit_session(items[0], "The memo")
                return {"items": [item], "nextCursor": next_cursor, "note": f"{note} {more}"}
            limit = 1
        else:
            limit = fit


def list_sessions(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    given = validate_arguments(ListSessionsIn, arguments)
    cursor = given.get("cursor")

    def fetch(limit: int) -> tuple[list[dict[str, Any]], str | None]:
        try:
            rows, next_cursor = selectors.sessions_page(workspace=principal.workspace, limit=limit, cursor=cursor)
        except InvalidRequest:
            raise _cursor_error() from None
        return [session_row_repr(s) for s in rows], next_cursor

    more = "Older sessions follow: call list_sessions with cursor set to nextCursor."
    return _fit_page(fetch, given.get("limit", DEFAULT_PAGE_SIZE), more)


def get_session(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    session_id = validate_arguments(GetSessionIn, arguments)["sessionId"]
    row = selectors.session_row(workspace=principal.workspace, session_id=session_id)
    session, note = fit_session(session_row_repr(row), "The memo")
    return {"session": session, **({"note": note} if note else {})}


def search_transcripts(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    given = validate_arguments(SearchTranscriptsIn, arguments)
    query, cursor, mode = given["query"], given.get("cursor"), given.get("mode", "keyword")
    if mode != "keyword" and not semantic_enabled():
        raise ToolArgumentError("mode", f"{mode} needs {HOW_TO_TURN_ON}")

    def fetch(limit: int) -> tuple[list[dict[str, Any]], str | None]:
        try:
            if mode != "keyword":
                hits, next_cursor = search_modes.search_with_mode(
                    workspace=principal.workspace, query=query, mode=mode, limit=limit, cursor=cursor
                )
                return [{**search_hit_repr(h), "score": h.score} for h in hits], next_cursor
            hits, next_cursor = search.search_transcripts(
                workspace=principal.workspace, query=query, limit=limit, cursor=cursor
            )
        except InvalidRequest:
            raise _cursor_error() from None
        return [search_hit_repr(h) for h in hits], next_cursor

    more = "More hits follow: call search_transcripts with the same query and cursor set to nextCursor."
    return _fit_page(fetch, given.get("limit", DEFAULT_PAGE_SIZE), more)


def get_transcript(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    """The flat transcript as REST returns it (or as text lines), a page at a time: each page
    holds what fits the result budget (and at most `limit` segments), and says what is left."""
    given = validate_arguments(GetTranscriptIn, arguments)
    query = transcripts.Query(given["sessionId"], None, given.get("format", "json"), given.get("from"),
                              given.get("to"))
    if query.start_ms is not None and query.end_ms is not None and query.end_ms <= query.start_ms:
        raise ToolArgumentError("to", "must be after from")
    page = transcripts.read(principal.workspace, query, given.get("cursor"), given.get("limit"))
    result: dict[str, Any] = {"sessionId": query.session_id}
    if page.text is None:
        result["transcript"] = page.body["transcript"]
    else:
        result["text"] = page.text
    result["totalSegments"] = page.total
    result["nextCursor"] = page.next_cursor
    if page.next_cursor is not None:
        result["note"] = (
            f"{page.describe(query)} This is not the whole transcript: call get_transcript again with the same "
            "sessionId, format and window, and cursor set to nextCursor, for the rest."
        )
    elif page.cut:
        result["note"] = page.describe(query)
    return result


def list_boards(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    """Every version of every board, newest version first per board, with payloads, a page at a
    time within the budget. The cursor is the last (boardId, version) shown, so versions added
    between pages never shift the rest."""
    given = validate_arguments(ListBoardsIn, arguments)
    session_id, cursor = given["sessionId"], given.get("cursor")
    boards = selectors.session_boards(workspace=principal.workspace, session_id=session_id, with_payload=True)
    if cursor is not None:
        try:
            cursor_session, last_board, last_version = decode_cursor("mcp-boards", principal.workspace.id, cursor)
        except (InvalidRequest, ValueError, TypeError):
            raise _cursor_error() from None
        if cursor_session != session_id:
            raise _cursor_error()
        boards = [b for b in boards if (b.board_id, -b.version) > (last_board, -last_version)]
    space, items, omitted = budget.room(), [], []
    for board in boards:
        item = board_repr(board)
        cost = budget.size(item) + 1
        if cost > budget.room():
            # Larger than any result may be: its summary, and the resource that pages the payload.
            item = {**board_summary_repr(board), "payloadOmitted": True}
            cost = budget.size(item) + 1
            omitted.append(board_uri(session_id, board.board_id, board.version))
        if items and cost > space:
            if item.get("payloadOmitted"):
                omitted.pop()
            break
        items.append(item)
        space -= cost
    result: dict[str, Any] = {"items": items, "nextCursor": None}
    notes = []
    if len(items) < len(boards):
        last = items[-1]
        result["nextCursor"] = encode_cursor("mcp-boards", principal.workspace.id,
                                             [session_id, last["boardId"], last["version"]])
        notes.append(f"{len(items)} of {len(boards)} remaining board versions: call list_boards again with cursor "
                     "set to nextCursor for the rest.")
    if omitted:
        notes.append("Payloads too large for one result were left out (payloadOmitted); read them, in pages, "
                     f"as the resources {', '.join(omitted)}.")
    if notes:
        result["note"] = " ".join(notes)
    return result


def get_board(principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    given = validate_arguments(GetBoardIn, arguments)
    session_id, board_id = given["sessionId"], given["boardSpecId"]
    board = selectors.current_board(workspace=principal.workspace, session_id=session_id, board_id=board_id)
    item = board_repr(board)
    if budget.size(item) <= budget.room():
        return {"board": item}
    uri = board_uri(session_id, board.board_id, board.version)
    return {
        "board": {**board_summary_repr(board), "payloadOmitted": True},
        "note": f"The payload is larger than one result may be; read it, in pages, as the resource {uri}.",
    }


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
