"""The follower and its carrier: how this process learns that events were committed, and reads
them from the log in order.

- Follower. Every process follows the event log itself, in log order and below its horizon,
  exactly as REST pages it (`_poll`, selectors.follow_log): an event whose transaction began
  first and committed last is waited for, never overtaken, so a stream carries events in log
  order only and a client's last id is a place in the log (apps/stream/resume.py).
- Carrier = the follower's wake-up. With `REDIS_URL`: one Redis pub/sub subscription per
  process; each commit anywhere is published (fanout.announce_committed) and wakes every
  process's follower at once. Embedded (no Redis): a commit made in this process wakes it, one
  made in another process of the host sends it a datagram (fanout.commit_listener), and the
  poll covers a lost one. A wake-up costs one log read per process and burst, never per stream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import orjson
from django.conf import settings

from apps.core.redis_clients import async_redis_client
from apps.events import fanout, selectors
from apps.stream import slots
from apps.events.positions import Position
from apps.events.representations import frame_for_row

if TYPE_CHECKING:
    from apps.stream.hub import Hub

logger = logging.getLogger("connect.events")

# How often the follower polls when nothing woke it (embedded; with Redis every commit wakes it,
# and the slow poll only covers a lost publish), and how many events one poll reads at most. An
# event announced on Redis but not read yet (an older transaction still holds the horizon) is
# polled for again soon: AWAIT_POLL_SECONDS, doubling up to FOLLOW_POLL_SECONDS.
FOLLOW_POLL_SECONDS = 0.1
REDIS_FOLLOW_POLL_SECONDS = 1.0
AWAIT_POLL_SECONDS = 0.005
AWAIT_FORGET_SECONDS = 60.0
FOLLOW_BATCH = 1000
# Redis messages already received are dispatched together, up to this many at once.
REDIS_BATCH_MAX = 500
# While a burst of opens is in progress (at least BURST_OPENS at once: a reconnect storm, not
# ordinary churn) the follower polls at most every BURST_FOLLOW_SECONDS: each dispatch writes to
# every live stream, and those writes would take the loop from the opens waiting for it. Events
# wait at most that long for their batch; nothing is skipped (the follower reads the log). Not
# after the burst: that would hold the first live events after it back.
BURST_OPENS = 16
BURST_FOLLOW_SECONDS = 0.1


class Follower:
    """This process's follower and carrier, feeding `hub.dispatch` in log order."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.loop = hub.loop
        self._carrier: asyncio.Future | None = None
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
        self._commit_socket = None  # embedded: woken by other processes' commits (fanout.py)
        self.commit_wakeups = 0

    async def ensure_started(self) -> None:
        """Subscribed and following; retried by the next caller after a failure."""
        if self._carrier is None or (self._carrier.done() and self._carrier.exception() is not None):
            self._carrier = asyncio.ensure_future(self._start_carrier())
        await asyncio.shield(self._carrier)

    async def _start_carrier(self) -> None:
        if self._follower is None:
            # Live from here: what settled before the follower started is for resume, not live.
            self._place = await self.hub.run_db(self._start_place, retry=True)
            if self._follower is None:
                fanout.local_wakeups.append(self._wake_from_any_thread)
                self._listen_for_commits()
                self._follower = asyncio.ensure_future(self._follow())
        if settings.REDIS_URL:
            # Named: while this connection is open the process is alive, and its stream slots
            # are its own (apps/stream/slots frees a killed process's slots when its name is gone).
            client = async_redis_client(client_name=slots.hub_client_name(self.hub.process))
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
            self.hub.run_db(slots.evict_dead_processes, retry=True).add_done_callback(_log_failure)

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
                        for event_id in self._announced_ids(message["data"]):
                            if event_id not in self._lately_read:
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
            self.hub.close_all("carrier_lost")
            try:
                await pubsub.aclose()
                await client.aclose()
            except Exception:  # noqa: BLE001
                pass

    @staticmethod
    def _announced_ids(data: bytes) -> list[str]:
        """The event ids a message on the channel announces (fanout.wire_message: one
        transaction's, `n`; a process of the previous release sends one event a message, a
        header with its id `i`, then its frame, which the follower builds again from the log)."""
        try:
            header = orjson.loads(data.partition(b"\n")[0])
            ids = header["n"] if "n" in header else [header["i"]]
            if isinstance(ids, list) and all(isinstance(i, str) for i in ids):
                return ids
        except (orjson.JSONDecodeError, KeyError, TypeError):
            pass
        logger.warning("ignored a message on the event channel that is not an event announcement")
        return []

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
        # Polls start every period, not that long after the previous dispatch ended (a long
        # dispatch would stretch every event's wait for the next poll). One poll at a time; a
        # poll that falls behind starts the next one at once rather than catching up. A wake-up
        # (a commit here, an announcement on Redis) starts one at once.
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
            if self.hub.opening_count >= BURST_OPENS:
                wait = last_poll + BURST_FOLLOW_SECONDS - self.loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)  # what is committed meanwhile joins this poll
            self._poke.clear()
            last_poll = self.loop.time()
            try:
                rows = await self.hub.run_db(self._poll, retry=True)
            except Exception:  # noqa: BLE001 - a database hiccup: try again next poll
                logger.exception("event follower poll failed")
                await asyncio.sleep(1)
                continue
            self._note_read(rows)
            self.hub.dispatch(rows)

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
        rows, place = selectors.follow_log(after=self._place, limit=FOLLOW_BATCH)
        self._place = place
        if len(rows) == FOLLOW_BATCH:
            self._wake_from_any_thread()  # more is waiting: poll again at once
        return [(r.workspace_id, r.type, r.session_id, (r.position, r.id), frame_for_row(r)) for r in rows]

    def shutdown(self) -> None:
        for task in (self._carrier_task, self._carrier, self._follower):
            if task is not None and not task.done():
                task.cancel()
        if self._wake_from_any_thread in fanout.local_wakeups:
            fanout.local_wakeups.remove(self._wake_from_any_thread)
        if self._commit_socket is not None:
            self.loop.remove_reader(self._commit_socket.fileno())
            self._commit_socket.close()


def _log_failure(future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.error("event hub job failed", exc_info=future.exception())
