"""REST views for sessions, transcripts, search and boards (docs/api/, one page per resource). Views only
validate input, call a selector and format with the shared representations."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import orjson
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils.cache import patch_vary_headers
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from apps.access.ratelimit import refund_sync
from apps.access.rest import HasScope
from apps.core.conditional import CACHE_CONTROL, names_tag, none_match, strong_etag
from apps.core.errors import invalid
from apps.core.openapi import error_responses
from apps.core.params import (
    DEFAULT_PAGE_SIZE,
    ChoicesField,
    CursorField,
    LimitField,
    NoQuery,
    RevisionKindField,
    SearchQueryField,
    StrictIntegerField,
    TimestampField,
    validate_query,
)
from apps.recordings import exports, search, selectors, shapes
from apps.recordings.search import semantic as search_modes
from apps.recordings.models import SessionStatus
from apps.recordings.representations import (
    board_repr,
    board_summary_repr,
    flat_transcript_rows_repr,
    search_hit_repr,
    session_row_repr,
    transcript_revision_rows_repr,
)

SESSIONS_READ = HasScope.of("svc:sessions:read")
TRANSCRIPTS_READ = HasScope.of("svc:transcripts:read")
BOARDS_READ = HasScope.of("svc:boards:read")

# Response bodies are documented as the components of apps/recordings/shapes.py, the
# declarations the representations are built from (tests/test_openapi.py checks live
# responses against them).

# Transcript formats (an extension: docs/api/transcripts.md): the `format` parameter's values and the
# media types `Accept` can name instead.
TRANSCRIPT_FORMATS = {"json": "application/json", "vtt": "text/vtt", "srt": "application/x-subrip", "txt": "text/plain"}
EXPORT_MEDIA_TYPES = [media for name, media in TRANSCRIPT_FORMATS.items() if name != "json"]
MAX_CUE_CHARS = 2000
BOARD_SUMMARY_FIELDS = shapes.BOARD_SUMMARY.source_attributes()

EXPORTS = (
    "Extension: `format=vtt|srt|txt` (or `Accept: text/vtt`, `application/x-subrip`, `text/plain`) exports "
    "the transcript as WebVTT (cues with `<v Speaker>` voice tags), SubRip (numbered cues, `Speaker: ` "
    "prefix) or plain text (speaker turns, consecutive segments of one speaker merged), with a "
    "`Content-Disposition` file name from the session label. An empty transcript is an empty file."
)
CONDITIONAL = (
    "Extension: the answer carries a strong `ETag` (per format) and `Cache-Control: private, no-cache`. Send "
    "it back as `If-None-Match` and an unchanged answer is `304 Not Modified` with no body, which does not "
    "count against the rate limit."
)
IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match", str, OpenApiParameter.HEADER, required=False,
    description="an `ETag` from an earlier answer: `304` when it still holds",
)  # fmt: skip
NOT_MODIFIED = OpenApiResponse(description="Not modified: the `ETag` sent in `If-None-Match` still holds. No body.")


def json_response(data: Any) -> HttpResponse:
    """One encode with orjson: the same JSON as DRF's renderer gives (compact, UTF-8), parsed
    equal (tests/recordings/test_transcript_fast_path.py compares the two)."""
    return HttpResponse(orjson.dumps(data), content_type="application/json")


def tagged(response: HttpResponse, etag: str, vary: Iterable[str] = ()) -> HttpResponse:
    response["ETag"] = etag
    response["Cache-Control"] = CACHE_CONTROL
    if vary:
        patch_vary_headers(response, tuple(vary))
    return response


class ConditionalApi(APIView):
    """A view whose answers carry a strong `ETag` and may be `304 Not Modified`. A `304` that
    names the tag gives the request's hit back to the rate limit, and the headers showing that
    are written by RateLimitHeadersMiddleware from Django's HttpRequest, which DRF's Request
    wraps: reads go through to it (DRF documents the proxy), writes do not. So `setup`, Django's
    hook before `dispatch`, keeps the HttpRequest the view was called with."""

    http_request: HttpRequest

    def setup(self, request: HttpRequest, *args: Any, **kwargs: Any) -> None:
        super().setup(request, *args, **kwargs)
        self.http_request = request

    def not_modified(self, request: Request, etag: str, vary: Iterable[str] = ()) -> HttpResponse:
        """`304` with no body; the request's hit is given back to the rate limit when it named the
        tag (`If-None-Match: *` proves no earlier answer, and is not free)."""
        if names_tag(request.META.get("HTTP_IF_NONE_MATCH"), etag):
            rate = getattr(self.http_request, "rate_limit", None)
            self.http_request.rate_limit = refund_sync(request.auth, rate)
        return tagged(HttpResponseNotModified(), etag, vary)

    def conditional(self, request: Request, etag: str, build: Callable[[], HttpResponse]) -> HttpResponse:
        """`build()`'s answer, tagged, unless `If-None-Match` already holds `etag`: then a 304."""
        if none_match(request.META.get("HTTP_IF_NONE_MATCH"), etag):
            return self.not_modified(request, etag)
        return tagged(build(), etag)


