"""The task cluster outlives an idle worker killed while it held the task queue's reader lock
(engine/taskcluster.py, django-q2#23): the rule, then the lock itself across real processes.
The whole cluster is tested live in tests/webhooks/test_live.py."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

import pytest
from django_q import cluster
from django_q.queues import Queue

from engine.taskcluster import StallWatch, watch_task_queue


def test_a_free_lock_is_never_released():
    watch = StallWatch(stall_seconds=5)
    assert not any(watch.observe(t, waiting=3, lock_free=True, deaths=1) for t in range(0, 60, 5))


def test_a_held_lock_with_nothing_waiting_is_a_live_idle_worker():
    watch = StallWatch(stall_seconds=5)
    watch.observe(0, waiting=0, lock_free=True, deaths=0)
    assert not any(watch.observe(t, waiting=0, lock_free=False, deaths=1) for t in range(1, 60))


def test_tasks_waiting_behind_a_held_lock_without_a_death_are_left_alone():
    watch = StallWatch(stall_seconds=5)
    watch.observe(0, waiting=0, lock_free=True, deaths=2)
    assert not any(watch.observe(t, waiting=4, lock_free=False, deaths=2) for t in range(1, 60))


def test_a_death_then_a_stall_of_five_seconds_releases_once():
    watch = StallWatch(stall_seconds=5)
    watch.observe(0, waiting=0, lock_free=True, deaths=0)
    decisions = [watch.observe(t, waiting=2, lock_free=False, deaths=1) for t in (1, 2, 4, 5.9, 6, 7, 8, 20)]
    assert decisions == [False, False, False, False, True, False, False, False]


def test_the_stall_clock_restarts_when_the_queue_moves():
    watch = StallWatch(stall_seconds=5)
    watch.observe(0, waiting=0, lock_free=True, deaths=0)
    watch.observe(1, waiting=2, lock_free=False, deaths=1)
    watch.observe(4, waiting=0, lock_free=False, deaths=1)  # drained: the holder is alive
    assert not watch.observe(7, waiting=1, lock_free=False, deaths=1)
    assert watch.observe(12, waiting=1, lock_free=False, deaths=1)


def test_the_cluster_starts_its_sentinel_with_the_watch():
    assert getattr(cluster.Sentinel, "watches_task_queue", False)


def _blocked_reader(queue) -> None:
    queue.get()  # takes the reader lock and waits on the pipe, as an idle worker does


def _reader(queue, results) -> None:
    results.put(queue.get())


@pytest.mark.timeout(60)
def test_a_reader_killed_while_waiting_no_longer_blocks_the_queue():
    context = multiprocessing.get_context("fork")
    queue, results = Queue(), context.Queue()
    dead = context.Process(target=_blocked_reader, args=(queue,))
    dead.start()
    deadline = time.monotonic() + 10
    while queue._rlock.acquire(False):  # wait until the reader holds the lock
        queue._rlock.release()
        assert time.monotonic() < deadline, "the reader never took the lock"
        time.sleep(0.01)
    os.kill(dead.pid, signal.SIGKILL)
    dead.join()

    queue.put("task")
    survivor = context.Process(target=_reader, args=(queue, results))
    survivor.start()
    time.sleep(0.5)
    assert results.empty(), "without the watch the queue is stuck behind the dead reader's lock"

    stop = threading.Event()
    watcher = threading.Thread(target=watch_task_queue, args=(queue, stop, lambda: 1),
                               kwargs={"check_seconds": 0.05, "watch": StallWatch(stall_seconds=0.3)})  # fmt: skip
    watcher.start()
    try:
        assert results.get(timeout=10) == "task"
    finally:
        stop.set()
        watcher.join()
        survivor.join(timeout=10)
    # The lock works again, and only one process holds it at a time.
    assert queue._rlock.acquire(timeout=1)
    assert not queue._rlock.acquire(False)
    queue._rlock.release()
