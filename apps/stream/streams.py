"""One open event stream's state in the hub: what it wants (its subscription), what waits for
it (a bounded queue), and how it is written to (`write`, set once it is live)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from apps.access.credentials import CredentialRef
from apps.stream import slots
from apps.events.filters import Subscription
from apps.events.representations import PING

logger = logging.getLogger("connect.events")

NO_FRAMES: tuple = ()

# One row of the log as the hub routes it: (log key, type, session id, the event stream's frame).
Row = tuple[tuple[int, str], str, str, bytes]


@dataclass(frozen=True)
class RenderedSubscription(Subscription):
    """A subscription whose streams carry frames of their own (an MCP `subscriptions/listen` or
    `events/stream` answer), made from the log's rows: routed, resumed, bounded and ended exactly
    as an event stream's, only the bytes differ. `render` turns the rows it matches (in log order)
    into `(log key, bytes)` items, keys kept so a resume's floor applies; an item's bytes may hold
    several frames, or none. Equal subscriptions share one rendering per dispatched batch."""

    def render(self, rows: list[Row]) -> list[tuple[tuple[int, str], bytes]]:
        raise NotImplementedError

    def heartbeat(self) -> bytes:
        """Written to a quiet stream every heartbeat interval."""
        return PING

    def closing(self, reason: str) -> bytes:  # noqa: ARG002
        """The last bytes of a stream the server ends (revoked, shut down), before the response ends."""
        return b""


class Stream:
    """One open event stream's state in the hub: what it wants and what waits for it.

    Invariant: frames reach the client in dispatch order. `write` is used only while the
    deque is empty; once anything is queued, later frames queue behind it until the task
    has drained it.

    Slotted, with its queue and its `wakeup` made only when needed: a live stream that never
    waits holds neither (memory per stream is a target of ours, docs/decisions/stream-hub.md)."""

    __slots__ = ("workspace_id", "slot_id", "subscription", "credential", "queue", "queue_size", "_wakeup", "kick",
                 "ping_due", "closed_reason", "write", "paused", "floor", "sent", "hub")

    def __init__(
        self,
        *,
        workspace_id: int,
        subscription: Subscription,
        credential: CredentialRef,
        queue_size: int,
        slot_id: slots.SlotId | None = None,
    ):
        self.workspace_id = workspace_id
        # The StreamSlot row this stream holds; the hub renews its lease while it holds the stream.
        self.slot_id = slot_id
        self.subscription = subscription
        self.credential = credential
        # Frames waiting for the client: `NO_FRAMES` until one has to wait, and again once drained.
        self.queue: deque[tuple[tuple[int, str], bytes]] | tuple = NO_FRAMES
        self.queue_size = queue_size
        self._wakeup: asyncio.Event | None = None
        # Set once the stream runs without a task of its own (consumer.LiveStream): called instead
        # of `wakeup.set()` when there is something to do (frames queued, a ping, a resume after
        # a pause, the stream closed).
        self.kick: Callable[[], None] | None = None
        self.ping_due = False
        self.closed_reason: str | None = None
        # Set by the consumer once the stream is live: writes bytes to the client now (buffered
        # by the transport, never blocking). None while replaying and when not under daphne.
        self.write: Callable[[bytes], None] | None = None
        # Twisted's flow control (daphne_stream.Producer): the client's socket is backed up.
        self.paused = False
        # After a resume: the log place (`Position.key()`) up to which the replay covers; a live
        # copy of an event at or below it is dropped.
        self.floor: tuple[int, str] | None = None
        # Event frames written to the client (replay and live), for the close line.
        self.sent = 0
        # The hub that routes to this stream (set by `Hub.register`); a closed stream leaves it.
        self.hub: Any = None

    @property
    def wakeup(self) -> asyncio.Event:
        """Set when the stream's task has something to do (see `kick` for a stream without one)."""
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        return self._wakeup

    def _direct(self) -> bool:
        return self.write is not None and not self.paused and not self.queue

    def offer(self, items: list[tuple[tuple[int, str], bytes]]) -> bool:
        """This stream's share of one dispatched batch of `(log key, frame)`, in log order. True if
        written directly."""
        if self.closed_reason is not None:
            return False
        if self._direct():
            floor = self.floor
            if floor is not None:
                frames = [frame for key, frame in items if key > floor]
                data, count = b"".join(frames), len(frames)
            else:
                data = items[0][1] if len(items) == 1 else b"".join(frame for _, frame in items)
                count = len(items)
            if data:
                self.sent += count
                self._write_now(data)
            return True
        if not self.queue:
            self.queue = deque()
        for item in items:
            if len(self.queue) >= self.queue_size:
                self.close("overflow")
                return False
            self.queue.append(item)
        self.wake()
        return False

    def ping(self) -> None:
        if self.closed_reason is not None:
            return
        if self._direct():
            self._write_now(self.subscription.heartbeat() if isinstance(self.subscription, RenderedSubscription)
                            else PING)
        else:
            self.ping_due = True
            self.wake()

    def wake(self) -> None:
        """Something to do for whoever delivers what cannot be written at once."""
        if self.kick is not None:
            self.kick()
        else:
            self.wakeup.set()

    def drain(self) -> None:
        """Write what waited (a ping, queued frames) in one write, if the stream can take it now.
        For a stream without a task (`kick`); the task does the same itself."""
        if self.closed_reason is not None or self.paused or self.write is None:
            return
        data = self.pending()
        if data:
            self._write_now(data)

    def pending(self) -> bytes:
        """Everything that waited (a due ping, queued frames past the resume floor) as one write,
        taken off the queue; counted as sent."""
        parts = []
        if self.ping_due:
            self.ping_due = False
            parts.append(self.subscription.heartbeat() if isinstance(self.subscription, RenderedSubscription)
                         else PING)
        floor = self.floor
        queue = self.queue
        while queue:
            key, frame = queue.popleft()
            if floor is None or key > floor:
                parts.append(frame)
                self.sent += 1
        self.queue = NO_FRAMES
        return b"".join(parts)

    def _write_now(self, data: bytes) -> None:
        try:
            self.write(data)
        except Exception:  # noqa: BLE001 - one broken connection must not stop the dispatch
            logger.exception("direct write to an event stream failed; closing it")
            self.close("write_failed")

    def close(self, reason: str) -> None:
        if self.closed_reason is None:
            self.closed_reason = reason
            self.write = None
            self.queue = NO_FRAMES
            self.wake()
            if self.hub is not None:
                self.hub.unregister(self)