# --- Views ----------------------------------------------------------------------------------


class SessionListApi(APIView):
    permission_classes = [SESSIONS_READ]

    class QueryIn(serializers.Serializer):
        cursor = CursorField(help_text="Opaque cursor from the previous page's `nextCursor`, sent with the same "
                             "filters (other filters: 400).")
        limit = LimitField()
        status = ChoicesField(SessionStatus.values, help_text="Extension: only sessions in one of these statuses; "
                              "repeated (`status=completed&status=failed`) or comma-separated.")
        createdAfter = TimestampField(required=False, help_text="Extension: only sessions created after this "
                                      "instant (ISO 8601 with a time zone; exclusive, to the millisecond).")
        createdBefore = TimestampField(required=False, help_text="Extension: only sessions created before this "
                                       "instant (exclusive).")

    @extend_schema(
        operation_id="listSessions",
        summary="List sessions, newest first",
        parameters=[QueryIn],
        responses={200: shapes.SESSION_PAGE.ref(), **error_responses(400)},
    )
    def get(self, request: Request) -> HttpResponse:
        query = validate_query(self.QueryIn, request)
        sessions, next_cursor = selectors.sessions_page(
            workspace=request.auth.workspace,
            limit=query.get("limit", DEFAULT_PAGE_SIZE),
            cursor=query.get("cursor"),
            statuses=query.get("status"),
            created_after=query.get("createdAfter"),
            created_before=query.get("createdBefore"),
        )
        return json_response({"items": [session_row_repr(s) for s in sessions], "nextCursor": next_cursor})


class SessionDetailApi(ConditionalApi):
    permission_classes = [SESSIONS_READ]

    @extend_schema(
        operation_id="getSession",
        summary="Read a session's metadata (no transcript segments)",
        description=CONDITIONAL,
        parameters=[IF_NONE_MATCH],
        responses={200: shapes.SESSION_ENVELOPE.ref(), 304: NOT_MODIFIED, **error_responses(400)},
    )
    def get(self, request: Request, id: str) -> HttpResponse:
        validate_query(NoQuery, request)
        session = selectors.session_row(workspace=request.auth.workspace, session_id=id)
        # Every field the answer shows, in wire form, read already: the tag costs no query.
        tag = strong_etag("session", *session)
        return self.conditional(request, tag, lambda: json_response({"session": session_row_repr(session)}))


class TranscriptQuery(serializers.Serializer):
    format = serializers.ChoiceField(
        choices=list(TRANSCRIPT_FORMATS),
        required=False,
        help_text=(
            "Extension: `json` (default), `vtt` (WebVTT), `srt` (SubRip) or `txt` (speaker turns). Without it, "
            "the `Accept` header chooses (`text/vtt`, `application/x-subrip`, `text/plain`); anything else is JSON."
        ),
    )
    maxCueChars = StrictIntegerField(
        required=False,
        min_value=1,
        max_value=MAX_CUE_CHARS,
        help_text=(
            "Extension, vtt and srt only: split a segment longer than this many characters into cues at word "
            "boundaries, its time shared among them by length (like `chars_per_caption`)."
        ),
    )


def transcript_format(request: Request, query: dict[str, Any]) -> str:
    """`format=` when given, else the preferred of the media types in `Accept` (JSON when it
    names none of them, as the rest of the API ignores what it cannot serve)."""
    if "format" in query:
        fmt = query["format"]
    else:
        preferred = request.get_preferred_type(list(TRANSCRIPT_FORMATS.values()))
        fmt = next((name for name, media in TRANSCRIPT_FORMATS.items() if media == preferred), "json")
    if "maxCueChars" in query and fmt not in ("vtt", "srt"):
        raise invalid("maxCueChars", "applies to format vtt or srt only")
    return fmt


