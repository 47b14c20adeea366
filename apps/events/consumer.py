"""`GET /api/v1/events/stream` (contract §4.4, §6.1): a Channels HTTP consumer under daphne.

Why the consumer is shaped like this (channels/generic/http.py, daphne/http_protocol.py):
`AsyncHttpConsumer.http_request` awaits `handle()` and then stops the consumer, and messages
are dispatched one at a time, so a stream loop inside `handle()` would never see
`http.disconnect`. Here `http_request` only opens the stream — checks, headers, a first
comment — and returns; a delivery task replays, then writes whatever had to wait in the
queue and ends the response (live frames are written by the hub, see "Direct writes" below);
`http.disconnect` (sent by daphne when the client goes, and also after we finish the response
ourselves) cancels that task and frees the queue and the slot.

Daphne buffers whatever the application sends without limit (Twisted's transport), so the
stream registers a Twisted push producer on the request: when the socket's send buffer is full
Twisted pauses it, events then wait in the stream's bounded queue, and a full queue disconnects
that client alone.

Direct writes. Once a stream is live (headers and replay sent) the hub writes its frames
straight into the daphne request (`Stream.write`, set here) instead of waking this stream's
task, which then only replays, drains after a pause, and closes. What that relies on, read in
daphne 4.2 and Twisted 26.10:
- `send_body` ends, with nothing in between that matters here, in `http.Request.write`:
  daphne/server.py `Server.handle_reply` only drops replies to connections it no longer knows,
  and daphne/http_protocol.py `WebRequest.handle_reply` drops them once `finished` or
  `channel is None` (the same check `_direct_write` makes), then calls `http.Request.write`.
- twisted/web/http.py `Request.write` ignores writes after the client disconnected; chunked, it
  goes to `HTTPChannel.writeSequence` → the TCP transport. twisted/internet/abstract.py
  `FileDescriptor.write`/`writeSequence` only append to a buffer and register for writability
  (`startWriting`); `send()` happens later in `doWrite`. So a write never blocks the loop.
- The same `writeSequence` calls `_maybePauseProducer` before returning: past `bufferSize`
  (64 KiB) the transport pauses `HTTPChannel`, which pauses our producer, so `Stream.paused`
  is set by the very write that filled the buffer and the next batch queues. `doWrite` resumes
  the producer once its buffer is empty.
- On a plain TCP transport whose Twisted buffer is empty the write goes one step further, to
  `send()` at once (`write_through`, `_can_write_through` says what it relies on): with 1,000
  streams the `startWriting`/`doWrite`/`stopWriting` round (two `epoll_ctl`s and a loop pass
  per stream and batch) was the largest part of the loop's time. It still builds the chunk
  exactly as `Request.write` does (`toChunk`) and counts `sentLength`.
- Everything runs on one thread: daphne installs Twisted's asyncio reactor on the loop the
  consumers run on (daphne/server.py), so the hub's dispatch, Twisted's callbacks and this
  consumer never interleave mid-write.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import parse_qs

import orjson
from channels.exceptions import StopConsumer
from channels.generic.http import AsyncHttpConsumer
from django.conf import settings

from apps.access.admission import admit
from apps.access.audience import rest_audiences
from apps.access.principal import Principal
from apps.access.ratelimit import RateDecision
from apps.access.render import render
from apps.core.errors import (
    ApiError,
    ConnectionLimit,
    FilterCostExceeded,
    InsufficientScope,
    InvalidFilters,
    InvalidRequest,
    MethodNotAllowed,
)
from apps.events import filters, slots
from apps.events.credentials import CredentialRef
from apps.events.hub import PING, Stream, get_hub, resume_frames

logger = logging.getLogger("connect.events")

STREAM_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
REPLAY_CHUNK = 200


class _Producer:
    """Twisted IPushProducer: Twisted calls pause/resume as the client's socket fills and
    drains (on the reactor thread, which under daphne is the asyncio loop's thread)."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's interface
        self.stream.paused = True

    def resumeProducing(self) -> None:  # noqa: N802
        self.stream.paused = False
        self.stream.wakeup.set()  # the task drains what queued meanwhile

    def stopProducing(self) -> None:  # noqa: N802
        self.stream.paused = True
        self.stream.close("client_gone")


def _can_write_through(transport) -> bool:
    """A plain TCP transport of Twisted's (not TLS) whose buffer we can see, so a live stream's
    bytes can go to `send()` at once instead of through `startWriting` and a later `doWrite`:
    twisted/internet/abstract.py buffers every write in `_tempDataBuffer`/`dataBuffer`
    (`offset` into it) and registers the socket for writability, and twisted/internet/tcp.py
    `Connection.writeSomeData` is the non-blocking `send()` that `doWrite` itself calls. When
    that buffer is empty nothing is waiting ahead of us, so sending now keeps the order; what
    the socket does not take goes to `transport.write` as before (flow control unchanged)."""
    try:
        from twisted.internet.tcp import Connection
    except ImportError:  # pragma: no cover - daphne always brings Twisted
        return False
    return (
        isinstance(transport, Connection)
        and not getattr(transport, "TLS", False)
        and all(hasattr(transport, name) for name in ("_tempDataLen", "dataBuffer", "offset", "_writeDisconnected", "writeSomeData"))
    )


class EventStreamConsumer(AsyncHttpConsumer):
    stream: Stream | None = None
    slot_id: int | None = None
    delivery: asyncio.Task | None = None
    producer: _Producer | None = None
    replay: list[tuple[str, bytes]] | None = None
    rate: RateDecision | None = None

    async def http_request(self, message) -> None:
        if "body" in message:
            self.body.append(message["body"])
        if message.get("more_body"):
            return
        streaming = False
        try:
            streaming = await self.open_stream()
        except ApiError as error:
            await self.send_error(error)
        except Exception:  # noqa: BLE001 - never leak details; the body is the contract's 500
            logger.exception("event stream failed to open")
            await self.send_error(ApiError())
        finally:
            if not streaming:
                await self.disconnect()
                raise StopConsumer()

    async def http_disconnect(self, message) -> None:  # noqa: ARG002
        await self.disconnect()
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
        if self.scope["method"] != "GET":
            raise MethodNotAllowed()
        hub = get_hub()
        # Admission exactly as REST (401, 404, 403, then REST's buckets: reconnect churn is bounded).
        audiences = rest_audiences(settings.CONNECT_BASE_URL)
        admission = await hub.run_db(admit, self._header(b"authorization"), audiences=audiences)
        self.rate = admission.rate
        if admission.error is not None:
            raise admission.error
        principal: Principal = admission.principal
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        raw = query.get("filters")
        if raw is not None and len(raw) != 1:
            raise InvalidFilters(detail="filters: given more than once")
        try:
            subscription = filters.subscription_for(raw[0] if raw else None, principal.scopes)
        except filters.InvalidFilters as invalid_filters:
            raise InvalidFilters(detail=invalid_filters.detail) from None
        except filters.FilterCostExceeded as exceeded:
            raise FilterCostExceeded(**exceeded.body_fields()) from None
        except filters.MissingScope:
            raise InsufficientScope() from None
        last_event_id = self._header(b"last-event-id")
        if last_event_id is not None and len(last_event_id) > 64:
            raise InvalidRequest(detail="Last-Event-ID: at most 64 characters")

        await hub.ensure_carrier()
        workspace_id = principal.workspace.id
        self.slot_id = await hub.run_db(
            slots.acquire_slot,
            workspace_id=workspace_id,
            process=hub.process,
            limit=settings.CONNECT_SSE_MAX_STREAMS_PER_WORKSPACE,
        )
        if self.slot_id is None:
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
        )
        # Subscribe before reading what was missed: an event committed in between is then in
        # the live queue too, and the delivery task drops the copy it already replayed.
        hub.register(self.stream)
        first = b": connected\n\n"
        if last_event_id:
            types = (
                frozenset(e.type for e in subscription.entries) if subscription.entries else subscription.default_types
            )
            self.replay = await hub.run_db(
                resume_frames,
                workspace_id=workspace_id,
                last_event_id=last_event_id.strip(),
                subscription=subscription,
                types=types,
            )
            if self.replay is None:
                first = b": resume-unavailable\n\n"
        await self.send_headers(status=200, headers=STREAM_HEADERS + self._rate_headers())
        await self.send_body(first, more_body=True)
        self._register_producer()
        self.delivery = asyncio.ensure_future(self.deliver())
        return True

    def _daphne_request(self):
        # Daphne passes `send` as functools.partial(server.handle_reply, protocol); the protocol
        # is its twisted.web Request for this connection. Other servers: no flow control here.
        send = self.base_send
        args = getattr(send, "args", ())
        request = args[0] if args else None
        return request if hasattr(request, "registerProducer") and hasattr(request, "channel") else None

    def _register_producer(self) -> None:
        request = self._daphne_request()
        if request is None or request.producer is not None:
            return
        self.producer = _Producer(self.stream)
        try:
            request.registerProducer(self.producer, True)
        except Exception:  # noqa: BLE001 - flow control is a protection, not a requirement to stream
            self.producer = None

    def _abort(self) -> None:
        request = self._daphne_request()
        transport = getattr(getattr(request, "channel", None), "transport", None)
        if transport is not None and hasattr(transport, "abortConnection"):
            transport.abortConnection()

    def _direct_write(self):
        """The write the hub calls once this stream is live; None when not under daphne or
        without flow control (then every frame goes through the task)."""
        request = self._daphne_request()
        if request is None or self.producer is None:
            return None
        transport = getattr(request.channel, "transport", None)
        if not _can_write_through(transport):
            write = request.write

            def write_now(data: bytes) -> None:
                # daphne's WebRequest.handle_reply skips these two cases the same way.
                if not request.finished and request.channel is not None:
                    write(data)

            return write_now
        chunked = bool(request.chunked)

        def write_through(data: bytes) -> None:
            if request.finished or request.channel is None or request._disconnected:
                return
            chunk = b"%x\r\n%s\r\n" % (len(data), data) if chunked else data
            request.sentLength += len(data)
            if (
                transport.connected
                and not transport.disconnecting
                and not transport._writeDisconnected
                and not transport._tempDataLen
                and len(transport.dataBuffer) == transport.offset
            ):
                sent = transport.writeSomeData(chunk)
                if not isinstance(sent, int):  # connection lost: let Twisted find out its own way
                    sent = 0
                if sent == len(chunk):
                    return
                chunk = chunk[sent:]
            transport.write(chunk)  # buffered behind what is already waiting; may pause us

        return write_through

    # --- streaming -------------------------------------------------------------------------
    async def deliver(self) -> None:
        stream = self.stream
        try:
            for start in range(0, len(self.replay or ()), REPLAY_CHUNK):
                chunk = self.replay[start : start + REPLAY_CHUNK]
                while stream.paused and stream.closed_reason is None:
                    stream.wakeup.clear()
                    await stream.wakeup.wait()
                if stream.closed_reason is not None:
                    break
                stream.replayed.update(event_id for event_id, _ in chunk)
                await self.send_body(b"".join(frame for _, frame in chunk), more_body=True)
            self.replay = None
            # Live: the hub now writes straight to the transport whenever nothing is queued.
            direct = self._direct_write()
            if stream.closed_reason is None:
                stream.write = direct
            while stream.closed_reason is None:
                await stream.wakeup.wait()
                stream.wakeup.clear()
                if stream.closed_reason is not None or stream.paused:
                    continue
                parts = []
                if stream.ping_due:
                    stream.ping_due = False
                    parts.append(PING)
                replayed = stream.replayed
                while stream.queue:
                    event_id, frame = stream.queue.popleft()
                    if event_id not in replayed:
                        parts.append(frame)
                if parts:
                    if direct is not None:
                        direct(b"".join(parts))  # synchronous: nothing can overtake it
                    else:
                        await self.send_body(b"".join(parts), more_body=True)
            # Closed by the server: a client that fell behind is cut off at once (its unread
            # bytes would sit in our buffers); otherwise the response ends normally.
            if stream.closed_reason == "overflow":
                self._abort()
            elif stream.closed_reason != "client_gone":
                await self.send_body(b"", more_body=False)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            logger.exception("event stream delivery failed")
            self._abort()

    async def disconnect(self) -> None:
        """Every way a stream ends comes here (client gone, our own close, errors): idempotent."""
        hub = get_hub()
        if self.stream is not None:
            self.stream.close("client_gone")
            self.stream = None
        if self.delivery is not None and not self.delivery.done():
            self.delivery.cancel()
        self.delivery = None
        if self.producer is not None:
            request = self._daphne_request()
            try:
                if request is not None and request.producer is self.producer:
                    request.unregisterProducer()
            except Exception:  # noqa: BLE001
                pass
            self.producer = None
        if self.slot_id is not None:
            slot_id, self.slot_id = self.slot_id, None
            try:
                await hub.run_db(slots.release_slot, slot_id)
            except Exception:  # noqa: BLE001 - the lease frees it within a minute anyway
                logger.exception("could not release stream slot %s", slot_id)


async def stream_stats(scope, receive, send) -> None:
    """Test-only (routed when CONNECT_SSE_STATS is set): this process's open streams, queued
    frames and live delivery tasks, so tests can see an abrupt disconnect free everything."""
    from apps.events.hub import current_hub

    hub = current_hub()
    body = hub.stats() if hub is not None else {"streams": 0, "queued": 0}
    body["deliveryTasks"] = sum(
        1 for t in asyncio.all_tasks() if not t.done() and getattr(t.get_coro(), "__qualname__", "") == "EventStreamConsumer.deliver"
    )
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": orjson.dumps(body)})
