"""A stream under daphne once its replay is written: it runs with no task of its own (no
consumer, no scope), and ends once, whoever ends it."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from functools import partial

from apps.access import door
from apps.stream import slots
from apps.stream.hub import get_hub
from apps.stream.streams import RenderedSubscription, Stream
from engine import daphne_stream

logger = logging.getLogger("connect.events")


class LiveStream:
    """A stream under daphne once its replay is written: it runs with no task of its own. The hub
    writes its frames straight into the request (`Stream.write`); what cannot go at once (queued
    behind Twisted's flow control, a ping, the stream closed by the server) calls `kick`, which
    does it in one loop callback; the response's end (the client gone, or finished by us) is
    Twisted's `notifyFinish`. Holds only what its end needs, not the consumer and its scope.

    Its end, once: the stream closed and unregistered, the response finished (or aborted after
    an overflow), the close line written in the request's logging context, the producer
    unregistered and the slot released (a failed release lapses with its lease)."""

    __slots__ = ("stream", "request", "producer", "slot_id", "opened_at", "direct", "context", "kicked",
                 "started", "ended", "loop")

    def __init__(self, stream: Stream, request, producer, slot_id, opened_at: float, direct) -> None:
        self.stream, self.request, self.producer, self.slot_id = stream, request, producer, slot_id
        self.opened_at, self.direct = opened_at, direct
        self.context = contextvars.copy_context()  # the request's id and principal, for the close line
        self.kicked = self.started = self.ended = False
        self.loop = asyncio.get_running_loop()
        if not daphne_stream.when_done(request, self._done):
            stream.close("client_gone")

    def start(self) -> None:
        """Live from here: direct writes, and whatever queued during the replay written now."""
        self.started = True
        stream = self.stream
        stream.kick = self.kick
        daphne_stream.forget_application_queue(self.request)  # the consumer has ended
        daphne_stream.forget_request_input(self.request)
        if stream.closed_reason is not None:
            self.context.run(self._end)
            return
        stream.write = self.direct
        stream.drain()

    def kick(self) -> None:
        if not self.kicked:
            self.kicked = True
            self.loop.call_soon(self._run)

    def _run(self) -> None:
        self.kicked = False
        if self.stream.closed_reason is None:
            self.stream.drain()
        else:
            self.context.run(self._end)

    def _done(self) -> None:
        """Twisted: the response finished or its connection was lost."""
        self.stream.close("client_gone")  # nothing if we closed it first
        if self.started:
            self.context.run(self._end)

    def _end(self) -> None:
        if self.ended:
            return
        self.ended = True
        stream = self.stream
        stream.close("client_gone")
        stream.kick = None
        reason = stream.closed_reason
        # Closed by the server: a client that fell behind is cut off at once (its unread bytes
        # would sit in our buffers); otherwise the response ends normally.
        if reason == "overflow":
            daphne_stream.abort(self.request)
        elif reason != "client_gone":
            closing = closing_frame(stream, reason)
            if closing:
                try:
                    self.direct(closing)
                except Exception:  # noqa: BLE001 - the connection may be gone already
                    logger.debug("could not write a stream's closing frame", exc_info=True)
            daphne_stream.finish(self.request)
        door.stream_closed(self.opened_at, reason, stream.sent)
        daphne_stream.unregister_producer(self.request, self.producer)
        self.request = self.producer = None
        if self.slot_id is not None:
            slot_id, self.slot_id = self.slot_id, None
            get_hub().run_db(slots.release_slot, slot_id, retry=True).add_done_callback(
                partial(_released, slot_id))


def closing_frame(stream: Stream, reason: str) -> bytes:
    """What a stream the server ends says last (an MCP answer's final result); none for an event stream."""
    subscription = stream.subscription
    return subscription.closing(reason) if isinstance(subscription, RenderedSubscription) else b""


def _released(slot_id, future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        # Nobody renews it now: its lease lapses.
        logger.error("could not release stream slot %s", slot_id, exc_info=future.exception())
