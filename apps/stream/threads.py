"""The hub's database threads: every database job of the stream (follower polls, slot leases,
credential checks, each open's admission, slot and resume) runs here, never on
`database_sync_to_async`'s shared thread and never once per event per stream.

A finished job's result reaches the loop together with every other one that finished before
the loop got to them: one `call_soon_threadsafe` (a loop wake-up) per batch, not per job."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from typing import Any, Callable

from django.db import InterfaceError, OperationalError, close_old_connections

from engine.faults import discard_lost_connections, is_database_unavailable

logger = logging.getLogger("connect.events")


def db_job(fn: Callable, retry: bool, *args, **kwargs):
    """`fn` on a hub thread. Every PostgreSQL connection is tried as it leaves the pool
    (engine/postgresql); `retry`: `fn` is safe to run twice (a read, or a write made
    idempotent), so when its connection dies under it, it runs once more on a fresh one
    (engine/faults.py); otherwise the error stands and the caller answers 503."""
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


class DbThreads:
    """Jobs on a few daemon threads, their results set on the loop in batches (`_settle`).

    Nothing joins the threads at exit: a queued slot release then lapses with its lease, or goes
    with the process's Redis connection (apps/stream/slots.py)."""

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
