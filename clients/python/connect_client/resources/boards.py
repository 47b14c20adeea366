"""`client.boards`: a session's boards (every version) and one board's current content."""

from __future__ import annotations

import builtins
from functools import cached_property

from .. import models
from .._resource import AsyncAPIResource, SyncAPIResource, _many, _one, _seg, to_async_raw, to_raw
from .._response import Request

Summaries = builtins.list[models.BoardSummary]


def _list(session_id: str) -> Request[Summaries]:
    return Request("GET", f"/api/v1/sessions/{_seg(session_id)}/boards", _many(models.BoardSummary, "items"))


def _get(session_id: str, board_spec_id: str) -> Request[models.Board]:
    return Request("GET", f"/api/v1/sessions/{_seg(session_id)}/boards/{_seg(board_spec_id)}",
                   _one(models.Board, "board"))


class Boards(SyncAPIResource):
    @cached_property
    def with_raw_response(self) -> BoardsWithRawResponse:
        return BoardsWithRawResponse(Boards(self._client, raw=True))

    def list(self, session_id: str) -> Summaries:
        """Every version of every board of the session, newest version first per board. Conditional."""
        return self._send(_list(session_id))

    def get(self, session_id: str, board_spec_id: str) -> models.Board:
        """The current version, with its payload. Conditional."""
        return self._send(_get(session_id, board_spec_id))


class AsyncBoards(AsyncAPIResource):
    @cached_property
    def with_raw_response(self) -> AsyncBoardsWithRawResponse:
        return AsyncBoardsWithRawResponse(AsyncBoards(self._client, raw=True))

    async def list(self, session_id: str) -> Summaries:
        return await self._send(_list(session_id))

    async def get(self, session_id: str, board_spec_id: str) -> models.Board:
        return await self._send(_get(session_id, board_spec_id))


class BoardsWithRawResponse:
    def __init__(self, boards: Boards) -> None:
        self.list = to_raw(boards.list)
        self.get = to_raw(boards.get)


class AsyncBoardsWithRawResponse:
    def __init__(self, boards: AsyncBoards) -> None:
        self.list = to_async_raw(boards.list)
        self.get = to_async_raw(boards.get)
