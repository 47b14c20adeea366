"""`GET /api/v1/events` and `GET /api/v1/events/{id}` (an extension, docs/api/events-and-stream.md):
the workspace's event log, as far as the credential's scopes allow, for pollers and for clients
reconciling after the stream. Views validate, resolve `after` to a place in the log and call
the one log reader (apps/events/selectors.read_log) that the stream's resume and follower use."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.access.principal import Principal
from apps.core.errors import InsufficientScope, NotFound, ResyncRequired, invalid
from apps.core.openapi import error_responses
from apps.core.params import DEFAULT_PAGE_SIZE, LimitField, NoQuery, validate_query
from apps.events import filters, positions, retention, selectors, shapes
from apps.events.representations import StoredJsonRenderer, event_item, event_row_item

TYPES = tuple(filters.TYPE_SCOPES)
MAX_SESSION_ID_LENGTH = 200
UNSETTLED_HEADER = "Events-Unsettled"
RETENTION_NOTE = (
    "Retention: session events `CONNECT_EVENT_RETENTION_DAYS` (default 30 days), "
    "`transcript.segment.created` `CONNECT_SEGMENT_EVENT_RETENTION_HOURS` (default 24 hours), from when each was "
    "recorded."
)


def allowed_types(principal: Principal) -> frozenset[str]:
    return frozenset(t for t, scope in filters.TYPE_SCOPES.items() if principal.has_scope(scope))


def requested_types(request: Request, allowed: frozenset[str]) -> frozenset[str]:
    """`type`, repeated or comma-separated; without it every type the scopes allow. A type the
    scopes do not allow is `403 insufficient_scope`, as on the stream."""
    raw = [part for value in request.query_params.getlist("type") for part in value.split(",")]
    if not raw:
        if not allowed:
            # Without `type` a reader needs one type at least: the session events, as on the stream.
            raise InsufficientScope(type_scopes(filters.DEFAULT_TYPES))
        return allowed
    if any(t not in TYPES for t in raw):
        raise invalid("type", "each must be one of " + ", ".join(TYPES))
    types = frozenset(raw)
    if not types <= allowed:
        raise InsufficientScope(type_scopes(types))
    return types


def type_scopes(types) -> list[str]:
    """The scopes that receiving `types` needs, in the order of `filters.TYPE_SCOPES`."""
    return [scope for t, scope in filters.TYPE_SCOPES.items() if t in types]


def place_after(*, workspace_id: int, after: str | None, types: frozenset[str]) -> positions.Position | None:
    """Where a reader that passed `after` stands, or `410 resync_required` when events after it
    may be past retention for these types."""
    if after is None:
        return None
    try:
        parsed = positions.parse_after(after)
    except positions.BadAfter as bad:
        raise invalid("after", bad.why) from None
    if isinstance(parsed, positions.Position):
        place = parsed
    else:
        place = selectors.position_of(workspace_id=workspace_id, event_id=parsed)
        if place is None and positions.event_id_ms(parsed) >= retention.oldest_complete_ms(types):
            # Young enough to be in the log, and not there: not an event of this workspace.
            raise invalid("after", "no such event in this workspace's log")
    if place is None or place.ms < retention.oldest_complete_ms(types):
        raise ResyncRequired()
    return place


class EventListApi(APIView):
    # A page carries up to 100 stored `data` documents: written into the body as stored.
    renderer_classes = [StoredJsonRenderer]

    class QueryIn(serializers.Serializer):
        sessionId = serializers.CharField(required=False, min_length=1, max_length=MAX_SESSION_ID_LENGTH,
                                          help_text="Only this session's events")
        after = serializers.CharField(
            required=False, min_length=1, max_length=positions.MAX_AFTER_LENGTH, trim_whitespace=False,
            help_text="An `evt_` id (e.g. the stream's last `id:`) or a previous page's `nextCursor`: the events "
            "after it in log order. Without it the log starts at its oldest retained event.",
        )
        limit = LimitField()

    @extend_schema(
        operation_id="listEvents",
        summary="The workspace's event log, oldest first (extension)",
        description=(
            "Each item is exactly the stream's envelope `{type, sessionId, occurredAt, data}` plus its `id`. Only "
            "types the credential's scopes allow (session.* with `svc:sessions:read`, `transcript.segment.created` "
            "with `svc:transcripts:read`). The polling loop: call with `after=<nextCursor>` for ever; an event "
            "whose transaction commits late still arrives after the ones a poller already has, never behind its "
            "cursor, and never twice. " + RETENTION_NOTE + " An `after` older than that is `410 resync_required`."
        ),
        parameters=[
            OpenApiParameter("type", OpenApiTypes.STR, many=True, enum=list(TYPES), explode=True,
                             description="One or more event types (repeat it, or separate with commas); default every "
                             "type the scopes allow. A type the scopes do not allow is `403 insufficient_scope`."),
            QueryIn,
            OpenApiParameter(
                UNSETTLED_HEADER, OpenApiTypes.STR, OpenApiParameter.HEADER, response=[200], enum=["true", "false"],
                description="`true` on a page that is not full when events past `nextCursor` are already "
                "committed but wait for an older transaction to end before the log hands them out (they come "
                "next, never skipped). A poller can ignore it; a client catching up once before it follows the "
                "live stream pages again until it is `false`.",
            ),
        ],
        responses={200: shapes.EVENT_PAGE.ref(), **error_responses(400, 410)},
    )
    def get(self, request: Request) -> Response:
        query = validate_query(self.QueryIn, request, also=("type",))
        types = requested_types(request, allowed_types(request.auth))
        workspace_id = request.auth.workspace.id
        limit, session_id = query.get("limit", DEFAULT_PAGE_SIZE), query.get("sessionId")
        events, place = selectors.read_log_rows(
            after=place_after(workspace_id=workspace_id, after=query.get("after"), types=types),
            limit=limit,
            workspace_id=workspace_id,
            types=types,
            session_id=session_id,
        )
        unsettled = len(events) < limit and selectors.unsettled_after(
            place=place, workspace_id=workspace_id, types=types, session_id=session_id
        )
        response = Response({"items": [event_row_item(e) for e in events], "nextCursor": positions.encode_position(place)})
        response[UNSETTLED_HEADER] = "true" if unsettled else "false"
        return response


class EventDetailApi(APIView):
    @extend_schema(
        operation_id="getEvent",
        summary="Read one event of the log (extension)",
        description="The same object as a `GET /api/v1/events` item. `404 not_found` for another workspace's "
        "event and once the event is past retention. Needs the scope of the event's type (`svc:sessions:read` for "
        "session.*, `svc:transcripts:read` for transcript.segment.created). " + RETENTION_NOTE,
        responses={200: shapes.EVENT.ref(), **error_responses(400)},
    )
    def get(self, request: Request, id: str) -> Response:
        validate_query(NoQuery, request)
        event = selectors.event_in_workspace(workspace_id=request.auth.workspace.id, event_id=id)
        if event is None or event.type not in TYPES:  # an internal event (filters.INTERNAL_TYPES) is none
            raise NotFound()
        if (positions.event_id_ms(event.id) or 0) < retention.cutoff_ms(event.type):
            raise NotFound()
        if event.type not in allowed_types(request.auth):
            raise InsufficientScope(type_scopes({event.type}))
        return Response(event_item(event))
