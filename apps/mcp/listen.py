"""`subscriptions/listen` (2026-07-28, basic/patterns/subscriptions.mdx) on the event log.

A listen request names the resources whose changes it wants (`resourceSubscriptions`) and
whether it wants `notifications/resources/list_changed` (`resourcesListChanged`). Each resource
URI becomes filter entries of the event log (a session: its `session.status_changed`; a
transcript growing while recording: its `transcript.segment.created`), and a
`ListenSubscription` renders the log's rows as notifications, one per event and URI in log
order, each with the listen request's id (`io.modelcontextprotocol/subscriptionId`) and the
event's id (SSE `id:` and `_meta["svc/eventId"]`): a client that reconnects names where it left
off (`Last-Event-ID` or `_meta["svc/lastEventId"]`) and misses nothing, twice nothing.

What the log records no event for (a final revision, boards) is not honored and is left out of
the acknowledgment, the spec's way to say so. Scopes are the reads' (a URI needs the scope its
read needs); a session of another workspace is not found, as `resources/read` says."""

from __future__ import annotations

from dataclasses import dataclass
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
from apps.mcp.resources import SESSIONS_READ, parse
from apps.recordings.models import RevisionKind, Session
from apps.stream.streams import RenderedSubscription, Row

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
EVENT_ID = "svc/eventId"  # on each notification: the log event that caused it
LAST_EVENT_ID = "svc/lastEventId"  # in the request's _meta: resume after this event
MAX_URIS = filters.MAX_ENTRIES
# The filter fields this server honors; any other (toolsListChanged, promptsListChanged: the
# tools and prompts change only with a deploy) is left out of the acknowledgment.
HONORED = ("resourcesListChanged", "resourceSubscriptions")


def sse(event_id: str | None, message: dict[str, Any]) -> bytes:
    head = b"id: %s\n" % event_id.encode() if event_id else b""
    return head + b"data: " + orjson.dumps(message) + b"\n\n"


@dataclass(frozen=True)
class ListenSubscription(RenderedSubscription):
    """The log entries a listen stream routes on, and how its rows become notifications:
    `watched` holds (uri, session id, event type) for each honored URI."""

    request_id: Any = None
    watched: tuple[tuple[str, str, str], ...] = ()
    list_changed: bool = False

    def _meta(self, event_id: str | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {SUBSCRIPTION_ID: self.request_id}
        if event_id is not None:
            meta[EVENT_ID] = event_id
        return meta

    def render(self, rows: list[Row]) -> list[tuple[tuple[int, str], bytes]]:
        items = []
        for key, type_, session_id, _frame in rows:
            event_id = key[1]
            frames = []
            if self.list_changed and type_ == filters.SESSION_CREATED:
                frames.append(sse(event_id, {"jsonrpc": "2.0", "method": "notifications/resources/list_changed",
                                             "params": {"_meta": self._meta(event_id)}}))
            for uri, watched_session, watched_type in self.watched:
                if watched_type == type_ and watched_session == session_id:
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
            honored["resourceSubscriptions"] = list(dict.fromkeys(uri for uri, _, _ in self.watched))
        return {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": self._meta(), "notifications": honored}}

    def closing(self, reason: str) -> bytes:
        """Graceful closure (subscriptions.mdx): the listen request's result, then the end."""
        return sse(None, {"jsonrpc": "2.0", "id": self.request_id,
                          "result": {"resultType": "complete", "_meta": {**self._meta(), "svc/reason": reason}}})


def _watch(uri: str, principal: Principal) -> tuple[str, str] | None:
    """(session id, event type) a change of `uri` is recorded as, None when the log records
    none; the ProtocolError that refuses it (not ours, a scope lacking)."""
    target = parse(uri, MODERN_VERSION)
    if not principal.has_scope(target.scope):
        raise ProtocolError(INVALID_REQUEST, f"Insufficient scope: subscribing to this resource needs {target.scope}",
                            {"error": INSUFFICIENT_SCOPE, "scope": target.scope, "uri": uri}, status=403)
    if target.kind == "session":
        return target.session_id, filters.SESSION_STATUS_CHANGED
    if target.kind == "transcript" and target.revision_kind in (None, RevisionKind.COMMITTED):
        return target.session_id, filters.TRANSCRIPT_SEGMENT_CREATED
    return None  # a final revision or a board: no event in the log says when it changes


def subscription_for(params: dict[str, Any], principal: Principal, request_id: Any) -> ListenSubscription:
    """The listen request's `notifications` filter as a subscription, or a ProtocolError. Reads
    the database (which sessions are the workspace's): call on a hub thread."""
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
    watched = [(uri, *found) for uri in dict.fromkeys(uris) if (found := _watch(uri, principal)) is not None]
    sessions = {session_id for _, session_id, _ in watched}
    known = set(Session.objects.filter(workspace_id=principal.workspace.id, id__in=sessions)
                .values_list("id", flat=True)) if sessions else set()
    for uri, session_id, _ in watched:
        if session_id not in known:
            raise resource_not_found(MODERN_VERSION, uri)  # another workspace's session reads as none
    entries = {FilterEntry(type_, session_id) for _, session_id, type_ in watched}
    if list_changed:
        entries.add(FilterEntry(filters.SESSION_CREATED))
    return ListenSubscription(entries=tuple(sorted(entries, key=lambda e: (e.type, e.session_id or ""))),
                              request_id=request_id, watched=tuple(watched), list_changed=bool(list_changed))


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
