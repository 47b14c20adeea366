"""REST views for sessions, transcripts, search and boards (contract §4.1–4.3). Views only
validate input, call a selector and format with the shared representations."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.access.rest import HasScope
from apps.core.openapi import error_responses
from apps.core.params import DEFAULT_PAGE_SIZE, CursorField, LimitField, RevisionKindField, validate_query
from apps.recordings import search, selectors
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

# --- Documented shapes (the representations above produce them; tests/test_openapi.py checks
# live responses against these schemas, so the two cannot drift apart). --------------------

Timestamp = serializers.CharField  # ISO 8601, UTC, milliseconds, `Z`


class SessionOut(serializers.Serializer):
    id = serializers.CharField()
    label = serializers.CharField(allow_null=True)
    memo = serializers.CharField(allow_null=True)
    status = serializers.ChoiceField(choices=["recording", "processing", "completed", "failed"])
    startedAt = Timestamp(allow_null=True)
    endedAt = Timestamp(allow_null=True)
    createdAt = Timestamp()
    updatedAt = Timestamp()


class SessionSummaryOut(serializers.Serializer):
    id = serializers.CharField()
    label = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    startedAt = Timestamp(allow_null=True)
    endedAt = Timestamp(allow_null=True)
    createdAt = Timestamp()


class FlatSegmentOut(serializers.Serializer):
    id = serializers.CharField()
    sequence = serializers.IntegerField()
    timestampStart = serializers.IntegerField(help_text="milliseconds from the session start")
    timestampEnd = serializers.IntegerField(help_text="milliseconds from the session start")
    speakerLabel = serializers.CharField(allow_null=True)
    text = serializers.CharField()
    confidence = serializers.FloatField(allow_null=True, help_text="0.0 to 1.0")
    createdAt = Timestamp()


class RevisionSegmentOut(FlatSegmentOut):
    sessionCommittedIndex = serializers.IntegerField()


class TranscriptRevisionOut(serializers.Serializer):
    id = serializers.CharField()
    revisionKind = serializers.ChoiceField(choices=["committed", "final"])
    createdAt = Timestamp()
    segments = RevisionSegmentOut(many=True)


class SearchHitOut(SessionSummaryOut):
    transcriptId = serializers.CharField()
    revisionKind = serializers.ChoiceField(choices=["committed", "final"])
    session = SessionSummaryOut()
    snippet = serializers.CharField(help_text="plain text, at most 200 characters, around the first match")


class BoardSummaryOut(serializers.Serializer):
    id = serializers.CharField()
    boardId = serializers.CharField(help_text="the board spec's id")
    version = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["generating", "ready", "failed"])
    isCurrent = serializers.BooleanField()
    sourceRevisionKind = serializers.ChoiceField(choices=["committed", "final"])
    createdAt = Timestamp()


class BoardOut(BoardSummaryOut):
    payload = serializers.JSONField(help_text="free-form JSON; its shape depends on the board definition")
    payloadHash = serializers.CharField(help_text="`sha256:` + hex of the canonical JSON")


def page_of(item: type[serializers.Serializer], name: str) -> serializers.Serializer:
    return inline_serializer(
        name, {"items": item(many=True), "nextCursor": serializers.CharField(allow_null=True)}
    )


# --- Views ----------------------------------------------------------------------------------


class SessionListApi(APIView):
    permission_classes = [SESSIONS_READ]

    class QueryIn(serializers.Serializer):
        cursor = CursorField()
        limit = LimitField()

    @extend_schema(
        operation_id="listSessions",
        summary="List sessions, newest first",
        parameters=[QueryIn],
        responses={200: page_of(SessionOut, "SessionPage"), **error_responses(400)},
    )
    def get(self, request: Request) -> Response:
        query = validate_query(self.QueryIn, request)
        sessions, next_cursor = selectors.sessions_page(
            workspace=request.auth.workspace,
            limit=query.get("limit", DEFAULT_PAGE_SIZE),
            cursor=query.get("cursor"),
        )
        return Response({"items": [session_repr(s) for s in sessions], "nextCursor": next_cursor})


class SessionDetailApi(APIView):
    permission_classes = [SESSIONS_READ]

    @extend_schema(
        operation_id="getSession",
        summary="Read a session's metadata (no transcript segments)",
        responses={200: inline_serializer("SessionEnvelope", {"session": SessionOut()}), **error_responses()},
    )
    def get(self, request: Request, id: str) -> Response:
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
            200: inline_serializer("TranscriptRevisions", {"transcripts": TranscriptRevisionOut(many=True)}),
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
            200: inline_serializer(
                "FlatTranscript", {"sessionId": serializers.CharField(), "transcript": FlatSegmentOut(many=True)}
            ),
            **error_responses(),
        },
    )
    def get(self, request: Request, id: str) -> Response:
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
        responses={200: page_of(SearchHitOut, "SearchPage"), **error_responses(400)},
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
        items = [search_hit_repr(h.transcript, h.session, h.snippet) for h in hits]
        return Response({"items": items, "nextCursor": next_cursor})


class BoardListApi(APIView):
    permission_classes = [BOARDS_READ]

    @extend_schema(
        operation_id="listBoards",
        summary="Every board version of a session, newest version first per board",
        responses={200: inline_serializer("BoardList", {"items": BoardSummaryOut(many=True)}), **error_responses()},
    )
    def get(self, request: Request, sessionId: str) -> Response:
        boards = selectors.session_boards(workspace=request.auth.workspace, session_id=sessionId)
        return Response({"items": [board_summary_repr(b) for b in boards]})


class BoardDetailApi(APIView):
    permission_classes = [BOARDS_READ]

    @extend_schema(
        operation_id="getBoard",
        summary="The current content of one board of a session",
        parameters=[OpenApiParameter("boardSpecId", str, OpenApiParameter.PATH, description="the board spec's id")],
        responses={200: inline_serializer("BoardEnvelope", {"board": BoardOut()}), **error_responses()},
    )
    def get(self, request: Request, sessionId: str, boardSpecId: str) -> Response:
        board = selectors.current_board(workspace=request.auth.workspace, session_id=sessionId, board_id=boardSpecId)
        return Response({"board": board_repr(board)})
