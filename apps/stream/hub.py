"""The per-process fan-out hub: one carrier subscription per server process feeding bounded
in-process queues, one per open stream (not a channel-layer group per connection: measured
in the issue, that does not scale past a few hundred streams).

- Follower. Every process follows the event log itself, in log order and below its horizon,
  exactly as REST pages it (`_poll`, selectors.read_log): a stream carries events in log order
  only, so a client's last id is a place in the log and a resume from it (`resume_frames`)
  misses nothing and repeats nothing, even when transactions commit out of order (an event whose
  transaction began first and committed last waits for it instead of being overtaken).
- Carrier = the follower's wake-up. Production (`REDIS_URL`): one Redis pub/sub subscription per
  process; each commit anywhere is published (fanout.announce_committed) and wakes every
  process's follower at once. Embedded (no Redis): a commit made in this process wakes it, one
  made in another process of the host sends it a datagram (fanout.commit_listener), and the
  100 ms poll covers a lost one. Waking on Redis instead of carrying the frame costs one log
  read per process and burst, never per stream.
- All database work of the hub (follower, slot leases, batched credential checks,
  and each connect's authentication, slot and resume) runs on the hub's own two threads, not
  on `database_sync_to_async`'s shared thread and never once per event per stream. A job that
  is safe to run twice (`retry=True`: reads, and writes made idempotent) runs once more on a
  fresh connection when its own dies under it (`_db_job`); a connection that died idle in the
  pool is replaced before any job gets it (connect/engine/postgresql).
- Slot leases: every third of a lease the hub renews the slots of the streams it holds, by id,
  and deletes lapsed rows (slots.py), so a slot lives as long as its stream.
- Dispatch is per batch, not per event: everything one follower poll (or one burst of Redis
  messages) brought is routed at once, and each matching stream gets its share as one write.
- A live stream (replay done, its socket not backed up, nothing queued) is written to straight
  from the dispatch: `Stream.write`, which the consumer sets to the daphne request's write
  (connect/engine/daphne_stream.py says why that is safe). No task wakes up per stream and event; the stream's task
  is left with replay, pings of paused streams, draining after a pause, and closing.
- Otherwise (replaying, paused by Twisted's flow control, or not under daphne) frames wait in
  the stream's bounded deque for its task. A stream whose deque is full (its client does not
  read fast enough) is disconnected; the others are untouched.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import queue
import secrets
import socket
import threading
import time
from collections import defaultdict, deque
from functools import partial
from typing import Any, Callable

import orjson
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections

from apps.access.admission import Admission, admit_each
from apps.access.credentials import CredentialRef, invalid_credentials
from apps.core import metrics
from apps.events import fanout, selectors, slots
from apps.events.filters import Subscription
from apps.events.positions import Position, event_id_ms
from apps.events.retention import oldest_complete_ms
from apps.events.representations import PING, frame_for
from connect.engine import daphne_stream
from connect.engine.faults import discard_lost_connections, is_database_unavailable

logger = logging.getLogger("connect.events")

# The follower: how often it polls when nothing woke it (embedded; with Redis every commit wakes
# it, and the slow poll only covers a lost publish), and how many events one poll reads at most.
# It follows the log (selectors.read_log) from where it stands: below the log's horizon, so an
# event whose transaction commits late is delivered late, never skipped. An event announced on
# Redis but not read yet (an older transaction still holds the horizon) is polled for again
# soon: AWAIT_POLL_SECONDS, doubling up to FOLLOW_POLL_SECONDS.
FOLLOW_POLL_SECONDS = 0.1
REDIS_FOLLOW_POLL_SECONDS = 1.0
AWAIT_POLL_SECONDS = 0.005
AWAIT_FORGET_SECONDS = 60.0
FOLLOW_BATCH = 1000
RESUME_MAX_EVENTS = 5000
# Redis messages already received are dispatched together, up to this many at once.
REDIS_BATCH_MAX = 500
# While a burst of opens is in progress (at least BURST_OPENS at once: a reconnect storm, not
# ordinary churn) the follower polls at most every BURST_FOLLOW_SECONDS: each dispatch writes to
# every live stream, and at 50 commits/s the storm's live writes (one send() per stream and
# commit) were the largest share of the loop while thousands of opens waited for it. Events wait
# at most that long for their batch meanwhile; nothing is skipped (the follower reads the log).
# Not after the burst: batching 2 s past it held the first live events after 1,000 opens back
# (embedded commit-to-stream p99 12.5-13.3 -> 52.9-62.4 ms, same run) for a storm 0.2 s faster
# in one pair (2.57 against 2.79 s), both well within issue 26's 5 s.
BURST_OPENS = 16
BURST_FOLLOW_SECONDS = 0.1


def _db_job(fn: Callable, retry: bool, *args, **kwargs):
    """`fn` on a hub thread. Every PostgreSQL connection is tried as it leaves the pool
    (connect/engine/postgresql); `retry`: `fn` is safe to run twice (a read, or a write made
    idempotent), so when its connection dies under it, it runs once more on a fresh one
    (connect/engine/faults.py); otherwise the error stands and the caller answers 503."""
    try:
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            if not (retry and is_database_unavailable(exc) and discard_lost_connections()):
                raise
            logger.warning("database connection lost under %s; retrying once on a fresh one",
                           getattr(fn, "__name__", fn))
            return fn(*args, **kwargs)
    finally:
        close_old_connections()  # conn_max_age=0: give the connection back (PostgreSQL pool)


class _DbThreads:
    """The hub's database threads. Results reach the loop in batches: a finished job's result is
    set together with every other one that finished before the loop got to them, one
    `call_soon_threadsafe` (a write to the loop's self-pipe, a wake-up) per batch rather than per
    job (`run_in_executor`'s way) — a burst of stream opens finishes hundreds of jobs, and those
    wake-ups were about a fifth of an open's server time (bench/README.md, issue 26).

    Daemon threads: nothing joins them at exit (a queued slot release then lapses with its lease,
    or goes with the process's Redis connection, slots.py)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, workers: int, name: str) -> None:
        self.loop = loop
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.finished: list[tuple[asyncio.Future, bool, Any]] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._work, name=f"{name}_{n}", daemon=True) for n in range(workers)]
        for thread in self.threads:
            thread.start()

    def submit(self, job: Callable[[], Any]) -> asyncio.Future:
        """`job()` on a database thread; runs even if the caller stops waiting for the future."""
        future = self.loop.create_future()
        self.jobs.put((future, job))
        return future

    def _work(self) -> None:
        while True:
            item = self.jobs.get()
            if item is None:
                return
            future, job = item
            try:
                outcome = (future, True, job())
            except BaseException as exc:  # noqa: BLE001 - handed to whoever awaits the job
                outcome = (future, False, exc)
            del item, job
            with self.lock:
                self.finished.append(outcome)
                first = len(self.finished) == 1  # else a settle is already on its way
            if first:
                try:
                    self.loop.call_soon_threadsafe(self._settle)
                except RuntimeError:
                    pass  # the loop is closed: nobody waits any more

    def _settle(self) -> None:
        with self.lock:
            finished, self.finished = self.finished, []
        for future, ok, value in finished:
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def shutdown(self, *, wait: bool = True) -> None:
        for _ in self.threads:
            self.jobs.put(None)
        if wait:
            for thread in self.threads:
                thread.join()


_NO_FRAMES: tuple = ()


class Stream:
    """One open event stream's state in the hub: what it wants and what waits for it.

    Invariant: frames reach the client in dispatch order. `write` is used only while the
    deque is empty; once anything is queued, later frames queue behind it until the task
    has drained it.

    Slotted, with its queue and its `wakeup` made only when needed: a live stream that never
    waits holds neither (a deque and an asyncio.Event are ~0.8 and ~1.1 KB; memory per stream
    is one of issue 26's targets)."""

    __slots__ = ("workspace_id", "slot_id", "subscription", "credential", "queue", "queue_size", "_wakeup", "kick",
                 "ping_due", "closed_reason", "write", "paused", "floor", "sent")

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
        # Frames waiting for the client: `_NO_FRAMES` until one has to wait, and again once drained.
        self.queue: deque[tuple[tuple[int, str], bytes]] | tuple = _NO_FRAMES
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
            self._write_now(PING)
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
            parts.append(PING)
        floor = self.floor
        queue = self.queue
        while queue:
            key, frame = queue.popleft()
            if floor is None or key > floor:
                parts.append(frame)
                self.sent += 1
        self.queue = _NO_FRAMES
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
            self.queue = _NO_FRAMES
            self.wake()
            hub = _hub
            if hub is not None:
                hub.unregister(self)


_NO_STREAMS: frozenset = frozenset()


class Hub:
    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.process = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.db = _DbThreads(self.loop, workers=2, name="events-db")
        self.streams: dict[int, set[Stream]] = defaultdict(set)
        # workspace → subscription → its streams: streams with equal filters share one routing and
        # one copy of each batch's bytes (a fan-out to thousands of streams of one subscription
        # is one join, then one write per stream).
        self.groups: dict[int, dict[Subscription, set[Stream]]] = defaultdict(dict)
        # workspace → (type, sessionId or None) → the subscriptions (of `groups`) with that route.
        self.routes: dict[int, dict[tuple[str, str | None], set[Subscription]]] = defaultdict(lambda: defaultdict(set))
        self.stream_count = 0
        self._carrier: asyncio.Future | None = None
        self._maintenance: asyncio.Task | None = None
        # The carrier's own task. The event loop keeps only weak references to tasks: without
        # this one a subscription waiting on a quiet Redis is garbage-collected mid-await.
        self._carrier_task: asyncio.Task | None = None
        self._poke = asyncio.Event()
        self._place: Position | None = None  # where the follower stands in the log
        self._follower: asyncio.Task | None = None
        # Event ids announced on Redis that the follower has not read yet (id → monotonic time),
        # and the ids it read lately (an announcement may arrive after its event was read).
        self._awaited: dict[str, float] = {}
        self._lately_read: dict[str, float] = {}
        self.direct_writes = 0  # batches written straight to a stream (stats, tests)
        self._resumes: dict[tuple, _SharedResume] = {}
        self._admits: dict[tuple, _SharedAdmit] = {}
        self._acquiring: _SharedAcquire | None = None
        self._holders = itertools.count()
        self._opening = 0  # stream opens in progress (`opening`)
        self._commit_socket = None  # embedded: woken by other processes' commits (fanout.py)
        self.commit_wakeups = 0
        self.resume_reads = 0  # resume reads run (stats: a reconnect storm shares them)
        # SIGTERM under daphne: every stream ends with its response (clients resume elsewhere).
        daphne_stream.on_shutdown(self._close_all_for_shutdown)

    # --- database on the hub's threads ---------------------------------------------------
    def run_db(self, fn: Callable, *args, retry: bool = False, **kwargs) -> asyncio.Future:
        """`fn(*args, **kwargs)` on a hub thread (see `_db_job` for `retry`). Submitted at once:
        the job runs even if the caller stops waiting for the returned future."""
        return self.db.submit(partial(_db_job, fn, retry, *args, **kwargs))

    async def resume(self, *, workspace_id: int, last_event_id: str, subscription: Subscription,
                     types: frozenset[str]) -> Replay | None:
        """What a client reconnecting after `last_event_id` missed, as a `Replay` holding its first
        chunk (`resume_start`); None when the id cannot be resumed from. Call after `register`.
        One read serves every stream that resumes from the same id with the same types while it
        waits for a hub thread (a reconnect storm: most clients hold the same last id)."""
        read = await self._shared_read((workspace_id, last_event_id, types), resume_start,
                                       workspace_id=workspace_id, last_event_id=last_event_id, types=types)
        return None if read is None else Replay(workspace_id, types, subscription, read)

    async def resume_more(self, replay: Replay) -> None:
        """The replay's next chunk, read from the log after the place the last one reached (shared
        like `resume`'s first read)."""
        after = replay.reached
        read = await self._shared_read((replay.workspace_id, after.key(), replay.types), resume_chunk,
                                       workspace_id=replay.workspace_id, after=after, types=replay.types)
        replay.take(read)

    async def _shared_read(self, key: tuple, fn: Callable, **kwargs):
        """`fn(**kwargs)` on a hub thread, joined by every caller with the same `key` until it
        starts: a stream may join only a read that has not started, since it registered before
        it asked, so a read that starts later covers everything its live queue does not (the
        rule every resume keeps: subscribe, then read)."""
        shared = self._resumes.get(key)
        if shared is None or shared.started:
            shared = self._resumes[key] = _SharedResume()
            self.resume_reads += 1
            shared.future = self.loop.create_future()
            self._next_tick(self._submit_read, key, shared, fn, kwargs)
        return await asyncio.shield(shared.future)

    def _submit_read(self, key: tuple, shared: _SharedResume, fn: Callable, kwargs: dict) -> None:
        job = self.run_db(shared.run, fn, retry=True, **kwargs)
        job.add_done_callback(lambda _: self._resumes.get(key) is shared and self._resumes.pop(key))
        job.add_done_callback(partial(_chain, shared.future))

    async def admit(self, authorization: str | None, *, audiences: frozenset[str]) -> Admission:
        """`apps.access.admission.admit` on a hub thread, with one credential lookup for every open
        bearing the same header while it waits for the thread (a reconnect storm: thousands of
        clients of one key); each open is still counted against the rate limits on its own. A
        lookup that has started is not joined: a credential revoked meanwhile is seen."""
        key = (authorization, audiences)
        shared = self._admits.get(key)
        place = None if shared is None else shared.join()
        if place is None:
            shared = self._admits[key] = _SharedAdmit()
            shared.future = self.loop.create_future()
            place = shared.join()
            self._next_tick(self._submit_admit, key, shared, authorization, audiences)
        admissions = await asyncio.shield(shared.future)
        return admissions[place]

    def _submit_admit(self, key: tuple, shared: _SharedAdmit, authorization: str | None,
                      audiences: frozenset[str]) -> None:
        job = self.run_db(shared.run, authorization, audiences=audiences)
        job.add_done_callback(lambda _: self._admits.get(key) is shared and self._admits.pop(key))
        job.add_done_callback(partial(_chain, shared.future))

    def acquire_slot(self, *, workspace_id: int, limit: int) -> asyncio.Future:
        """A slot for one stream open (slots.acquire_slot): the future's result is its id, or None
        at the workspace's limit. The opens asking while the hub's threads are busy (a reconnect
        storm) join one job that takes all their slots in one Redis call (slots.acquire_slots),
        each decided in the order it asked, exactly as alone. The job runs even if the caller
        stops waiting: see `release_acquired_slot`."""
        # Unique per open: `process` is unique to this hub (pid and a random part), the count within it.
        request = (workspace_id, self.process, limit, str(next(self._holders)))
        batch = self._acquiring
        mine = None if batch is None else batch.join(request, self.loop)
        if mine is None:
            batch = self._acquiring = _SharedAcquire()
            mine = batch.join(request, self.loop)
            self._next_tick(self._submit_acquire, batch)
        return mine

    def _submit_acquire(self, batch: _SharedAcquire) -> None:
        done = self.run_db(batch.run, retry=True)
        done.add_done_callback(batch.settle)
        done.add_done_callback(lambda _: self._acquiring is batch and setattr(self, "_acquiring", None))

    def _next_tick(self, submit: Callable, *args) -> None:
        """`submit(*args)` once the loop has run what is ready now: the opens that Twisted read in
        the same pass (a burst arrives many per pass) join the job before it is even queued, not
        only while it waits for a busy thread (idle threads took each open's job alone)."""
        self.loop.call_soon(submit, *args)

    def opening(self) -> None:
        """A stream open begins (paired with `opened`): while a burst is in progress the follower
        batches its polls (BURST_OPENS)."""
        self._opening += 1

    def opened(self) -> None:
        self._opening -= 1

    def release_acquired_slot(self, acquiring: asyncio.Future) -> None:
        """Done-callback for an acquire whose stream was abandoned before it finished."""
        if not acquiring.cancelled() and acquiring.exception() is None and acquiring.result() is not None:
            self.run_db(slots.release_slot, acquiring.result(), retry=True)

    def live_slot_ids(self) -> list[slots.SlotId]:
        return [s.slot_id for s in self.all_streams() if s.slot_id is not None]

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
        if self._follower is None:
            # Live from here: what settled before the follower started is for resume, not live.
            self._place = await self.run_db(self._start_place, retry=True)
            if self._follower is None:
                fanout.local_wakeups.append(self._wake_from_any_thread)
                self._listen_for_commits()
                self._follower = asyncio.ensure_future(self._follow())
        if settings.REDIS_URL:
            import redis.asyncio as aioredis

            # Named: while this connection is open the process is alive, and its stream slots
            # are its own (slots.py frees a killed process's slots when its name is gone).
            client = aioredis.Redis.from_url(
                settings.REDIS_URL, socket_connect_timeout=5, client_name=slots.hub_client_name(self.process)
            )
            pubsub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(fanout.redis_channel())
            except BaseException:
                await pubsub.aclose()
                await client.aclose()
                raise
            self._carrier_task = asyncio.ensure_future(self._carry_redis(client, pubsub))
            # A restart after a kill: the killed processes' slots go now, before their clients'
            # reconnects fill the workspace (a refused open evicts too, slots.py).
            self.run_db(slots.evict_dead_processes, retry=True).add_done_callback(_log_failure)

    async def _carry_redis(self, client, pubsub) -> None:
        try:
            while True:
                # Wait for one message, then take every one already received without waiting
                # (redis-py: timeout=0 returns None when nothing is buffered; its parser keeps a
                # partly read reply for the next call): one wake-up of the follower per burst.
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
                now = time.monotonic()
                taken = 0
                while message is not None:
                    if message.get("type") == "message":
                        event_id = self._announced_id(message["data"])
                        if event_id is not None and event_id not in self._lately_read:
                            self._awaited[event_id] = now
                    taken += 1
                    if taken >= REDIS_BATCH_MAX:
                        break
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=0)
                self._poke.set()
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

    @staticmethod
    def _announced_id(data: bytes) -> str | None:
        """The event id of a message on the channel (fanout.wire_message: a routing header, then
        the frame, which the follower builds again from the log)."""
        try:
            return orjson.loads(data.partition(b"\n")[0])["i"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            logger.warning("ignored a message on the event channel that is not an event announcement")
            return None

    def _listen_for_commits(self) -> None:
        """Embedded: another process's commit wakes the follower through a datagram (fanout.py)."""
        sock = fanout.commit_listener(self._poke.set)
        if sock is None:
            return
        self._commit_socket = sock

        def readable() -> None:
            try:
                while True:
                    sock.recv(64)
                    self.commit_wakeups += 1
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                return
            self._poke.set()

        self.loop.add_reader(sock.fileno(), readable)

    def _wake_from_any_thread(self) -> None:
        self.loop.call_soon_threadsafe(self._poke.set)

    @staticmethod
    def _start_place() -> Position:
        return Position(selectors.horizon() - 1, "", int(time.time() * 1000))

    async def _follow(self) -> None:
        # Polls start every period, not that long after the previous dispatch ended: at 1,000
        # streams a poll and its dispatch take ~30 ms, which stretched the period (and so every
        # event's wait for the next poll) to ~130 ms. One poll at a time; a poll that falls
        # behind starts the next one at once rather than catching up. A wake-up (a commit here,
        # an announcement on Redis) starts one at once.
        period = REDIS_FOLLOW_POLL_SECONDS if settings.REDIS_URL else FOLLOW_POLL_SECONDS
        await_delay = AWAIT_POLL_SECONDS
        next_poll = last_poll = self.loop.time()
        while True:
            if self._awaited:
                # Announced but not read: an older transaction holds the horizon. Soon again.
                next_poll = self.loop.time() + await_delay
                await_delay = min(await_delay * 2, FOLLOW_POLL_SECONDS)
            else:
                await_delay = AWAIT_POLL_SECONDS
                next_poll = max(next_poll + period, self.loop.time())
            delay = next_poll - self.loop.time()
            if delay > 0 and not self._poke.is_set():
                # A timer, not `wait_for` (which wraps the wait in a task of its own each poll).
                timer = self.loop.call_later(delay, self._poke.set)
                try:
                    await self._poke.wait()
                finally:
                    timer.cancel()
            if self._opening >= BURST_OPENS:
                wait = last_poll + BURST_FOLLOW_SECONDS - self.loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)  # what is committed meanwhile joins this poll
            self._poke.clear()
            last_poll = self.loop.time()
            try:
                rows = await self.run_db(self._poll, retry=True)
            except Exception:  # noqa: BLE001 - a database hiccup: try again next poll
                logger.exception("event follower poll failed")
                await asyncio.sleep(1)
                continue
            self._note_read(rows)
            self.dispatch(rows)

    def _note_read(self, rows: list[tuple]) -> None:
        now = time.monotonic()
        lately, awaited = self._lately_read, self._awaited
        for row in rows:
            event_id = row[3][1]
            lately[event_id] = now
            awaited.pop(event_id, None)
        forget = now - AWAIT_FORGET_SECONDS
        if awaited and next(iter(awaited.values())) < forget:
            for event_id in [i for i, t in awaited.items() if t < forget]:
                # Never read within a minute: deleted by a purge, or a message not from this log.
                del awaited[event_id]
        while lately and next(iter(lately.values())) < forget:
            del lately[next(iter(lately))]

    def _poll(self) -> list[tuple]:
        # Runs on a hub thread, one poll at a time; the place moves only once the read is back,
        # so a poll retried on a fresh connection reads the same events again.
        events, place = selectors.read_log(after=self._place, limit=FOLLOW_BATCH)
        self._place = place
        if len(events) == FOLLOW_BATCH:
            self._wake_from_any_thread()  # more is waiting: poll again at once
        return [(e.workspace_id, e.type, e.session_id, (e.position, e.id), frame_for(e)) for e in events]

    async def _maintain(self) -> None:
        heartbeat = settings.CONNECT_SSE_HEARTBEAT_SECONDS
        check_every = max(0.25, heartbeat / 2)
        renew_every = slots.renew_every_seconds()
        next_ping = next_check = time.monotonic()
        next_lease = time.monotonic() + renew_every
        while True:
            await asyncio.sleep(min(check_every, heartbeat, renew_every))
            now = time.monotonic()
            if now >= next_ping:
                next_ping = now + heartbeat
                self._ping_all()  # not a loop here: its variable would keep a stream alive
            # Each duty on its own: a failing credential check must not starve lease renewal.
            if now >= next_lease:
                next_lease = now + renew_every
                await self._duty(self._renew_leases)
            if now >= next_check:
                next_check = now + check_every
                await self._duty(self._close_revoked)

    def _ping_all(self) -> None:
        for stream in self.all_streams():
            stream.ping()

    @staticmethod
    async def _duty(job: Callable) -> None:
        try:
            await job()
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - keep maintaining; log and retry next tick
            logger.exception("event hub maintenance failed")

    async def _renew_leases(self) -> None:
        """By id, the slots of the streams held now: a slot whose stream is gone (its consumer
        died, its release failed, its acquire was abandoned) is never renewed, so it lapses."""
        slot_ids = self.live_slot_ids()
        renewed = await self.run_db(slots.renew_leases, slot_ids=slot_ids, retry=True)
        if renewed < len(slot_ids):
            # Rows gone under open streams (renewal stalled past a lease, rows deleted by hand):
            # those streams end, so rows and streams agree again; their clients resume.
            present = await self.run_db(slots.existing_slots, slot_ids, retry=True)
            lost = [s for s in self.all_streams() if s.slot_id is not None and s.slot_id not in present]
            logger.warning("%d open streams had lost their slot rows; ending them", len(lost))
            for stream in lost:
                stream.close("slot_lost")

    async def _close_revoked(self) -> None:
        refs = {s.credential for s in self.all_streams()}
        if not refs:
            return
        bad = await self.run_db(invalid_credentials, refs, retry=True)
        if bad:
            for stream in self.all_streams():
                if stream.credential in bad:
                    stream.close("credential_revoked")

    def _close_all_for_shutdown(self) -> None:
        for stream in self.all_streams():
            stream.close("shutdown")

    def shutdown(self) -> None:
        """Stop this hub's tasks and threads (tests that run a hub on a loop of their own)."""
        for task in (self._maintenance, self._carrier_task, self._carrier, self._follower):
            if task is not None and not task.done():
                task.cancel()
        if self._wake_from_any_thread in fanout.local_wakeups:
            fanout.local_wakeups.remove(self._wake_from_any_thread)
        if self._commit_socket is not None:
            self.loop.remove_reader(self._commit_socket.fileno())
            self._commit_socket.close()
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
        once for all of them, connect/engine/daphne_stream.py). The per-stream work is the loop
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
                share = shares.get((workspace_id, subscription))
                if share is None:
                    shares[(workspace_id, subscription)] = [item]
                else:
                    share.append(item)
        direct = fanned = 0
        for (workspace_id, subscription), items in shares.items():
            group = self.groups.get(workspace_id, {}).get(subscription)
            if not group:
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
            "resumeReads": self.resume_reads,
            "commitWakeups": self.commit_wakeups,
        }


