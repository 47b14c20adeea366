"""The task cluster keeps working after an idle worker is killed.

django-q2 hands tasks from its pusher to its workers through one multiprocessing.Queue. An idle
worker waits in `Queue.get()`, holding the queue's reader lock while it blocks on the pipe; a
worker killed there (SIGKILL, the OOM killer) never releases it, and every other worker then
waits forever while the sentinel reports the cluster healthy (django-q2/django-q2#23).

Releasing the lock is only safe when no live process holds it, and the sentinel can tell: a live
holder takes the next task at once. When tasks have waited STALL_SECONDS while the lock stays
taken, and a worker died since the lock was last seen free, the holder is that dead worker, and
the sentinel releases the lock for it; a task it was running, the row leases recover
(apps/webhooks/delivery.py; docs/decisions/runtime.md "Runtime").

Relies on (pinned in tests/test_engine_pins.py, checked at run time, else no watch): django-q2's
`Sentinel` (`start`, `reincarnate`, `pool`, `task_queue`, `stop_event`), `Queue._rlock` (private)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

logger = logging.getLogger("connect.tasks")

STALL_SECONDS = 5.0
CHECK_SECONDS = 1.0


@dataclass
class StallWatch:
    """Decides, from periodic looks at the task queue, when its reader lock was left by a dead
    worker. Pure: the caller looks and releases."""

    stall_seconds: float = STALL_SECONDS
    deaths_seen: int = 0  # worker deaths before the lock was last seen free
    stalled_since: float | None = None

    def observe(self, now: float, *, waiting: int, lock_free: bool, deaths: int) -> bool:
        """One look: tasks `waiting` in the queue, whether the reader lock was free, how many
        workers have died so far. True: release the lock now."""
        if lock_free:
            # Nobody holds it, so no dead worker does: deaths until now are harmless.
            self.deaths_seen, self.stalled_since = deaths, None
            return False
        if waiting == 0 or deaths == self.deaths_seen:
            # An idle live worker holds it (nothing to read yet), or no worker died that could.
            self.stalled_since = None
            return False
        if self.stalled_since is None:
            self.stalled_since = now
            return False
        if now - self.stalled_since < self.stall_seconds:
            return False
        self.deaths_seen, self.stalled_since = deaths, None
        return True


def watch_task_queue(task_queue, stop_event, deaths, *, check_seconds: float = CHECK_SECONDS,
                     watch: StallWatch | None = None) -> None:  # fmt: skip
    """Runs in the sentinel until the cluster stops: frees the task queue's reader lock when
    `watch` says its holder died. `deaths` returns how many workers have died so far."""
    watch = watch or StallWatch()
    lock = task_queue._rlock  # multiprocessing.Queue's reader lock (CPython 3.11)
    while not stop_event.wait(check_seconds):
        lock_free = lock.acquire(False)
        if lock_free:
            lock.release()
        if watch.observe(time.monotonic(), waiting=task_queue.qsize(), lock_free=lock_free, deaths=deaths()):
            logger.critical("task queue stalled behind a dead worker's lock; releasing it (django-q2#23)")
            lock.release()


def install() -> None:
    """Make django-q2's cluster start its sentinel with the watch (CoreConfig.ready, so every
    `qcluster` and `serve` has it). Checked against the django-q2 internals it relies on."""
    from django_q import cluster

    if getattr(cluster.Sentinel, "watches_task_queue", False):
        return
    base = cluster.Sentinel
    if not all(hasattr(base, name) for name in ("start", "reincarnate")):
        logger.warning("django-q2's Sentinel has changed; the task queue watch is not installed")
        return

    class WatchedSentinel(base):
        watches_task_queue = True

        def start(self) -> None:
            self.worker_deaths = 0
            if hasattr(self.task_queue, "_rlock"):
                threading.Thread(
                    target=watch_task_queue, args=(self.task_queue, self.stop_event, lambda: self.worker_deaths),
                    name="connect-task-queue-watch", daemon=True,
                ).start()  # fmt: skip
            super().start()

        def reincarnate(self, process) -> None:
            if process in self.pool:
                self.worker_deaths += 1
            super().reincarnate(process)

    cluster.Sentinel = WatchedSentinel
