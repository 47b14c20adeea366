"""The per-process fan-out hub: one follower per server process feeding the open streams of
the process (not a channel-layer group per connection, which does not scale past a few hundred
streams).

- Dispatch is per batch, not per event: everything one follower poll brought is routed at once,
  per subscription (streams with equal filters share one routing and one copy of the bytes),
  and each matching stream gets its share as one write.
- A live stream (replay done, its socket not backed up, nothing queued) is written to straight
  from the dispatch (`Stream.write`, the daphne request's write: engine/daphne_stream.py
  says why that is safe); otherwise frames wait in its bounded queue, and a stream whose queue
  is full is disconnected, the others untouched.
- All its database work runs on its own threads (apps/stream/threads.py).
Design notes: docs/decisions/stream-hub.md."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections import defaultdict
from functools import partial
from typing import Any, Callable

from apps.access.admission import Admission
from apps.core import metrics
from apps.stream import slots
from apps.events.filters import Subscription
from apps.stream import maintenance
from apps.stream.carrier import Follower
from apps.stream.coalescing import Coalescing
from apps.events.positions import Position
from apps.stream.resume import Replay, resume_after, resume_chunk, resume_start
from apps.stream.streams import RenderedSubscription, Stream
from apps.stream.threads import DbThreads, db_job
from engine import daphne_stream

logger = logging.getLogger("connect.events")

_NO_STREAMS: frozenset = frozenset()


class Hub:
    """This process's open streams, routed by workspace and subscription. Runs on the event loop
    it was made on; its database work goes to its own threads (`run_db`)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.process = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.db = DbThreads(self.loop, workers=2, name="events-db")
        self.streams: dict[int, set[Stream]] = defaultdict(set)
        # workspace → subscription → its streams: streams with equal filters share one routing and
        # one copy of each batch's bytes (a fan-out to thousands of streams of one subscription
        # is one join, then one write per stream).
        self.groups: dict[int, dict[Subscription, set[Stream]]] = defaultdict(dict)
        # workspace → (type, sessionId or None) → the subscriptions (of `groups`) with that route.
        self.routes: dict[int, dict[tuple[str, str | None], set[Subscription]]] = defaultdict(lambda: defaultdict(set))
        self.stream_count = 0
        self.direct_writes = 0  # batches written straight to a stream (stats, tests)
        self.opening_count = 0  # stream opens in progress (`opening`)
        self.coalescing = Coalescing(self.loop, self.run_db, self.process)
        self.follower = Follower(self)
        self._maintenance: asyncio.Task | None = None
        # SIGTERM under daphne: every stream ends with its response (clients resume elsewhere).
        daphne_stream.on_shutdown(partial(self.close_all, "shutdown"))

    # --- database on the hub's threads ---------------------------------------------------
    def run_db(self, fn: Callable, *args, retry: bool = False, **kwargs) -> asyncio.Future:
        """`fn(*args, **kwargs)` on a hub thread (see `threads.db_job` for `retry`). Submitted at
        once: the job runs even if the caller stops waiting for the returned future."""
        return self.db.submit(partial(db_job, fn, retry, *args, **kwargs))

    # --- opening a stream ----------------------------------------------------------------
    async def admit(self, authorization: str | None, *, audiences: frozenset[str]) -> Admission:
        """Admission exactly as REST's, shared by a burst's opens (`Coalescing.admit`)."""
        return await self.coalescing.admit(authorization, audiences=audiences)

    def acquire_slot(self, *, workspace_id: int, limit: int) -> asyncio.Future:
        """A slot for one stream open, shared by a burst's opens (`Coalescing.acquire_slot`)."""
        return self.coalescing.acquire_slot(workspace_id=workspace_id, limit=limit)

    def release_acquired_slot(self, acquiring: asyncio.Future) -> None:
        self.coalescing.release_acquired_slot(acquiring)

    async def resume(self, *, workspace_id: int, last_event_id: str, subscription: Subscription,
                     types: frozenset[str]) -> Replay | None:
        """What a client reconnecting after `last_event_id` missed, as a `Replay` holding its first
        chunk (`resume_start`); None when the id cannot be resumed from. Call after `register`.
        One read serves every stream that resumes from the same id with the same types while it
        waits for a hub thread (a reconnect storm: most clients hold the same last id)."""
        read = await self.coalescing.read((workspace_id, last_event_id, types), resume_start,
                                          workspace_id=workspace_id, last_event_id=last_event_id, types=types)
        return None if read is None else Replay(workspace_id, types, subscription, read)

    async def resume_from(self, *, workspace_id: int, after: Position, subscription: Subscription,
                          types: frozenset[str]) -> Replay | None:
        """`resume` from a place in the log (a `pos_` cursor) instead of an event id."""
        read = await self.coalescing.read((workspace_id, after.key(), types), resume_after,
                                          workspace_id=workspace_id, after=after, types=types)
        return None if read is None else Replay(workspace_id, types, subscription, read)

    async def resume_more(self, replay: Replay) -> None:
        """The replay's next chunk, read from the log after the place the last one reached (shared
        like `resume`'s first read)."""
        after = replay.reached
        read = await self.coalescing.read((replay.workspace_id, after.key(), replay.types), resume_chunk,
                                          workspace_id=replay.workspace_id, after=after, types=replay.types)
        replay.take(read)

    async def read_shared(self, key: tuple, fn: Callable, **kwargs):
        """`fn(**kwargs)` on a hub thread, one run for every open of a burst asking with the same
        `key` before it starts (a check of an open's that reads the database, as admission and
        the slot are shared): the opens of a burst make a few jobs, not one each. `key` must not
        be a resume's (those start with a workspace id)."""
        return await self.coalescing.read(key, fn, resume=False, **kwargs)

    def opening(self) -> None:
        """A stream open begins (paired with `opened`): while a burst is in progress the follower
        batches its polls (carrier.BURST_OPENS)."""
        self.opening_count += 1

    def opened(self) -> None:
        self.opening_count -= 1

    @property
    def resume_reads(self) -> int:
        """Resume reads run (stats: a reconnect storm shares them)."""
        return self.coalescing.reads_run

    def live_slot_ids(self) -> list[slots.SlotId]:
        return [s.slot_id for s in self.all_streams() if s.slot_id is not None]

    # --- lifecycle ------------------------------------------------------------------------
    async def ensure_carrier(self) -> None:
        """Subscribed and following before a stream's headers go out, so a broken Redis is an
        error response, never a silent dead stream. Retried by the next connect after a failure."""
        if self._maintenance is None:
            self._maintenance = asyncio.ensure_future(maintenance.maintain(self))
        await self.follower.ensure_started()

    def close_all(self, reason: str) -> None:
        for stream in self.all_streams():
            stream.close(reason)

    def shutdown(self) -> None:
        """Stop this hub's tasks and threads (tests that run a hub on a loop of their own)."""
        if self._maintenance is not None and not self._maintenance.done():
            self._maintenance.cancel()
        self.follower.shutdown()
        self.db.shutdown(wait=True)

    # --- streams -------------------------------------------------------------------------
    def register(self, stream: Stream) -> None:
        workspace_id, subscription = stream.workspace_id, stream.subscription
        self.streams[workspace_id].add(stream)
        groups = self.groups[workspace_id]
        group = groups.get(subscription)
        if group is None:
            group = groups[subscription] = set()
            routes = self.routes[workspace_id]
            for route in subscription.routes():
                routes[route].add(subscription)
        group.add(stream)
        stream.hub = self
        self.stream_count += 1

    def unregister(self, stream: Stream) -> None:
        workspace_id, subscription = stream.workspace_id, stream.subscription
        streams = self.streams.get(workspace_id)
        if streams is None or stream not in streams:
            return
        streams.discard(stream)
        self.stream_count -= 1
        groups = self.groups[workspace_id]
        group = groups[subscription]
        group.discard(stream)
        if not group:
            del groups[subscription]
            routes = self.routes[workspace_id]
            for route in subscription.routes():
                routes[route].discard(subscription)
                if not routes[route]:
                    del routes[route]
        if not streams:
            del self.streams[workspace_id]
            del self.groups[workspace_id]
            del self.routes[workspace_id]

    def all_streams(self) -> list[Stream]:
        return [s for group in self.streams.values() for s in group]

    def dispatch(self, rows: list[tuple]) -> None:
        """Route a batch of (workspace_id, type, session_id, log key, frame) rows, in log order
        (the key is `(position, event id)`), and hand each matching stream its share at once
        (one write per stream and batch).

        Routed per subscription, not per stream: each subscription's share is joined once, and
        the same bytes object is written to each of its live streams (the daphne write frames it
        once for all of them, engine/daphne_stream.py). The per-stream work is the loop
        below: a stream that can take the bytes now (live, not paused, nothing queued, past its
        resume floor) is written at once; any other goes through `Stream.offer`."""
        shares: dict[tuple[int, Subscription], list[tuple[tuple[int, str], bytes]]] = {}
        for workspace_id, type_, session_id, key, frame in rows:
            routes = self.routes.get(workspace_id)
            if not routes:
                continue
            item = (key, frame)
            # A set union: a subscription on both routes gets the event once.
            for subscription in routes.get((type_, None), _NO_STREAMS) | routes.get((type_, session_id), _NO_STREAMS):
                # A rendered subscription's share keeps the whole row: it makes its own frames.
                entry = (key, type_, session_id, frame) if isinstance(subscription, RenderedSubscription) else item
                share = shares.get((workspace_id, subscription))
                if share is None:
                    shares[(workspace_id, subscription)] = [entry]
                else:
                    share.append(entry)
        direct = fanned = 0
        for (workspace_id, subscription), items in shares.items():
            group = self.groups.get(workspace_id, {}).get(subscription)
            if not group:
                continue
            if isinstance(subscription, RenderedSubscription):
                items = subscription.render(items)
                if not items:
                    continue
            count = len(items)
            data = items[0][1] if count == 1 else b"".join([frame for _, frame in items])
            first = items[0][0]
            # Writing may close (and unregister) a stream: iterate over a copy of the group.
            streams = tuple(group)
            fanned += count * len(streams)
            for stream in streams:
                write = stream.write
                if write is not None and not stream.paused and not stream.queue and (
                        stream.floor is None or stream.floor < first):
                    stream.sent += count
                    try:
                        write(data)
                    except Exception:  # noqa: BLE001 - one broken connection must not stop the dispatch
                        logger.exception("direct write to an event stream failed; closing it")
                        stream.close("write_failed")
                    direct += 1
                else:
                    direct += stream.offer(items)
        self.direct_writes += direct
        if fanned:
            metrics.EVENTS_FANNED_OUT.inc(fanned)  # once per batch, not per stream

    def stats(self) -> dict[str, Any]:
        streams = self.all_streams()
        return {
            "process": self.process,
            "streams": self.stream_count,
            "queued": sum(len(s.queue) for s in streams),
            "live": sum(1 for s in streams if s.write is not None),
            "paused": sum(1 for s in streams if s.paused),
            "directWrites": self.direct_writes,
            "resumeReads": self.coalescing.reads_run,
            "commitWakeups": self.follower.commit_wakeups,
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
