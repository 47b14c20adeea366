"""REST views for sessions, transcripts, search and boards (contract §4.1–4.3). Views only
validate input, call a selector and format with the shared representations."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.access.rest import HasScope
from apps.core.openapi import error_responses
from apps.core.params import (
    DEFAULT_PAGE_SIZE,
    ChoicesField,
    CursorField,
    LimitField,
    NoQuery,
    RevisionKindField,
    TimestampField,
    validate_query,
)
from apps.recordings import search, selectors, shapes
from apps.recordings.models import SessionStatus
from apps.recordings.representations import (
    board_repr,
    board_summary_repr,
    flat_segment_repr,
    search_hit_repr,
    session_repr,
    transcript_revision_repr,
)

SESSIONS_READ = HasScope.of("svc:sessions:read")
TRANSCRIPTS_READ = HasScope.of("svc:transcripts:read")
BOARDS_READ = HasScope.of("svc:boards:read")

# Response bodies are documented as the components of apps/recordings/shapes.py, the
# declarations the representations are generated from (tests/test_openapi.py checks live
# responses against them).

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
    def get(self, request: Request) -> Response:
        query = validate_query(self.QueryIn, request)
        sessions, next_cursor = selectors.sessions_page(
            workspace=request.auth.workspace,
            limit=query.get("limit", DEFAULT_PAGE_SIZE),
            cursor=query.get("cursor"),
            statuses=query.get("status"),
            created_after=query.get("createdAfter"),
            created_before=query.get("createdBefore"),
        )
        return Response({"items": [session_repr(s) for s in sessions], "nextCursor": next_cursor})


class SessionDetailApi(APIView):
    permission_classes = [SESSIONS_READ]

    @extend_schema(
        operation_id="getSession",
        summary="Read a session's metadata (no transcript segments)",
        responses={200: shapes.SESSION_ENVELOPE.ref(), **error_responses(400)},
    )
    def get(self, request: Request, id: str) -> Response:
        validate_query(NoQuery, request)
        session = selectors.get_session(workspace=request.auth.workspace, session_id=id)
        return Response({"session": session_repr(session)})


class TranscriptRevisionsApi(APIView):
    permission_classes = [TRANSCRIPTS_READ]

    class QueryIn(serializers.Serializer):
        revisionKind = RevisionKindField()

    @extend_schema(
        operation_id="listTranscriptRevisions",
        summary="A session's transcript revisions (committed and final unless filtered)",
        parameters=[QueryIn],
        responses={
            200: shapes.TRANSCRIPT_REVISIONS.ref(),
            **error_responses(400),
        },
    )
    def get(self, request: Request, id: str) -> Response:
        query = validate_query(self.QueryIn, request)
        revisions = selectors.transcript_revisions(
            workspace=request.auth.workspace, session_id=id, revision_kind=query.get("revisionKind")
        )
        return Response({"transcripts": [transcript_revision_repr(t, segs) for t, segs in revisions]})


class FlatTranscriptApi(APIView):
    permission_classes = [TRANSCRIPTS_READ]

    @extend_schema(
        operation_id="getTranscript",
        summary="All segments of a session's transcript (final revision when there is one, else committed)",
        responses={
            200: shapes.FLAT_TRANSCRIPT.ref(),
            **error_responses(400),
        },
    )
    def get(self, request: Request, id: str) -> Response:
        validate_query(NoQuery, request)
        segments = selectors.flat_transcript(workspace=request.auth.workspace, session_id=id)
        return Response({"sessionId": id, "transcript": [flat_segment_repr(s) for s in segments]})


class TranscriptSearchApi(APIView):
    permission_classes = [TRANSCRIPTS_READ]

    class QueryIn(serializers.Serializer):
        query = serializers.CharField(min_length=1, allow_blank=False, trim_whitespace=False, max_length=500)
        limit = LimitField()
        revisionKind = RevisionKindField()
        cursor = CursorField(help_text="Extension: opaque cursor from the previous page's `nextCursor`.")

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
    def get(self, request: Request) -> Response:
        query = validate_query(self.QueryIn, request)
        hits, next_cursor = search.search_transcripts(
            workspace=request.auth.workspace,
            query=query["query"],
            limit=query.get("limit", DEFAULT_PAGE_SIZE),
            revision_kind=query.get("revisionKind"),
            cursor=query.get("cursor"),
        )
        items = [search_hit_repr(h) for h in hits]
        return Response({"items": items, "nextCursor": next_cursor})


class BoardListApi(APIView):
    permission_classes = [BOARDS_READ]

    @extend_schema(
        operation_id="listBoards",
        summary="Every board version of a session, newest version first per board",
        responses={200: shapes.BOARD_LIST.ref(), **error_responses(400)},
    )
    def get(self, request: Request, sessionId: str) -> Response:
        validate_query(NoQuery, request)
        boards = selectors.session_boards(workspace=request.auth.workspace, session_id=sessionId)
        return Response({"items": [board_summary_repr(b) for b in boards]})


class BoardDetailApi(APIView):
    permission_classes = [BOARDS_READ]

    @extend_schema(
        operation_id="getBoard",
        summary="The current content of one board of a session",
        parameters=[OpenApiParameter("boardSpecId", str, OpenApiParameter.PATH, description="the board spec's id")],
        responses={200: shapes.BOARD_ENVELOPE.ref(), **error_responses(400)},
    )
    def get(self, request: Request, sessionId: str, boardSpecId: str) -> Response:
        validate_query(NoQuery, request)
        board = selectors.current_board(workspace=request.auth.workspace, session_id=sessionId, board_id=boardSpecId)
        return Response({"board": board_repr(board)})
