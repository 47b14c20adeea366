"""The per-process fan-out hub: one carrier subscription per server process feeding bounded
in-process queues, one per open stream (not a channel-layer group per connection: measured
in the issue, that does not scale past a few hundred streams).

- Carrier. Production (`REDIS_URL`): one Redis pub/sub subscription; each message is a
  routing header plus the ready SSE frame, published after commit by whichever process
  committed (fanout.announce_committed). Embedded (no Redis): a follower that reads the outbox
  by id (see `_poll`), woken at once by commits made in this process.
- All database work of the hub (follower, slot leases, batched credential checks,
  and each connect's authentication, slot and resume) runs on the hub's own two threads, not
  on `database_sync_to_async`'s shared thread and never once per event per stream.
- Each stream owns a bounded deque. A stream whose deque is full (its client does not read
  fast enough) is disconnected; the others are untouched.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from collections import defaultdict, deque
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Callable

import orjson
from django.conf import settings
from django.db import close_old_connections

from apps.events import fanout, selectors, slots
from apps.events.credentials import CredentialRef, invalid_credentials
from apps.events.filters import Subscription
from apps.events.models import Event
from apps.events.representations import event_envelope

logger = logging.getLogger("connect.events")

# Embedded follower: how often it polls when nothing in this process woke it, and how far
# back it re-reads. Ids are time-sortable, but a transaction may commit after another that
# took a later id (PostgreSQL runs writers concurrently; ids are made before commit), so
# "everything above the last id seen" would skip it. The follower instead re-reads the ids
# of the last FOLLOW_WINDOW_SECONDS every poll (an index-only look at the primary key) and
# fetches only those it has not delivered. A transaction that commits later than that after
# recording its event, or a machine clock that far off, is missed live (resume still has it).
FOLLOW_POLL_SECONDS = 0.1
FOLLOW_WINDOW_SECONDS = 10
RESUME_MAX_EVENTS = 5000

_CROCKFORD = {c: i for i, c in enumerate("0123456789abcdefghjkmnpqrstvwxyz")}


def event_id_ms(event_id: str) -> int | None:
    """The millisecond timestamp inside an `evt_` id, or None if it is not one."""
    body = event_id[4:] if event_id.startswith("evt_") else ""
    if len(body) != 26 or any(c not in _CROCKFORD for c in body):
        return None
    ms = 0
    for c in body[:10]:
        ms = ms * 32 + _CROCKFORD[c]
    return ms


def id_floor(ms: int) -> str:
    """The smallest `evt_` id of millisecond `ms`."""
    chars = []
    value = ms << 80
    alphabet = "0123456789abcdefghjkmnpqrstvwxyz"
    for _ in range(26):
        chars.append(alphabet[value & 31])
        value >>= 5
    return "evt_" + "".join(reversed(chars))


def sse_frame(event_id: str, type: str, envelope: dict[str, Any]) -> bytes:
    # orjson never emits a newline, so the envelope is always exactly one `data:` line.
    return b"id: %s\nevent: %s\ndata: %s\n\n" % (event_id.encode(), type.encode(), orjson.dumps(envelope))


def frame_for(event: Event) -> bytes:
    return sse_frame(event.id, event.type, event_envelope(event))


def _db_job(fn: Callable, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()  # conn_max_age=0: give the connection back (PostgreSQL pool)


class Stream:
    """One open event stream's state in the hub: what it wants and what waits for it."""

    def __init__(self, *, workspace_id: int, subscription: Subscription, credential: CredentialRef, queue_size: int):
        self.workspace_id = workspace_id
        self.subscription = subscription
        self.credential = credential
        self.queue: deque[tuple[str, bytes]] = deque()
        self.queue_size = queue_size
        self.wakeup = asyncio.Event()
        self.ping_due = False
        self.closed_reason: str | None = None

    def offer(self, event_id: str, frame: bytes) -> None:
        if self.closed_reason is not None:
            return
        if len(self.queue) >= self.queue_size:
            self.close("overflow")
            return
        self.queue.append((event_id, frame))
        self.wakeup.set()

    def close(self, reason: str) -> None:
        if self.closed_reason is None:
            self.closed_reason = reason
            self.queue.clear()
            self.wakeup.set()
            hub = _hub
            if hub is not None:
                hub.unregister(self)


