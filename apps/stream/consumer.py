"""`GET /api/v1/events/stream` (docs/api/events-and-stream.md): a Channels HTTP consumer under daphne.

`http_request` only opens the stream (admission, filters, slot, resume, headers, a first
comment) and returns. Under daphne the stream then runs with no task of its own (`LiveStream`,
apps/stream/live.py); elsewhere a delivery task (`deliver`) writes what waited and ends the
response. Every way a stream ends goes through `disconnect()` (apps/stream/live.py for a live
one): the stream closed, its slot released, its close line written.

A client that does not read fast enough is paused by Twisted's flow control (a push producer on
the request); its frames wait in the stream's bounded queue, and a full queue disconnects that
client alone. Failures while opening answer the contract's JSON: `503 unavailable` with
`Retry-After` when a dependency is down, `500 internal_server_error` otherwise. Why it is
shaped like this: docs/decisions/stream-hub.md."""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import parse_qs

import orjson
from channels.exceptions import StopConsumer
from django.conf import settings

from apps.access import door
from apps.access.admission import wrong_door
from apps.access.credentials import CredentialRef
from apps.oauth.audience import rest_audiences
from apps.access.principal import Principal
from apps.access.ratelimit import RateDecision
from apps.access.render import render
from apps.core import context
from apps.core.errors import (
    ApiError,
    ConnectionLimit,
    FilterCostExceeded,
    InsufficientScope,
    InvalidFilters,
    InvalidRequest,
    MethodNotAllowed,
    Unavailable,
    as_api_error,
)
from apps.core.params import unknown_parameters
from apps.events import filters
from apps.events.positions import Position
from apps.stream import slots
from apps.stream.hub import get_hub
from apps.stream.live import LiveStream, closing_frame
from apps.stream.resume import Replay
from apps.stream.streams import Stream
from engine import daphne_stream
from engine.consumers import LayerlessHttpConsumer

logger = logging.getLogger("connect.events")

STREAM_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


# Query string and scopes → the Subscription they make, for the opens that asked the same (a
# reconnect storm's clients mostly do): the same answer as working it out again, without the
# URL decoding and JSON parsing per open. Successes only; cleared when full.
_SUBSCRIPTIONS: dict[tuple[bytes, frozenset[str]], filters.Subscription] = {}
SUBSCRIPTIONS_KEPT = 256


def _subscription(query_string: bytes, scopes: frozenset[str]) -> filters.Subscription:
    key = (query_string, scopes)
    subscription = _SUBSCRIPTIONS.get(key)
    if subscription is None:
        subscription = _parse_subscription(query_string, scopes)
        if len(_SUBSCRIPTIONS) >= SUBSCRIPTIONS_KEPT:
            _SUBSCRIPTIONS.clear()
        _SUBSCRIPTIONS[key] = subscription
    return subscription


def _parse_subscription(query_string: bytes, scopes: frozenset[str]) -> filters.Subscription:
    query = parse_qs(query_string.decode("latin-1"), keep_blank_values=True)
    refused = unknown_parameters(["filters"], query)
    if refused is not None:
        raise refused
    raw = query.get("filters")
    if raw is not None and len(raw) != 1:
        raise InvalidFilters(detail="filters: given more than once")
    try:
        return filters.subscription_for(raw[0] if raw else None, scopes)
    except filters.InvalidFilters as invalid_filters:
        raise InvalidFilters(detail=invalid_filters.detail) from None
    except filters.FilterCostExceeded as exceeded:
        raise FilterCostExceeded(**exceeded.body_fields()) from None
    except filters.MissingScope as missing:
        raise InsufficientScope(missing.scopes) from None


def wanted_scopes(query_string: bytes) -> list[str]:
    """The scopes the subscription this query asks for needs, whatever the credential holds:
    named when the door refuses an ingest key (its `filters` not yet checked; when they do not
    parse, the default subscription's)."""
    try:
        subscription = _parse_subscription(query_string, frozenset(filters.TYPE_SCOPES.values()))
    except ApiError:
        return filters.needed_scopes(filters.DEFAULT_TYPES)
    return filters.needed_scopes(type for type, _ in subscription.routes())


