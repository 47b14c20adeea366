"""A long-lived HTTP response under daphne written from outside its ASGI `send`: Twisted flow
control for it, and a write that skips the event loop's round trip. The event stream's
consumer (apps/stream/consumer.py) calls these; under any other server `daphne_request` is None
and the consumer falls back to plain ASGI `send`.

Relies on, read in daphne 4.2 and Twisted 26.10 (every private name is in `PRIVATE_NAMES`,
pinned by tests/test_engine_pins.py): daphne passes the application `send` as
`functools.partial(server.handle_reply, protocol)`, that protocol being the connection's
twisted.web `Request`; daphne installs Twisted's asyncio reactor on the loop the consumers run
on, so Twisted's callbacks, the hub's dispatch and the consumer never interleave mid-write. What
each function relies on further is in its docstring (docs/decisions/stream.md).

Every private attribute is looked for before it is read (or read with a default), so a Twisted
that renamed one makes `direct_write` take the ordinary `Request.write` path, never an
AttributeError."""

from __future__ import annotations

import sys
from typing import Any, Callable, Protocol

from twisted.web.http_headers import Headers

# (where, attribute) for every private name used here. `_tempDataLen` is an instance attribute,
# set in FileDescriptor.__init__ (tcp.Connection's base); the others are class attributes.
PRIVATE_NAMES: tuple[tuple[str, str], ...] = (
    ("twisted.internet.abstract.FileDescriptor", "_tempDataLen"),
    ("twisted.internet.tcp.Connection", "_writeDisconnected"),
    ("twisted.web.http.Request", "_disconnected"),
    # An instance attribute (set in WebRequest.__init__): see `forget_application_queue`.
    ("daphne.http_protocol.WebRequest", "application_queue"),
    # An instance attribute (set in WebRequest.process): see `forget_request_input`.
    ("daphne.http_protocol.WebRequest", "clean_headers"),
)
# The private names read on the TCP transport (a tcp.Connection).
TRANSPORT_PRIVATE_NAMES = ("_tempDataLen", "_writeDisconnected")

# Public but undocumented attributes this module also reads: pinned by presence the same way.
TRANSPORT_BUFFER_NAMES = ("dataBuffer", "offset", "socket")


# On shutdown, how long the streams' last chunks get to leave before Twisted drops the connections.
SHUTDOWN_FLUSH_SECONDS = 0.3


class FlowControlled(Protocol):
    """What a producer drives: the hub's Stream."""

    paused: bool

    def wake(self) -> None: ...

    def close(self, reason: str) -> None: ...


class Producer:
    """Twisted IPushProducer: Twisted calls pause/resume as the client's socket fills and
    drains (on the reactor thread, which under daphne is the asyncio loop's thread)."""

    def __init__(self, stream: FlowControlled) -> None:
        self.stream = stream

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's interface
        self.stream.paused = True

    def resumeProducing(self) -> None:  # noqa: N802
        self.stream.paused = False
        self.stream.wake()  # what queued meanwhile is written now

    def stopProducing(self) -> None:  # noqa: N802
        self.stream.paused = True
        self.stream.close("client_gone")


def daphne_request(send: Callable) -> Any | None:
    """The twisted.web Request behind an ASGI `send` under daphne, else None. A wrapper that
    keeps the `send` it wraps as `inner` (apps/access/door.py) is seen through."""
    while hasattr(send, "inner"):
        send = send.inner
    args = getattr(send, "args", ())
    request = args[0] if args else None
    return request if hasattr(request, "registerProducer") and hasattr(request, "channel") else None


def register_producer(request: Any, stream: FlowControlled) -> Producer | None:
    """Flow control for `stream` on `request`; None when it cannot be had (the stream then
    never writes directly, so nothing it sends bypasses the ASGI path unguarded)."""
    if getattr(request, "producer", None) is not None:
        return None
    producer = Producer(stream)
    try:
        request.registerProducer(producer, True)
    except Exception:  # noqa: BLE001 - flow control is a protection, not a requirement to stream
        return None
    return producer