_NO_STREAMS: frozenset = frozenset()


class Hub:
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.process = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.db = ThreadPoolExecutor(max_workers=2, thread_name_prefix="events-db")
        self.streams: dict[int, set[Stream]] = defaultdict(set)
        # workspace → (type, sessionId or None) → the streams whose subscription has that route.
        self.routes: dict[int, dict[tuple[str, str | None], set[Stream]]] = defaultdict(lambda: defaultdict(set))
        self.stream_count = 0
        self._carrier: asyncio.Future | None = None
        self._maintenance: asyncio.Task | None = None
        # The carrier's own task. The event loop keeps only weak references to tasks: without
        # this one a subscription waiting on a quiet Redis is garbage-collected mid-await.
        self._carrier_task: asyncio.Task | None = None
        self._poke = asyncio.Event()
        self._seen: set[str] = set()
        self.delivered_frames = 0

    # --- database on the hub's threads ---------------------------------------------------
    async def run_db(self, fn: Callable, *args, **kwargs):
        return await self.loop.run_in_executor(self.db, partial(_db_job, fn, *args, **kwargs))

    # --- lifecycle ------------------------------------------------------------------------
    async def ensure_carrier(self) -> None:
        """Subscribed and following before a stream's headers go out, so a broken Redis is an
        error response, never a silent dead stream. Retried by the next connect after a failure."""
        if self._maintenance is None:
            self._maintenance = asyncio.ensure_future(self._maintain())
        if self._carrier is None or (self._carrier.done() and self._carrier.exception() is not None):
            self._carrier = asyncio.ensure_future(self._start_carrier())
        await asyncio.shield(self._carrier)

    async def _start_carrier(self) -> None:
        if settings.REDIS_URL:
            import redis.asyncio as aioredis

            client = aioredis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=5)
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            await pubsub.subscribe(fanout.redis_channel())
            self._carrier_task = asyncio.ensure_future(self._carry_redis(client, pubsub))
        else:
            self._seen = set(await self.run_db(selectors.event_ids_from, id_floor(self._now_ms() - FOLLOW_WINDOW_SECONDS * 1000)))
            fanout.local_wakeups.append(self._wake_from_any_thread)
            self._carrier_task = asyncio.ensure_future(self._follow())

    async def _carry_redis(self, client, pubsub) -> None:
        try:
            async for message in pubsub.listen():
                if message.get("type") == "message":
                    self._dispatch_wire(message["data"])
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            logger.exception("Redis subscription lost; closing this process's streams (clients resume)")
        finally:
            self._carrier = None
            for stream in self.all_streams():
                stream.close("carrier_lost")
            try:
                await pubsub.aclose()
                await client.aclose()
            except Exception:  # noqa: BLE001
                pass

    def _dispatch_wire(self, data: bytes) -> None:
        header, _, frame = data.partition(b"\n")
        routing = orjson.loads(header)
        self.dispatch(routing["w"], routing["t"], routing["s"], routing["i"], frame)

    def _wake_from_any_thread(self) -> None:
        self.loop.call_soon_threadsafe(self._poke.set)

    @staticmethod
    def _now_ms() -> int:
        return int(time.time() * 1000)

    async def _follow(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._poke.wait(), FOLLOW_POLL_SECONDS)
            except asyncio.TimeoutError:
                pass
            self._poke.clear()
            try:
                rows = await self.run_db(self._poll, id_floor(self._now_ms() - FOLLOW_WINDOW_SECONDS * 1000))
            except Exception:  # noqa: BLE001 - a database hiccup: try again next poll
                logger.exception("event follower poll failed")
                await asyncio.sleep(1)
                continue
            for workspace_id, type_, session_id, event_id, frame in rows:
                self.dispatch(workspace_id, type_, session_id, event_id, frame)

    def _poll(self, floor: str) -> list[tuple]:
        # Runs on a hub thread; `_seen` is only touched here (one poll at a time).
        ids = selectors.event_ids_from(floor)
        self._seen = {i for i in self._seen if i >= floor}
        new = [i for i in ids if i not in self._seen]
        if not new:
            return []
        self._seen.update(new)
        return [(e.workspace_id, e.type, e.session_id, e.id, frame_for(e)) for e in selectors.events_by_ids(new)]

    async def _maintain(self) -> None:
        heartbeat = settings.CONNECT_SSE_HEARTBEAT_SECONDS
        check_every = max(0.25, heartbeat / 2)
        next_ping = next_check = time.monotonic()
        next_lease = time.monotonic() + slots.LEASE_RENEW_SECONDS
        while True:
            await asyncio.sleep(min(check_every, heartbeat))
            now = time.monotonic()
            try:
                if now >= next_ping:
                    next_ping = now + heartbeat
                    for stream in self.all_streams():
                        stream.ping_due = True
                        stream.wakeup.set()
                if now >= next_check:
                    next_check = now + check_every
                    await self._close_revoked()
                if now >= next_lease:
                    next_lease = now + slots.LEASE_RENEW_SECONDS
                    await self.run_db(slots.renew_leases, process=self.process)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep maintaining; log and retry next tick
                logger.exception("event hub maintenance failed")

    async def _close_revoked(self) -> None:
        refs = {s.credential for s in self.all_streams()}
        if not refs:
            return
        bad = await self.run_db(invalid_credentials, refs)
        if bad:
            for stream in self.all_streams():
                if stream.credential in bad:
                    stream.close("credential_revoked")

    # --- streams -------------------------------------------------------------------------
    def register(self, stream: Stream) -> None:
        self.streams[stream.workspace_id].add(stream)
        routes = self.routes[stream.workspace_id]
        for route in stream.subscription.routes():
            routes[route].add(stream)
        self.stream_count += 1

    def unregister(self, stream: Stream) -> None:
        group = self.streams.get(stream.workspace_id)
        if group is not None and stream in group:
            group.discard(stream)
            self.stream_count -= 1
            routes = self.routes[stream.workspace_id]
            for route in stream.subscription.routes():
                routes[route].discard(stream)
                if not routes[route]:
                    del routes[route]
            if not group:
                del self.streams[stream.workspace_id]
                del self.routes[stream.workspace_id]

    def all_streams(self) -> list[Stream]:
        return [s for group in self.streams.values() for s in group]

    def dispatch(self, workspace_id: int, type: str, session_id: str, event_id: str, frame: bytes) -> None:
        routes = self.routes.get(workspace_id)
        if not routes:
            return
        # A set union: a stream on both routes gets the event once; a copy, because an
        # overflowing stream unregisters itself while we offer.
        for stream in routes.get((type, None), _NO_STREAMS) | routes.get((type, session_id), _NO_STREAMS):
            stream.offer(event_id, frame)

    def stats(self) -> dict[str, Any]:
        return {
            "process": self.process,
            "streams": self.stream_count,
            "queued": sum(len(s.queue) for s in self.all_streams()),
        }


_hub: Hub | None = None


def get_hub() -> Hub:
    """This process's hub, created on first use on the running event loop."""
    global _hub
    if _hub is None or _hub.loop is not asyncio.get_running_loop():
        _hub = Hub()
    return _hub


def current_hub() -> Hub | None:
    return _hub


def resume_frames(
    *, workspace_id: int, last_event_id: str, subscription: Subscription, types: frozenset[str]
) -> list[tuple[str, bytes]] | None:
    """The frames a client reconnecting after `last_event_id` missed, in order, or None when
    that id is unknown in this workspace, older than the resume window, or too far behind."""
    ms = event_id_ms(last_event_id)
    window_ms = settings.CONNECT_SSE_RESUME_SECONDS * 1000
    if ms is None or ms < int(time.time() * 1000) - window_ms:
        return None
    if selectors.event_in_workspace(workspace_id=workspace_id, event_id=last_event_id) is None:
        return None
    rows = selectors.events_after(
        workspace_id=workspace_id, after_id=last_event_id, types=types, limit=RESUME_MAX_EVENTS + 1
    )
    if len(rows) > RESUME_MAX_EVENTS:
        return None
    return [(e.id, frame_for(e)) for e in rows if subscription.matches(e.type, e.session_id)]