class EventStreamConsumer(LayerlessHttpConsumer):
    stream: Stream | None = None
    slot_id: slots.SlotId | None = None
    delivery: asyncio.Task | None = None
    producer: daphne_stream.Producer | None = None
    replay: Replay | None = None
    rate: RateDecision | None = None
    opened_at: float | None = None

    async def http_request(self, message) -> None:
        if "body" in message:
            self.body.append(message["body"])
        if message.get("more_body"):
            return
        hub = get_hub()
        hub.opening()
        try:
            streaming = await self.open_stream()
        except ApiError as error:
            await self.send_error(error)
            streaming = False
        except Exception as exc:  # noqa: BLE001 - never leak details; the body is the contract's
            await self.send_error(self._error_for(exc))
            streaming = False
        finally:
            hub.opened()
        if not streaming or self.stream is None:
            # Refused, or live under daphne: a LiveStream holds it now, with no task, and this
            # consumer (its task, its scope) ends here.
            raise StopConsumer()

    @staticmethod
    def _error_for(exc: Exception) -> ApiError:
        """Known failures keep their code (a dependency down is 503 unavailable, see
        engine/faults.py); anything else is the contract's 500, logged."""
        known = as_api_error(exc)
        if known is not None:
            return known
        logger.error("event stream failed to open", exc_info=exc)
        return ApiError()

    async def http_disconnect(self, message) -> None:  # noqa: ARG002
        raise StopConsumer()

    def _rate_headers(self) -> list[tuple[bytes, bytes]]:
        return [(k.lower().encode(), v.encode()) for k, v in self.rate.headers()] if self.rate else []

    async def send_error(self, error: ApiError) -> None:
        status, headers, body = render(error, self.rate)
        raw = [(b"content-type", b"application/json"), *((k.lower().encode(), v.encode()) for k, v in headers)]
        await self.send_response(status, orjson.dumps(body), headers=raw)

    # --- opening ---------------------------------------------------------------------------
    def _header(self, name: bytes) -> str | None:
        for key, value in self.scope.get("headers", []):
            if key.lower() == name:
                return value.decode("latin-1")
        return None

    async def open_stream(self) -> bool:
        hub = get_hub()
        principal = await self.admitted(hub)
        subscription = await self.subscribe(hub, principal)
        resume_point = self.resume_point()

        try:
            await hub.ensure_carrier()
        except Exception as exc:  # noqa: BLE001 - no carrier (Redis down): a dependency, retried by the next open
            logger.warning("event stream not opened: no event carrier (%s)", type(exc).__name__, exc_info=exc)
            raise Unavailable() from None
        workspace_id = principal.workspace.id
        await self._acquire_slot(hub, workspace_id)
        if self.slot_id is None:
            retry_after = await hub.run_db(slots.overdue_retry_after, retry=True, workspace_id=workspace_id)
            if retry_after is not None:
                raise Unavailable(retry_after=retry_after)
            raise ConnectionLimit()

        self.stream = Stream(
            workspace_id=workspace_id,
            subscription=subscription,
            credential=CredentialRef(
                kind=principal.kind,
                credential_id=str(principal.credential_id),
                membership_id=principal.issuer.pk,
                workspace_id=workspace_id,
            ),
            queue_size=settings.CONNECT_SSE_QUEUE_EVENTS,
            slot_id=self.slot_id,
        )
        # Registered with no await since the slot was taken: the hub renews the leases of the
        # slots of the streams it holds, so from here the slot lives as long as the stream.
        # Subscribe before reading what was missed: an event settled in between is then in the
        # live queue too, and the stream drops live copies up to where the replay reached.
        hub.register(self.stream)
        resumed: bool | None = None
        if resume_point is not None:
            types = (
                frozenset(e.type for e in subscription.entries) if subscription.entries else subscription.default_types
            )
            if isinstance(resume_point, str):
                replay = await hub.resume(
                    workspace_id=workspace_id, last_event_id=resume_point, subscription=subscription, types=types
                )
            else:
                replay = await hub.resume_from(
                    workspace_id=workspace_id, after=resume_point, subscription=subscription, types=types
                )
            # The client has everything up to its id, the replay everything after it up to the
            # place it reaches (the stream's `floor`, moved as each chunk is written): a live
            # copy at or below it (a follower behind the read) is dropped.
            self.replay, resumed = replay, replay is not None
        first = await self.opening(hub, resumed)
        await self.send_headers(status=200, headers=STREAM_HEADERS + self._rate_headers())
        await self.send_body(first, more_body=True)
        self._register_producer()
        self.opened_at = door.stream_opened()
        request = self._daphne_request()
        direct = daphne_stream.direct_write(request, self.producer)
        if direct is None:
            # Not under daphne (or no flow control): a task delivers everything through `send`.
            self.delivery = asyncio.ensure_future(self.deliver())
            return True
        # Under daphne the stream runs with no task once live (LiveStream): the replay is
        # written here, then this consumer ends and the stream, its slot and its end belong to
        # the LiveStream. This consumer lets go of them first, so its own end releases nothing.
        live = LiveStream(self.stream, request, self.producer, self.slot_id, self.opened_at, direct)
        self.stream = self.producer = self.slot_id = self.opened_at = None
        replay, self.replay = self.replay, None
        try:
            await self._replay(live.stream, replay, live.direct)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            logger.exception("event stream replay failed")
            live.stream.close("write_failed")
        finally:
            live.start()
        return True

    # What a subclass answering another protocol (apps/mcp/streaming.py) decides differently.
    async def admitted(self, hub) -> Principal:
        """The caller's principal, or the ApiError that refuses it."""
        if self.scope["method"] != "GET":
            raise MethodNotAllowed()
        # Admission exactly as REST (401, 404, 403, then REST's buckets: reconnect churn is bounded).
        audiences = rest_audiences(settings.CONNECT_BASE_URL)
        admission = await hub.admit(self._header(b"authorization"), audiences=audiences)
        self.rate = admission.rate
        if isinstance(admission.error, InsufficientScope):  # an ingest key (admission.wrong_door)
            raise wrong_door(ingest=False, needs=wanted_scopes(self.scope.get("query_string", b"")))
        if admission.error is not None:
            raise admission.error
        principal: Principal = admission.principal
        context.note_principal(principal.workspace.id, principal.credential_id)  # admitted on a hub thread
        return principal

    async def subscribe(self, hub, principal: Principal) -> filters.Subscription:  # noqa: ARG002
        return _subscription(self.scope.get("query_string", b""), frozenset(principal.scopes))

    def resume_point(self) -> str | Position | None:
        """Where the client left off: an event id (`Last-Event-ID`) or a place in the log."""
        last_event_id = self._header(b"last-event-id")
        if last_event_id is not None and len(last_event_id) > 64:
            raise InvalidRequest(detail="Last-Event-ID: at most 64 characters")
        return last_event_id.strip() if last_event_id else None

    async def opening(self, hub, resumed: bool | None) -> bytes:  # noqa: ARG002
        """The stream's first bytes; `resumed` is None when no resume was asked, False when the
        place asked for could not be resumed from."""
        return b": resume-unavailable\n\n" if resumed is False else b": connected\n\n"

    async def _acquire_slot(self, hub, workspace_id: int) -> None:
        """Sets `slot_id` (None: the workspace is at its limit), taken with the other opens of a
        burst in one job (Hub.acquire_slot). Retried once on a dead database connection: each
        open's `holder` makes a second run find the first one's row. If this task is cancelled
        meanwhile, the slot the job still takes is released when it arrives."""
        acquiring = hub.acquire_slot(workspace_id=workspace_id, limit=settings.CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE)
        try:
            self.slot_id = await asyncio.shield(acquiring)
        except asyncio.CancelledError:
            acquiring.add_done_callback(hub.release_acquired_slot)
            raise

    def _daphne_request(self):
        return daphne_stream.daphne_request(self.base_send)

    def _register_producer(self) -> None:
        request = self._daphne_request()
        if request is not None:
            self.producer = daphne_stream.register_producer(request, self.stream)

    # --- streaming -------------------------------------------------------------------------
    async def _replay(self, stream: Stream, replay: Replay | None, write=None) -> None:
        """What the client missed, a chunk at a time: each written once its socket takes more,
        and the next one read from the log only then (hub.Replay says when it ends). `write`:
        the stream's direct write under daphne (the live frames' own, after the headers and the
        first comment went out through `send`), else each chunk goes through ASGI `send`."""
        if replay is None:
            return
        while True:
            if not await self._writable(stream):
                return
            if replay.items:
                if write is not None:
                    write(replay.data)  # synchronous: in order with what `send` wrote before
                else:
                    await self.send_body(replay.data, more_body=True)
                stream.sent += len(replay.items)
                replay.items, replay.data = [], b""
            if replay.caught_up(stream) or not await self._writable(stream):
                return
            await get_hub().resume_more(replay)

    @staticmethod
    async def _writable(stream: Stream) -> bool:
        """Once Twisted's flow control lets the stream write (False: the stream closed)."""
        while stream.paused and stream.closed_reason is None:
            stream.wakeup.clear()
            await stream.wakeup.wait()
        return stream.closed_reason is None

    async def deliver(self) -> None:
        """The stream's task when it cannot run without one (not under daphne, no flow control)."""
        stream = self.stream
        try:
            replay, self.replay = self.replay, None
            await self._replay(stream, replay)
            # Live: the hub now writes straight to the transport whenever nothing is queued.
            direct = daphne_stream.direct_write(self._daphne_request(), self.producer)
            if stream.closed_reason is None:
                stream.write = direct
            while stream.closed_reason is None:
                await stream.wakeup.wait()
                stream.wakeup.clear()
                if stream.closed_reason is not None or stream.paused:
                    continue
                data = stream.pending()
                if data:
                    if direct is not None:
                        direct(data)  # synchronous: nothing can overtake it
                    else:
                        await self.send_body(data, more_body=True)
            # Closed by the server: a client that fell behind is cut off at once (its unread
            # bytes would sit in our buffers); otherwise the response ends normally.
            if stream.closed_reason == "overflow":
                daphne_stream.abort(self._daphne_request())
            elif stream.closed_reason != "client_gone":
                await self.send_body(closing_frame(stream, stream.closed_reason), more_body=False)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            logger.exception("event stream delivery failed")
            daphne_stream.abort(self._daphne_request())

    async def disconnect(self) -> None:
        """Every way a stream ends comes here (client gone, our own close, errors, cancellation):
        idempotent, and the slot's release is handed to the hub's thread before the first await,
        so it happens even if this task is cancelled again while waiting for it."""
        if self.stream is not None:
            self.stream.close("client_gone")
            if self.opened_at is not None:
                door.stream_closed(self.opened_at, self.stream.closed_reason, self.stream.sent)
            self.stream = None
        if self.delivery is not None and not self.delivery.done():
            self.delivery.cancel()
        self.delivery = None
        if self.producer is not None:
            daphne_stream.unregister_producer(self._daphne_request(), self.producer)
            self.producer = None
        if self.slot_id is not None:
            slot_id, self.slot_id = self.slot_id, None
            released = get_hub().run_db(slots.release_slot, slot_id, retry=True)
            try:
                await asyncio.shield(released)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - nobody renews it now: its lease lapses
                logger.exception("could not release stream slot %s", slot_id)