def _chain(future: asyncio.Future, job: asyncio.Future) -> None:
    """`future` gets `job`'s outcome."""
    if future.done():
        return
    if job.cancelled():
        future.cancel()
    elif job.exception() is not None:
        future.set_exception(job.exception())
    else:
        future.set_result(job.result())


def _log_failure(future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("event hub job failed", exc_info=future.exception())


_hub: Hub | None = None


def get_hub() -> Hub:
    """This process's hub, created on first use on the running event loop."""
    global _hub
    if _hub is None or _hub.loop is not asyncio.get_running_loop():
        _hub = Hub()
    return _hub


def current_hub() -> Hub | None:
    return _hub


RESUME_CHUNK = 200  # events one resume read brings: a resuming stream holds one chunk at a time


class ResumeRead:
    """One chunk read: every event of the types after a place, each as (log key, type, session id,
    frame), the place reached, and whether that is the end (the read was short: it reached the
    horizon). Shared by the streams that joined the read, and so is each subscription's share."""

    __slots__ = ("rows", "reached", "done", "shares")

    def __init__(self, rows: list[tuple[tuple[int, str], str, str | None, bytes]], reached: Position,
                 done: bool) -> None:
        self.rows, self.reached, self.done = rows, reached, done
        self.shares: dict[Subscription, tuple[list[tuple[tuple[int, str], bytes]], bytes]] = {}

    def share(self, subscription: Subscription) -> tuple[list[tuple[tuple[int, str], bytes]], bytes]:
        """The rows `subscription` matches, as (log key, frame), and their frames as one write:
        made once per subscription (a storm's clients mostly hold the same one), and the bytes
        shared by every stream writing them. Read-only for the caller."""
        share = self.shares.get(subscription)
        if share is None:
            matches = subscription.matches
            items = [(key, frame) for key, type_, session_id, frame in self.rows if matches(type_, session_id)]
            share = self.shares[subscription] = (items, b"".join(frame for _, frame in items))
        return share


def resume_start(*, workspace_id: int, last_event_id: str, types: frozenset[str]) -> ResumeRead | None:
    """The first chunk of what a client reconnecting after `last_event_id` missed, in log order.
    None when that id is not in this workspace's log (unknown, purged), older than the resume
    window, or too far behind (more than RESUME_MAX_EVENTS of its types after it).

    Read from the log exactly as REST reads it (settled rows only) with the stream's own types
    (its filters apply to each chunk, `Replay.take`): streams carry events in log order (the
    follower), so the client holds every event of its subscription up to its last id and none
    after it; rows not settled yet come live, in order, once they are."""
    ms = event_id_ms(last_event_id)
    window_ms = settings.CONNECT_SSE_RESUME_SECONDS * 1000
    if ms is None or ms < int(time.time() * 1000) - window_ms or not types:
        return None
    if ms < oldest_complete_ms(types):
        return None
    place = selectors.position_of(workspace_id=workspace_id, event_id=last_event_id)
    if place is None:
        return None
    read = resume_chunk(workspace_id=workspace_id, after=place, types=types)
    if not read.done and selectors.log_has_more_than(RESUME_MAX_EVENTS, after=place, workspace_id=workspace_id,
                                                   types=types):
        return None
    return read


def resume_chunk(*, workspace_id: int, after: Position, types: frozenset[str]) -> ResumeRead:
    """Up to RESUME_CHUNK events of `types` after `after` (settled), the place reached, and
    whether that was all (a short read stands at the horizon)."""
    rows, reached = selectors.read_log(after=after, limit=RESUME_CHUNK, workspace_id=workspace_id, types=types)
    return ResumeRead([((e.position, e.id), e.type, e.session_id, frame_for(e)) for e in rows], reached,
                      len(rows) < RESUME_CHUNK)


class Replay:
    """A resume in progress: the stream's share of the chunk read last (`items`, in log order,
    and `data`, their frames as one write), the place that read reached, and whether nothing
    more is to be read. The consumer writes a chunk once the client's socket takes more, then
    reads the next (`Hub.resume_more`): a resuming stream holds one chunk, never its whole
    missed window.

    It ends at a short read (it reached the horizon, which is past everything the follower had
    dispatched before the stream registered; what comes later is in its live queue), or as soon
    as the live queue's first event is at or below the place reached: the queue holds every event
    of the subscription the follower read after the stream registered, so from there on the
    queue has the rest. Live copies at or below the place reached are dropped (`floor`)."""

    __slots__ = ("workspace_id", "types", "subscription", "items", "data", "reached", "done")

    def __init__(self, workspace_id: int, types: frozenset[str], subscription: Subscription, read: ResumeRead) -> None:
        self.workspace_id, self.types, self.subscription = workspace_id, types, subscription
        self.take(read)

    def take(self, read: ResumeRead) -> None:
        self.reached, self.done = read.reached, read.done
        self.items, self.data = read.share(self.subscription)

    def caught_up(self, stream: Stream) -> bool:
        """After the chunk is written: whether the replay is over. Drops the live copies the
        replay covered from the stream's queue, and moves its floor to the place reached."""
        floor = stream.floor = self.reached.key()
        queue = stream.queue
        covered = bool(queue) and queue[0][0] <= floor
        while queue and queue[0][0] <= floor:
            queue.popleft()
        return self.done or covered


class _SharedAdmit:
    """One admission job that the opens bearing the same Authorization header join until it
    starts (`Hub.admit`); the i-th to join gets the i-th admission. Joined on the loop, started on
    a hub thread: the lock makes the count the job reads the final one."""

    __slots__ = ("lock", "count", "started", "future")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.started = False
        self.future: asyncio.Future | None = None

    def join(self) -> int | None:
        """This open's place in the job, or None when it has started."""
        with self.lock:
            if self.started:
                return None
            self.count += 1
            return self.count - 1

    def run(self, authorization: str | None, *, audiences: frozenset[str]) -> list[Admission]:
        with self.lock:
            self.started = True
            count = self.count
        return admit_each(authorization, audiences=audiences, count=count)


class _SharedAcquire:
    """One slot job that the opens asking while it waits for a hub thread join (`Hub.acquire_slot`);
    each gets its own future. Joined on the loop, started on a hub thread: the lock makes the
    list the job reads the final one."""

    __slots__ = ("lock", "requests", "futures", "started")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[int, str, int, str]] = []
        self.futures: list[asyncio.Future] = []
        self.started = False

    def join(self, request: tuple[int, str, int, str], loop: asyncio.AbstractEventLoop) -> asyncio.Future | None:
        """This open's future, or None when the job has started."""
        with self.lock:
            if self.started:
                return None
            self.requests.append(request)
            future = loop.create_future()
            self.futures.append(future)
            return future

    def run(self) -> list:
        with self.lock:
            self.started = True
            requests = list(self.requests)
        # Safe to run twice (`retry`): each request's holder finds the slot a first run took.
        return slots.acquire_slots(requests)

    def settle(self, done: asyncio.Future) -> None:
        """On the loop: each open's result, or the job's error for every one of them."""
        error = None if done.cancelled() else done.exception()
        for n, future in enumerate(self.futures):
            if future.done():
                continue
            if done.cancelled():
                future.cancel()
            elif error is not None:
                future.set_exception(error)
            else:
                future.set_result(done.result()[n])


class _SharedResume:
    """One resume read that streams resuming from the same place join while it waits for a hub
    thread (`Hub._shared_read`). `started` is set on the hub thread before the read."""

    __slots__ = ("started", "future")

    def __init__(self) -> None:
        self.started = False
        self.future: asyncio.Future | None = None

    def run(self, fn: Callable, **kwargs):
        self.started = True
        return fn(**kwargs)
