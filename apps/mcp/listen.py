"""`subscriptions/listen` (2026-07-28, basic/patterns/subscriptions.mdx) on the event log.

A listen request names the resources whose changes it wants (`resourceSubscriptions`) and
whether it wants `notifications/resources/list_changed` (`resourcesListChanged`). Each resource
URI is watched through the log's events that change what it reads (`CHANGED_BY`): public ones
(a status change, a committed segment) and internal ones (a final revision written, a board
version, a session's fields edited: apps/events/filters.INTERNAL_TYPES, which no public reader
shows). A `ListenSubscription` renders the log's rows as notifications, one per event and URI
in log order, each with the listen request's id (`io.modelcontextprotocol/subscriptionId`) and
the event's id (SSE `id:` and `_meta["svc/eventId"]`): a client that reconnects names where it
left off (`Last-Event-ID` or `_meta["svc/lastEventId"]`) and misses nothing, twice nothing.

Every URI of ours is honored. Scopes are the reads' (a URI needs the scope its read needs); a
session of another workspace is not found, as `resources/read` says."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson

from apps.access.principal import Principal
from apps.events import filters, positions
from apps.events.filters import FilterEntry
from apps.mcp.protocol import (
    INSUFFICIENT_SCOPE,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MODERN_VERSION,
    ProtocolError,
    resource_not_found,
)
from apps.mcp.resources import SESSIONS_READ, Target, parse
from apps.recordings.models import RevisionKind, Session
from apps.stream.streams import RenderedSubscription, Row

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
EVENT_ID = "svc/eventId"  # on each notification: the log event that caused it
LAST_EVENT_ID = "svc/lastEventId"  # in the request's _meta: resume after this event
MAX_URIS = filters.MAX_ENTRIES
# The log events that change what each kind of resource reads. The flat transcript is the final
# revision once there is one, else the live one. A board version's event also changes the
# version that stopped being current (its `isCurrent`), and a version that did not exist yet.
SESSION_CHANGES = (filters.SESSION_STATUS_CHANGED, filters.SESSION_UPDATED)
CHANGED_BY: dict[tuple[str, str | None], tuple[str, ...]] = {
    ("transcript", None): (filters.TRANSCRIPT_SEGMENT_CREATED, filters.TRANSCRIPT_REVISION_REPLACED),
    ("transcript", RevisionKind.COMMITTED): (filters.TRANSCRIPT_SEGMENT_CREATED,),
    ("transcript", RevisionKind.FINAL): (filters.TRANSCRIPT_REVISION_REPLACED,),
}
# The filter fields this server honors; any other (toolsListChanged, promptsListChanged: the
# tools and prompts change only with a deploy) is left out of the acknowledgment.
HONORED = ("resourcesListChanged", "resourceSubscriptions")


def sse(event_id: str | None, message: dict[str, Any]) -> bytes:
    head = b"id: %s\n" % event_id.encode() if event_id else b""
    return head + b"data: " + orjson.dumps(message) + b"\n\n"


@dataclass(frozen=True)
class ListenSubscription(RenderedSubscription):
    """The log entries a listen stream routes on, and how its rows become notifications:
    `watched` holds (uri, session id, event types, board id, board version) for each URI, the
    last two None but for a board's URIs."""

    request_id: Any = None
    watched: tuple[tuple[str, str, tuple[str, ...], str | None, int | None], ...] = ()
    list_changed: bool = False

    def _meta(self, event_id: str | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {SUBSCRIPTION_ID: self.request_id}
        if event_id is not None:
            meta[EVENT_ID] = event_id
        return meta

    def render(self, rows: list[Row]) -> list[tuple[tuple[int, str], bytes]]:
        items = []
        for key, type_, session_id, frame in rows:
            event_id = key[1]
            frames = []
            if self.list_changed and type_ == filters.SESSION_CREATED:
                frames.append(sse(event_id, {"jsonrpc": "2.0", "method": "notifications/resources/list_changed",
                                             "params": {"_meta": self._meta(event_id)}}))
            board = None
            for uri, watched_session, types, board_id, version in self.watched:
                if watched_session != session_id or type_ not in types:
                    continue
                if board_id is not None:
                    board = board or board_change(frame)
                    if board[0] != board_id or (version is not None and version not in board[1:]):
                        continue
                frames.append(sse(event_id, {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                             "params": {"_meta": self._meta(event_id), "uri": uri}}))
            if frames:
                items.append((key, b"".join(frames)))
        return items

    def acknowledgment(self) -> dict[str, Any]:
        honored: dict[str, Any] = {}
        if self.list_changed:
            honored["resourcesListChanged"] = True
        if self.watched:
            honored["resourceSubscriptions"] = [watch[0] for watch in self.watched]
        return {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": self._meta(), "notifications": honored}}

    def closing(self, reason: str) -> bytes:
        """Graceful closure (subscriptions.mdx): the listen request's result, then the end."""
        return sse(None, {"jsonrpc": "2.0", "id": self.request_id,
                          "result": {"resultType": "complete", "_meta": {**self._meta(), "svc/reason": reason}}})


def board_change(frame: bytes) -> tuple[Any, Any, Any]:
    """(board id, version made, version that stopped being current) of a `board.version.created`
    row, read from its frame's `data:` line (one line: orjson)."""
    data = orjson.loads(frame[frame.index(b"\ndata: ") + 7:].rstrip(b"\n"))["data"]
    return data.get("boardId"), data.get("version"), data.get("previousVersion")


def changed_by(target: Target) -> tuple[str, ...]:
    """The log event types that change what `target` reads."""
    if target.kind == "session":
        return SESSION_CHANGES
    if target.kind == "board":
        return (filters.BOARD_VERSION_CREATED,)
    return CHANGED_BY[("transcript", target.revision_kind)]


def _watch(uri: str, principal: Principal) -> tuple[str, str, tuple[str, ...], str | None, int | None]:
    """`uri`'s entry of `ListenSubscription.watched`, or the ProtocolError that refuses it (not
    ours, a scope lacking)."""
    watch, scope = _parsed(uri)
    if not principal.has_scope(scope):
        raise ProtocolError(INVALID_REQUEST, f"Insufficient scope: subscribing to this resource needs {scope}",
                            {"error": INSUFFICIENT_SCOPE, "scope": scope, "uri": uri}, status=403)
    return watch


@lru_cache(maxsize=1024)
def _parsed(uri: str) -> tuple[tuple[str, str, tuple[str, ...], str | None, int | None], str]:
    """A URI's `watched` entry and the scope reading it needs: made once per URI and shared by
    every stream that watches it (a stream holds as little of its own as it can)."""
    target = parse(uri, MODERN_VERSION)
    return (uri, target.session_id, changed_by(target), target.board_id, target.version), target.scope


@lru_cache(maxsize=1024)
def _entries(watched: tuple[tuple[str, str, tuple[str, ...], str | None, int | None], ...],
             list_changed: bool) -> tuple[FilterEntry, ...]:
    """The log entries `watched` routes on, made once per set of URIs (shared likewise)."""
    entries = {FilterEntry(type_, session_id) for _, session_id, types, *_ in watched for type_ in types}
    if list_changed:
        entries.add(FilterEntry(filters.SESSION_CREATED))
    return tuple(sorted(entries, key=lambda e: (e.type, e.session_id or "")))


def watched_for(params: dict[str, Any], principal: Principal) -> tuple[tuple, bool]:
    """The listen request's `notifications` filter checked: (its `watched` entries, whether it
    asks for list changes), or the ProtocolError that refuses it. Reads no database."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise ProtocolError(INVALID_PARAMS, "subscriptions/listen needs params.notifications (a SubscriptionFilter)")
    uris = wanted.get("resourceSubscriptions", [])
    if not isinstance(uris, list) or not all(isinstance(u, str) and u for u in uris):
        raise ProtocolError(INVALID_PARAMS, "notifications.resourceSubscriptions must be an array of resource URIs")
    if len(uris) > MAX_URIS:
        raise ProtocolError(INVALID_PARAMS, f"notifications.resourceSubscriptions: at most {MAX_URIS} URIs")
    list_changed = wanted.get("resourcesListChanged")
    if list_changed is not None and not isinstance(list_changed, bool):
        raise ProtocolError(INVALID_PARAMS, "notifications.resourcesListChanged must be a boolean")
    if list_changed and not principal.has_scope(SESSIONS_READ):
        raise ProtocolError(INVALID_REQUEST, f"Insufficient scope: resourcesListChanged needs {SESSIONS_READ}",
                            {"error": INSUFFICIENT_SCOPE, "scope": SESSIONS_READ}, status=403)
    return tuple(_watch(uri, principal) for uri in dict.fromkeys(uris)), bool(list_changed)


def sessions_of(watched: tuple) -> frozenset[str]:
    return frozenset(watch[1] for watch in watched)


def known_sessions(*, workspace_id: int, sessions: frozenset[str]) -> frozenset[str]:
    """Which of `sessions` are the workspace's. Reads the database: call on a hub thread."""
    if not sessions:
        return frozenset()
    return frozenset(Session.objects.filter(workspace_id=workspace_id, id__in=sessions).values_list("id", flat=True))


def subscription_for(watched: tuple, list_changed: bool, known: frozenset[str], request_id: Any) -> ListenSubscription:
    """The listen request's subscription, once `known_sessions` has said which of its sessions
    are the workspace's; a URI of another workspace's session reads as not found."""
    for uri, session_id, *_ in watched:
        if session_id not in known:
            raise resource_not_found(MODERN_VERSION, uri)
    return ListenSubscription(entries=_entries(watched, list_changed), request_id=request_id, watched=watched,
                              list_changed=list_changed)


def resume_point(params: dict[str, Any], header: str | None) -> positions.Position | str | None:
    """Where the client left off: `Last-Event-ID`, else `_meta["svc/lastEventId"]` (an `evt_`
    id from a notification, or a `pos_` cursor of the log)."""
    meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
    value = header if header is not None else meta.get(LAST_EVENT_ID)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ProtocolError(INVALID_PARAMS, f"_meta.{LAST_EVENT_ID} must be an event id from a notification")
    try:
        return positions.parse_after(value.strip())
    except positions.BadAfter:
        return value  # as the event stream: not one of ours, so not resumable (`: resume-unavailable`)
