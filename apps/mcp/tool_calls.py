"""What each MCP tool does (apps/mcp/tools.py registers them): its arguments validated against
its declaration (apps/mcp/tool_schemas.py), then the selectors and representation functions
REST calls, so a session, a transcript segment or a board reads the same through either door.
Every result fits the result budget, paging with a note (apps/mcp/budget.py); a failure is
raised as REST raises it (`NotFound`, `InvalidRequest`, `ToolArgumentError` naming the
argument) and becomes a tool error result in apps/mcp/tools.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apps.access.principal import Principal
from apps.core.cursors import decode_cursor, encode_cursor
from apps.core.errors import InvalidRequest
from apps.core.params import DEFAULT_PAGE_SIZE
from apps.mcp import budget, transcripts
from apps.mcp.arguments import ToolArgumentError, validate_arguments
from apps.mcp.resources import board_uri, fit_session
from apps.mcp.tool_schemas import (
    GetBoardIn,
    GetSessionIn,
    GetTranscriptIn,
    ListBoardsIn,
    ListSessionsIn,
    SearchTranscriptsIn,
)
from apps.recordings import search, selectors
from apps.recordings.search import semantic as search_modes
from apps.recordings.semantic import HOW_TO_TURN_ON
from apps.recordings.semantic import enabled as semantic_enabled
from apps.recordings.representations import board_repr, board_summary_repr, search_hit_repr, session_row_repr


def _cursor_error() -> ToolArgumentError:
    return ToolArgumentError("cursor", "is not a cursor this tool handed out (or it expired); start without it")



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
