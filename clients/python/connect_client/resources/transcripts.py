"""`client.transcripts`: the flat transcript, the revisions (JSON or exported text: the
overloads on `format` give each its type), and search."""

from __future__ import annotations

import builtins
from functools import cached_property
from typing import Literal, overload

from .. import models
from .._resource import (AsyncAPIResource, SyncAPIResource, _many, _one, _seg, _text, to_async_raw,
                         to_async_raw_list, to_raw, to_raw_list)
from .._response import Request
from ..pagination import AsyncPaginator, ListCall, Paginator
from ..types import RevisionKind, SearchMode, TextFormat, TranscriptFormat

FORMATS = ("json", "vtt", "srt", "txt")
Revisions = builtins.list[models.TranscriptRevision]


def _params(format: str, max_cue_chars: int | None, **more: str | None) -> dict[str, str | int | None]:
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    return {**more, "maxCueChars": max_cue_chars, "format": None if format == "json" else format}


def _get(session_id: str, format: str, max_cue_chars: int | None) -> Request[models.Transcript | str]:
    path = f"/api/v1/sessions/{_seg(session_id)}/transcript"
    parse = _one(models.Transcript) if format == "json" else _text
    return Request("GET", path, parse, params=_params(format, max_cue_chars))


def _revisions(session_id: str, revision_kind: str | None, format: str,
               max_cue_chars: int | None) -> Request[Revisions | str]:
    path = f"/api/v1/sessions/{_seg(session_id)}/transcripts"
    parse = _many(models.TranscriptRevision, "transcripts") if format == "json" else _text
    return Request("GET", path, parse, params=_params(format, max_cue_chars, revisionKind=revision_kind))


def _search(query: str, revision_kind: str | None, limit: int | None,
            mode: SearchMode | None) -> ListCall[models.SearchHit]:
    return ListCall("/api/v1/transcripts/search",
                    {"query": query, "revisionKind": revision_kind, "limit": limit, "mode": mode},
                    models.SearchHit.from_wire)


class Transcripts(SyncAPIResource):
    @cached_property
    def with_raw_response(self) -> TranscriptsWithRawResponse:
        return TranscriptsWithRawResponse(Transcripts(self._client, raw=True))

    @overload
    def get(self, session_id: str, *, format: Literal["json"] = "json",
            max_cue_chars: int | None = None) -> models.Transcript: ...
    @overload
    def get(self, session_id: str, *, format: TextFormat, max_cue_chars: int | None = None) -> str: ...

    def get(self, session_id: str, *, format: TranscriptFormat = "json",
            max_cue_chars: int | None = None) -> models.Transcript | str:
        """The session's flat transcript: a `Transcript` for `json`; the exported text for
        `vtt`, `srt` and `txt` (`max_cue_chars` splits long cues, vtt and srt only). Conditional."""
        return self._send(_get(session_id, format, max_cue_chars))

    @overload
    def revisions(self, session_id: str, *, revision_kind: RevisionKind | None = None,
                  format: Literal["json"] = "json", max_cue_chars: int | None = None) -> Revisions: ...
    @overload
    def revisions(self, session_id: str, *, revision_kind: RevisionKind | None = None, format: TextFormat,
                  max_cue_chars: int | None = None) -> str: ...

    def revisions(self, session_id: str, *, revision_kind: RevisionKind | None = None,
                  format: TranscriptFormat = "json", max_cue_chars: int | None = None) -> Revisions | str:
        """Committed and final revisions (or one kind); exported text for `vtt`, `srt`, `txt`."""
        return self._send(_revisions(session_id, revision_kind, format, max_cue_chars))

    def search(self, query: str, *, revision_kind: RevisionKind | None = None,
               limit: int | None = None, mode: SearchMode | None = None) -> Paginator[models.SearchHit]:
        return self._list(_search(query, revision_kind, limit, mode))


class AsyncTranscripts(AsyncAPIResource):
    @cached_property
    def with_raw_response(self) -> AsyncTranscriptsWithRawResponse:
        return AsyncTranscriptsWithRawResponse(AsyncTranscripts(self._client, raw=True))

    @overload
    async def get(self, session_id: str, *, format: Literal["json"] = "json",
                  max_cue_chars: int | None = None) -> models.Transcript: ...
    @overload
    async def get(self, session_id: str, *, format: TextFormat, max_cue_chars: int | None = None) -> str: ...

    async def get(self, session_id: str, *, format: TranscriptFormat = "json",
                  max_cue_chars: int | None = None) -> models.Transcript | str:
        return await self._send(_get(session_id, format, max_cue_chars))

    @overload
    async def revisions(self, session_id: str, *, revision_kind: RevisionKind | None = None,
                        format: Literal["json"] = "json", max_cue_chars: int | None = None) -> Revisions: ...
    @overload
    async def revisions(self, session_id: str, *, revision_kind: RevisionKind | None = None, format: TextFormat,
                        max_cue_chars: int | None = None) -> str: ...

    async def revisions(self, session_id: str, *, revision_kind: RevisionKind | None = None,
                        format: TranscriptFormat = "json", max_cue_chars: int | None = None) -> Revisions | str:
        return await self._send(_revisions(session_id, revision_kind, format, max_cue_chars))

    def search(self, query: str, *, revision_kind: RevisionKind | None = None,
               limit: int | None = None, mode: SearchMode | None = None) -> AsyncPaginator[models.SearchHit]:
        return self._list(_search(query, revision_kind, limit, mode))


class TranscriptsWithRawResponse:
    def __init__(self, transcripts: Transcripts) -> None:
        self.get = to_raw(transcripts.get)
        self.revisions = to_raw(transcripts.revisions)
        self.search = to_raw_list(transcripts.search)


class AsyncTranscriptsWithRawResponse:
    def __init__(self, transcripts: AsyncTranscripts) -> None:
        self.get = to_async_raw(transcripts.get)
        self.revisions = to_async_raw(transcripts.revisions)
        self.search = to_async_raw_list(transcripts.search)