def unregister_producer(request: Any | None, producer: Producer) -> None:
    try:
        if request is not None and getattr(request, "producer", None) is producer:
            request.unregisterProducer()
    except Exception:  # noqa: BLE001 - the connection is going away anyway
        pass


def abort(request: Any | None) -> None:
    """Drop the connection at once (RST), unsent bytes and all."""
    transport = getattr(getattr(request, "channel", None), "transport", None)
    if transport is not None and hasattr(transport, "abortConnection"):
        transport.abortConnection()


def finish(request: Any | None) -> None:
    """End the response normally (the last chunk), as daphne does for `more_body: False`."""
    if request is not None and _usable(request):
        request.finish()


def forget_application_queue(request: Any | None) -> None:
    """Once the application has ended with the response still open (a live stream's consumer):
    drop daphne's input queue for it, which nobody reads any more (three deques and an Event,
    otherwise held for the stream's life). daphne then sends no `http.disconnect` on its end; the
    stream learns of that end from `when_done`.

    daphne/http_protocol.py keeps the queue (`application_queue`, an asyncio.Queue) for the
    connection's life, and after the application has started uses it only to send
    `http.disconnect`, which `connectionLost` and `finish` skip when it is None."""
    if request is not None and getattr(request, "application_queue", None) is not None:
        request.application_queue = None


def forget_request_input(request: Any | None) -> None:
    """Once a stream is live: drop what its request brought in, otherwise held for the stream's
    life: the headers, held twice (twisted.web's `requestHeaders`, daphne's `clean_headers`),
    and the body (`content`, a POST's: an MCP listen request's JSON). Only the request's start
    reads them: daphne builds the ASGI scope from them, twisted.web decides the connection's
    persistence when the request's input ends, and its access log (the one later reader of two
    headers) is off under daphne, which gives its HTTPFactory no log file."""
    if request is None:
        return
    request.requestHeaders = Headers()
    if getattr(request, "clean_headers", None):
        request.clean_headers = []
    content = getattr(request, "content", None)
    if content is not None:
        content.close()
        request.content = None  # twisted.web's cleanup skips a None content


def when_done(request: Any, callback: Callable[[], None]) -> bool:
    """`callback()` once the response is finished or its connection lost (twisted.web's
    `notifyFinish`, which daphne's own disconnect handling runs beside). False, and no callback,
    when that has already happened: `notifyFinish` would then never fire."""
    if not _usable(request):
        return False
    request.notifyFinish().addBoth(lambda _: callback())
    return True


def _usable(request: Any) -> bool:
    # daphne's WebRequest.handle_reply skips the first two; Request.write the third.
    return not request.finished and request.channel is not None and not getattr(request, "_disconnected", False)


def can_write_through(transport: Any) -> bool:
    """A plain TCP transport of Twisted's (not TLS) whose buffer this module can see."""
    try:
        from twisted.internet.tcp import Connection
    except ImportError:  # pragma: no cover - daphne always brings Twisted
        return False
    return (
        isinstance(transport, Connection)
        and not getattr(transport, "TLS", False)
        and all(hasattr(transport, name) for name in TRANSPORT_BUFFER_NAMES)
        and all(hasattr(transport, name) for name in TRANSPORT_PRIVATE_NAMES)
    )


# The last bytes `write_through` framed as an HTTP chunk, and that chunk: the hub writes one
# bytes object to every live stream of a subscription in a row (apps/stream/hub.py `dispatch`),
# so the chunk is made once per batch, not once per stream. Compared by identity: the cache
# holds the object, so its id cannot be reused while it is here.
_last_framed: tuple[bytes, bytes] = (b"", b"0\r\n\r\n")


