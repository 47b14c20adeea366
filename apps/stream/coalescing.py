"""Request coalescing for bursts of stream opens (a reconnect storm: thousands of clients of
one key, mostly resuming from the same id): opens that ask the same thing while the hub's
threads are busy share one database job, each still decided on its own.

The rule every shared job keeps: an open joins only a job that has not started. A credential
revoked before a lookup started is seen; a resume read that starts after a stream registered
covers everything its live queue does not."""

from __future__ import annotations

import asyncio
import itertools
import threading
from functools import partial
from typing import Callable

from apps.access.admission import Admission, admit_each
from apps.stream import slots


class Coalescing:
    """The shared jobs of one hub: `run_db` runs a job on its threads (`Hub.run_db`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, run_db: Callable[..., asyncio.Future], process: str) -> None:
        self.loop, self.run_db, self.process = loop, run_db, process
        self._reads: dict[tuple, SharedResume] = {}
        self._admits: dict[tuple, SharedAdmit] = {}
        self._acquiring: SharedAcquire | None = None
        self._holders = itertools.count()
        self.reads_run = 0  # resume reads run (stats: a reconnect storm shares them)

    async def read(self, key: tuple, fn: Callable, *, resume: bool = True, **kwargs):
        """`fn(**kwargs)` on a hub thread, joined by every caller with the same `key` until it
        starts: a stream may join only a read that has not started, since it registered before
        it asked, so a read that starts later covers everything its live queue does not (the
        rule every resume keeps: subscribe, then read). `resume`: counted in `reads_run`."""
        shared = self._reads.get(key)
        if shared is None or shared.started:
            shared = self._reads[key] = SharedResume()
            self.reads_run += resume
            shared.future = self.loop.create_future()
            self._next_tick(self._submit_read, key, shared, fn, kwargs)
        return await asyncio.shield(shared.future)

    def _submit_read(self, key: tuple, shared: SharedResume, fn: Callable, kwargs: dict) -> None:
        job = self.run_db(shared.run, fn, retry=True, **kwargs)
        job.add_done_callback(lambda _: self._reads.get(key) is shared and self._reads.pop(key))
        job.add_done_callback(partial(chain, shared.future))

    async def admit(self, authorization: str | None, *, audiences: frozenset[str]) -> Admission:
        """`apps.access.admission.admit` on a hub thread, with one credential lookup for every open
        bearing the same header while it waits for the thread; each open is still counted against
        the rate limits on its own."""
        key = (authorization, audiences)
        shared = self._admits.get(key)
        place = None if shared is None else shared.join()
        if place is None:
            shared = self._admits[key] = SharedAdmit()
            shared.future = self.loop.create_future()
            place = shared.join()
            self._next_tick(self._submit_admit, key, shared, authorization, audiences)
        admissions = await asyncio.shield(shared.future)
        return admissions[place]

    def _submit_admit(self, key: tuple, shared: SharedAdmit, authorization: str | None,
                      audiences: frozenset[str]) -> None:
        job = self.run_db(shared.run, authorization, audiences=audiences)
        job.add_done_callback(lambda _: self._admits.get(key) is shared and self._admits.pop(key))
        job.add_done_callback(partial(chain, shared.future))

    def acquire_slot(self, *, workspace_id: int, limit: int) -> asyncio.Future:
        """A slot for one stream open (slots.acquire_slot): the future's result is its id, or None
        at the workspace's limit. The opens asking while the hub's threads are busy join one job
        that takes all their slots in one call (slots.acquire_slots), each decided in the order it
        asked, exactly as alone. The job runs even if the caller stops waiting: see
        `release_acquired_slot`."""
        # Unique per open: `process` is unique to this hub (pid and a random part), the count within it.
        request = (workspace_id, self.process, limit, str(next(self._holders)))
        batch = self._acquiring
        mine = None if batch is None else batch.join(request, self.loop)
        if mine is None:
            batch = self._acquiring = SharedAcquire()
            mine = batch.join(request, self.loop)
            self._next_tick(self._submit_acquire, batch)
        return mine

    def _submit_acquire(self, batch: SharedAcquire) -> None:
        done = self.run_db(batch.run, retry=True)
        done.add_done_callback(batch.settle)
        done.add_done_callback(lambda _: self._acquiring is batch and setattr(self, "_acquiring", None))

    def release_acquired_slot(self, acquiring: asyncio.Future) -> None:
        """Done-callback for an acquire whose stream was abandoned before it finished."""
        if not acquiring.cancelled() and acquiring.exception() is None and acquiring.result() is not None:
            self.run_db(slots.release_slot, acquiring.result(), retry=True)

    def _next_tick(self, submit: Callable, *args) -> None:
        """`submit(*args)` once the loop has run what is ready now: the opens that Twisted read in
        the same pass (a burst arrives many per pass) join the job before it is even queued, not
        only while it waits for a busy thread (idle threads took each open's job alone)."""
        self.loop.call_soon(submit, *args)


def chain(future: asyncio.Future, job: asyncio.Future) -> None:
    """`future` gets `job`'s outcome."""
    if future.done():
        return
    if job.cancelled():
        future.cancel()
    elif job.exception() is not None:
        future.set_exception(job.exception())
    else:
        future.set_result(job.result())


class SharedAdmit:
    """One admission job that the opens bearing the same Authorization header join until it
    starts (`Coalescing.admit`); the i-th to join gets the i-th admission. Joined on the loop, started on
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


class SharedAcquire:
    """One slot job that the opens asking while it waits for a hub thread join (`Coalescing.acquire_slot`);
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


class SharedResume:
    """One resume read that streams resuming from the same place join while it waits for a hub
    thread (`Coalescing.read`). `started` is set on the hub thread before the read."""

    __slots__ = ("started", "future")

    def __init__(self) -> None:
        self.started = False
        self.future: asyncio.Future | None = None

    def run(self, fn: Callable, **kwargs):
        self.started = True
        return fn(**kwargs)