class TranscriptApi(ConditionalApi):
    """Both transcript paths, every format: one fast path. Segments are read as rows of the
    columns the answer needs and the body is encoded once (orjson for JSON, the exports' writers
    for the rest). The tag comes from the revisions' ids, segment counts and last sequences
    (`selectors.transcript_validator`), so a conditional request that matches reads no segment."""

    permission_classes = [TRANSCRIPTS_READ]
    flat = True

    def answer(self, request: Request, id: str, revision_kind: str | None, query: dict[str, Any]) -> HttpResponse:
        fmt = transcript_format(request, query)
        max_chars = query.get("maxCueChars")
        workspace = request.auth.workspace
        kind = "transcript" if self.flat else f"transcripts:{revision_kind or ''}"

        def tag(session: Any, version: list) -> str:
            return strong_etag(kind, fmt, max_chars, session.id, session.label, session.updated_at, version)

        if request.META.get("HTTP_IF_NONE_MATCH"):
            session, version = selectors.transcript_validator(
                workspace=workspace, session_id=id, revision_kind=revision_kind, flat=self.flat
            )
            etag = tag(session, version)
            if none_match(request.META["HTTP_IF_NONE_MATCH"], etag):
                return self.not_modified(request, etag, vary=("Accept",))
        rows = selectors.transcript_rows(
            workspace=workspace, session_id=id, revision_kind=revision_kind, flat=self.flat
        )
        etag = tag(rows.session, selectors.transcript_version(rows))
        response = self.render(rows, fmt, max_chars)
        return tagged(response, etag, vary=("Accept",))

    def render(self, rows: selectors.TranscriptRows, fmt: str, max_chars: int | None) -> HttpResponse:
        if fmt == "json":
            if self.flat:
                return json_response(flat_transcript_rows_repr(rows.stamp)(rows.session.id, rows.flat[1]))
            encode = transcript_revision_rows_repr(rows.stamp)
            return json_response({"transcripts": [encode(t, segs) for t, segs in rows.revisions]})
        # The exports read segments by name.
        named = selectors.FLAT_SEGMENT_ROWS.make if self.flat else selectors.REVISION_SEGMENT_ROWS.make
        revisions = [(t, list(map(named, segs))) for t, segs in ([rows.flat] if self.flat else rows.revisions)]
        if fmt == "txt":
            body = "\n".join(exports.txt(segments) for _, segments in revisions if segments)
        else:
            writer = exports.vtt if fmt == "vtt" else exports.srt
            body = writer([cue for _, segments in revisions for cue in exports.cues(segments, max_chars)])
        response = HttpResponse(body.encode(), content_type=f"{TRANSCRIPT_FORMATS[fmt]}; charset=utf-8")
        suffix = "" if self.flat or len(revisions) != 1 else f"-{revisions[0][0].revision_kind}"
        response["Content-Disposition"] = content_disposition_header(
            as_attachment=True, filename=f"{export_name(rows.session)}{suffix}.{fmt}"
        )
        return response


def export_name(session: Any) -> str:
    """The file name an export is saved under: the session's label made safe (letters, digits,
    `-`, `_`, `.`, spaces as `-`; any script), else its id."""
    cleaned = re.sub(r"[^\w.-]+", "-", session.label or "", flags=re.UNICODE).strip("-.")[:100]
    return cleaned or session.id


class TranscriptRevisionsApi(TranscriptApi):
    flat = False

    class QueryIn(TranscriptQuery):
        revisionKind = RevisionKindField()

    @extend_schema(
        operation_id="listTranscriptRevisions",
        summary="A session's transcript revisions (committed and final unless filtered)",
        description=EXPORTS + "\n\nAn export of both revisions holds the committed cues, then the final ones.\n\n"
        + CONDITIONAL,
        parameters=[QueryIn, IF_NONE_MATCH],
        responses={
            (200, "application/json"): shapes.TRANSCRIPT_REVISIONS.ref(),
            **{(200, media): OpenApiTypes.STR for media in EXPORT_MEDIA_TYPES},
            304: NOT_MODIFIED,
            **error_responses(400),
        },
    )
    def get(self, request: Request, id: str) -> HttpResponse:
        query = validate_query(self.QueryIn, request)
        return self.answer(request, id, query.get("revisionKind"), query)


class FlatTranscriptApi(TranscriptApi):
    flat = True

    @extend_schema(
        operation_id="getTranscript",
        summary="All segments of a session's transcript (final revision when there is one, else committed)",
        description=EXPORTS + "\n\n" + CONDITIONAL,
        parameters=[TranscriptQuery, IF_NONE_MATCH],
        responses={
            (200, "application/json"): shapes.FLAT_TRANSCRIPT.ref(),
            **{(200, media): OpenApiTypes.STR for media in EXPORT_MEDIA_TYPES},
            304: NOT_MODIFIED,
            **error_responses(400),
        },
    )
    def get(self, request: Request, id: str) -> HttpResponse:
        return self.answer(request, id, None, validate_query(TranscriptQuery, request))