def direct_write(request: Any, producer: Producer | None) -> Callable[[bytes], None] | None:
    """The write a live stream's frames take; None without flow control (then every frame
    goes through the stream's task and ASGI `send`).

    daphne's `handle_reply` drops replies to connections it no longer knows;
    `WebRequest.handle_reply` drops them once `finished` or `channel is None`, then calls
    `http.Request.write`: this write makes the same checks and calls the same write.
    twisted/web/http.py `Request.write` ignores writes once `_disconnected`; chunked, it goes to
    the TCP transport's `writeSequence`, which only buffers and registers for writability (a
    write never blocks the loop) and, past `bufferSize`, pauses the registered push producer;
    `doWrite` resumes it once the buffer is empty. So `Producer.pauseProducing` runs inside the
    very write that filled the buffer.

    On a plain TCP transport whose buffer is empty (`dataBuffer`/`offset`, `_tempDataLen`)
    `tcp.Connection.writeSomeData` is the non-blocking `send()` that `doWrite` itself calls:
    sending at once keeps the order and skips the `startWriting`/`doWrite` round (two
    `epoll_ctl`s and a loop pass per stream and batch); what the socket does not take is
    buffered as before. `write_through` calls that `send()` itself, on the transport's `socket`
    (writeSomeData is `untilConcludes(self.socket.send, ...)`, pinned), and frames one batch's
    bytes as an HTTP chunk once for all the streams it is written to."""
    if request is None or producer is None:
        return None
    transport = getattr(request.channel, "transport", None)
    if not can_write_through(transport) or not hasattr(request, "_disconnected"):
        write = request.write

        def write_now(data: bytes) -> None:
            if _usable(request):
                write(data)

        return write_now
    chunked = bool(request.chunked)
    # tcp.Connection.writeSomeData is this socket's send() behind a memoryview of at most
    # SEND_LIMIT bytes, `untilConcludes` (EINTR: Python retries it itself, PEP 475) and a
    # translation of OSError: the same call without the three frames. What it does not take,
    # and any OSError (EAGAIN, a connection already gone), goes to `transport.write` as before:
    # buffered, and Twisted finds a lost connection its own way.
    send = transport.socket.send

    def write_through(data: bytes) -> None:
        global _last_framed
        # `_usable`, inlined: this runs once per live stream and dispatched batch.
        if request.finished or request.channel is None or request._disconnected:
            return
        if not chunked:
            chunk = data
        elif _last_framed[0] is data:
            chunk = _last_framed[1]
        else:
            chunk = b"%x\r\n%s\r\n" % (len(data), data)  # as Request.write's toChunk
            _last_framed = (data, chunk)
        request.sentLength += len(data)
        if (
            transport.connected
            and not transport.disconnecting
            and not transport._writeDisconnected
            and not transport._tempDataLen
            and len(transport.dataBuffer) == transport.offset
        ):
            try:
                sent = send(chunk)
            except OSError:
                sent = 0
            if sent == len(chunk):
                return
            chunk = chunk[sent:]
        transport.write(chunk)  # buffered behind what is already waiting; may pause the producer

    return write_through


def on_shutdown(callback: Callable[[], None]) -> bool:
    """`callback()` when daphne's reactor begins to shut down (SIGTERM), before it drops the
    connections; then a short wait (SHUTDOWN_FLUSH_SECONDS) while what the callback wrote leaves.
    False, and nothing, when no Twisted reactor is installed (not under daphne): importing it
    here would install one.

    On SIGTERM Twisted's reactor runs its "before shutdown" triggers (daphne's own cancels the
    applications), then drops every connection ("during"): ending the streams first means each
    client reads its response's end rather than a cut connection, and nothing is left for
    daphne to wait for."""
    reactor = sys.modules.get("twisted.internet.reactor")
    if reactor is None or not hasattr(reactor, "addSystemEventTrigger") or not hasattr(reactor, "callLater"):
        return False
    from twisted.internet.defer import Deferred

    def before_shutdown() -> Deferred:
        callback()
        flushed: Deferred = Deferred()
        reactor.callLater(SHUTDOWN_FLUSH_SECONDS, flushed.callback, None)
        return flushed

    reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)
    return True