class TranscriptSearchApi(APIView):
    permission_classes = [TRANSCRIPTS_READ]

    class QueryIn(serializers.Serializer):
        query = SearchQueryField()
        limit = LimitField()
        revisionKind = RevisionKindField()
        cursor = CursorField(help_text="Extension: opaque cursor from the previous page's `nextCursor`.")
        mode = serializers.ChoiceField(
            choices=list(search_modes.MODES), required=False,
            help_text=(
                "Extension: `keyword` (default: every word in one segment), `semantic` (the segments nearest the "
                "query's meaning) or `hybrid` (both lists fused by rank). `semantic` and `hybrid` add `score` to each "
                "hit and need search by meaning turned on (CONNECT_SEMANTIC_SEARCH=1); else they answer 400."
            ),
        )  # fmt: skip

    @extend_schema(
        operation_id="searchTranscripts",
        summary="Full-text search over transcript segments: one hit per transcript revision, best match first",
        description=(
            "Every word must occur in one segment; case and accents are ignored. Hits are ranked best match "
            "first within each window of the newest remaining matching revisions (up to 100), so a page can "
            "hold fewer than `limit` hits, even none, while `nextCursor` is not null. Page until `nextCursor` "
            "is null to see every match."
        ),
        parameters=[QueryIn],
        responses={200: shapes.SEARCH_PAGE.ref(), **error_responses(400)},
    )
    def get(self, request: Request) -> HttpResponse:
        query = validate_query(self.QueryIn, request)
        if query.get("mode", "keyword") != "keyword":
            hits, next_cursor = search_modes.search_with_mode(
                workspace=request.auth.workspace, query=query["query"], mode=query["mode"],
                limit=query.get("limit", DEFAULT_PAGE_SIZE), revision_kind=query.get("revisionKind"),
                cursor=query.get("cursor"),
            )  # fmt: skip
            return json_response({"items": [{**search_hit_repr(h), "score": h.score} for h in hits],
                                  "nextCursor": next_cursor})  # fmt: skip
        hits, next_cursor = search.search_transcripts(
            workspace=request.auth.workspace,
            query=query["query"],
            limit=query.get("limit", DEFAULT_PAGE_SIZE),
            revision_kind=query.get("revisionKind"),
            cursor=query.get("cursor"),
        )
        return json_response({"items": [search_hit_repr(h) for h in hits], "nextCursor": next_cursor})


class BoardListApi(ConditionalApi):
    permission_classes = [BOARDS_READ]

    @extend_schema(
        operation_id="listBoards",
        summary="Every board version of a session, newest version first per board",
        description=CONDITIONAL,
        parameters=[IF_NONE_MATCH],
        responses={200: shapes.BOARD_LIST.ref(), 304: NOT_MODIFIED, **error_responses(400)},
    )
    def get(self, request: Request, sessionId: str) -> HttpResponse:
        validate_query(NoQuery, request)
        boards = selectors.session_boards(workspace=request.auth.workspace, session_id=sessionId)
        # The summaries' fields (the payload stays in the database): all the list shows.
        tag = strong_etag("boards", sessionId, [[getattr(b, f) for f in BOARD_SUMMARY_FIELDS] for b in boards])
        return self.conditional(request, tag, lambda: json_response({"items": [board_summary_repr(b) for b in boards]}))


class BoardDetailApi(ConditionalApi):
    permission_classes = [BOARDS_READ]

    @extend_schema(
        operation_id="getBoard",
        summary="The current content of one board of a session",
        description=CONDITIONAL,
        parameters=[
            OpenApiParameter("boardSpecId", str, OpenApiParameter.PATH, description="the board spec's id"),
            IF_NONE_MATCH,
        ],
        responses={200: shapes.BOARD_ENVELOPE.ref(), 304: NOT_MODIFIED, **error_responses(400)},
    )
    def get(self, request: Request, sessionId: str, boardSpecId: str) -> HttpResponse:
        validate_query(NoQuery, request)
        board = selectors.current_board(workspace=request.auth.workspace, session_id=sessionId, board_id=boardSpecId)
        # A version's payload never changes (payloadHash names it); the rest is in the row.
        tag = strong_etag("board", *(getattr(board, f) for f in BOARD_SUMMARY_FIELDS), board.payload_hash)
        return self.conditional(request, tag, lambda: json_response({"board": board_repr(board)}))
